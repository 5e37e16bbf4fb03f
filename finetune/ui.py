"""The app's Fix tab as plain functions: build a fix set, memory pre-flight, launch / follow / stop a job.

Lives in the finetune layer (workbench never imports finetune). Every path a user types is resolved
inside the workspace (`workbench.safepath`); a job is resolved and pre-flighted as `workbench train` does,
then starts as the launchers' job process (`python -m finetune.job OUT/job.yaml`) with `subprocess.Popen`
in list form (never a shell), and each action returns its equivalent CLI command.
"""

from __future__ import annotations

import shlex
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import WorkbenchError, unknown_name
from workbench.html.plots import bar_chart_html
from workbench.safepath import resolve_inside
from workbench.store import Store, new_id

_PROCS: dict[str, subprocess.Popen[bytes]] = {}  # output_dir -> the job process this app started
_LOCK = threading.Lock()


def _cli(workspace: str | Path, *args: str) -> str:
    return shlex.join(["workbench", *args, "--workspace", str(workspace)])


@dataclass(frozen=True)
class FixSetView:
    summary: str  # markdown
    path: str  # the fix set directory, relative to the workspace
    cli: str


def build_fix(store: Store, run_id: str, out: str = "", strategy: str = "auto") -> FixSetView:
    """Build the run's fix set under the workspace (default `fixsets/<run id>`)."""
    from finetune.fixset import FixOptions, build_fixset

    run = store.get_run(run_id)
    rel = out.strip() or f"fixsets/{run.id}"
    dest = resolve_inside(store.workspace, rel)
    m = build_fixset(store, run.id, dest, FixOptions(strategy=strategy))
    lines = [f"**fix set** `{rel}` from run `{run.id}` (strategy {m.strategy}), sha256 `{m.sha256[:12]}`",
             f"- training rows: {', '.join(f'{k} {v}' for k, v in m.train_rows.items()) or 'none'}",
             f"- held-out probes: {len(m.heldout_probe_ids)}"]
    for split, per_cat in m.counts.items():
        lines.append(f"- {split}: " + ", ".join(f"{c} {n}" for c, n in per_cat.items()))
    if m.skipped:
        lines.append(f"- skipped: {len(m.skipped)} probes (e.g. {next(iter(m.skipped.items()))})")
    return FixSetView("\n".join(lines), rel, _cli(store.workspace, "fix", run.id, "--out", rel,
                                                  "--strategy", strategy))


@dataclass(frozen=True)
class PreflightView:
    verdict: str  # markdown
    chart_html: str  # the per-GPU breakdown
    breakdown: pd.DataFrame  # component, GiB
    recommendations: pd.DataFrame  # change, peak GiB, fits
    cli: str


RECOMMENDATION_COLUMNS = ("change", "peak GiB", "fits")
"""The pre-flight's "what to change" table (one row per change that makes a job fit)."""
EVENT_COLUMNS = ("at", "kind", "message")
"""A job's events table."""


def preflight(model: str, gpu_memory_gib: float, *, method: str = "lora", precision: str = "bf16",
              micro_batch: int = 1, seq_len: int = 2048, lora_rank: int = 16,
              gradient_checkpointing: bool = False, workspace: str | Path = ".") -> PreflightView:
    """Memory pre-flight of a job on `model` (a model directory inside the workspace, or a hub id
    already in the local cache)."""
    from finetune.preflight import GiB, PreflightSpec, estimate, load_shape, recommend

    model = model.strip()
    if not model:
        raise WorkbenchError("`model` is required (a model directory or hub id)")
    spec = PreflightSpec(model=load_shape(model), gpu_memory_gib=float(gpu_memory_gib), method=method,
                         precision=precision, micro_batch=int(micro_batch), seq_len=int(seq_len),
                         lora_rank=int(lora_rank), gradient_checkpointing=bool(gradient_checkpointing))
    est = estimate(spec)
    parts = [(k, v / GiB) for k, v in est.breakdown.items()]
    chart = bar_chart_html([(k, "GiB", v) for k, v in parts], unit=" GiB",
                           title=f"per-GPU peak {est.peak_bytes / GiB:.2f} GiB of {est.capacity_bytes / GiB:.0f}")
    recs = recommend(spec) if est.fits != "fits" else []
    verdict = (f"**{est.fits}**: peak {est.peak_bytes / GiB:.2f} GiB per GPU, capacity "
               f"{est.capacity_bytes / GiB:.1f} GiB, margin {est.margin_bytes / GiB:.2f} GiB")
    args = ["preflight", "--model", model, "--gpu-memory", f"{gpu_memory_gib:g}", "--method", method,
            "--precision", precision, "--micro-batch", str(micro_batch), "--seq-len", str(seq_len),
            "--lora-rank", str(lora_rank)] + (["--gradient-checkpointing"] if gradient_checkpointing else [])
    return PreflightView(
        verdict, chart, pd.DataFrame([(k, round(v, 3)) for k, v in parts], columns=["component", "GiB"]),
        pd.DataFrame([(r.change, round(r.estimate.peak_bytes / GiB, 2), str(r.estimate.fits)) for r in recs],
                     columns=list(RECOMMENDATION_COLUMNS)),
        _cli(workspace, *args))


@dataclass(frozen=True)
class LaunchView:
    output_dir: str  # relative to the workspace; the job id appears in it as `job_id` once started
    job_yaml: str
    pid: int
    cli: str


def launch_job(store: Store, fixset: str, *, method: str = "sft", max_steps: float | None = None,
               learning_rate: float | None = None, name: str = "") -> LaunchView:
    """Write `jobs/<name>/job.yaml` (resolved, pre-flighted on a GPU as `workbench train` does) and start
    the job process on it. Values come from widgets: the job spec's validation bounds them (a `max_steps`
    of 1e30 is refused, not started); `max_steps` None takes the job's own rule (epochs over the fix set)."""
    from finetune.job import METHODS, check_fits, from_dict, resolve, save_spec
    from finetune.job.launcher import job_command

    if method not in METHODS:
        raise unknown_name("method", method, METHODS)
    fix_dir = resolve_inside(store.workspace, fixset)
    rel = f"jobs/{name.strip() or new_id('ui')}"
    out = resolve_inside(store.workspace, rel)
    if out.exists() and any(out.iterdir()):
        raise WorkbenchError(f"`{rel}` already exists in the workspace; pick another job name")
    trainer: dict[str, Any] = {} if max_steps is None else {"max_steps": max_steps}
    if learning_rate:
        trainer["learning_rate"] = learning_rate
    job = resolve(from_dict({"fixset": str(fix_dir), "output_dir": str(out), "method": method,
                             "workspace": str(store.workspace), "trainer": trainer}, where="job"))
    check_fits(job)
    job_yaml = save_spec(job.spec, out / "job.yaml")
    log = (out / "job.log").open("ab")
    proc = subprocess.Popen(job_command(job_yaml, workspace=str(store.workspace)), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    with _LOCK:
        _PROCS[str(out)] = proc
    return LaunchView(rel, str(job_yaml), proc.pid, _cli(store.workspace, "train", f"{rel}/job.yaml"))


def job_id_of(store: Store, output_dir: str) -> str | None:
    """The store id of the job writing `output_dir` (None until it has started)."""
    p = resolve_inside(store.workspace, output_dir) / "job_id"
    return p.read_text().strip() or None if p.exists() else None


@dataclass(frozen=True)
class JobView:
    status: str  # markdown
    running: bool
    loss: pd.DataFrame  # step, value, name (for a line plot)
    events: pd.DataFrame  # at, kind, message


#: What a GRPO job's curves show beside its loss (which hovers near 0 and says little): the mean reward,
#: the abstention rates the reward-hacking watchdog reads, and the held-out greedy reward.
GRPO_CURVES = ("reward", "abstention/replay", "abstention/targeted", "heldout_reward")


def _plotted(metric: str, method: str) -> bool:
    return "loss" in metric or (method == "grpo" and metric in GRPO_CURVES)


def follow_job(store: Store, output_dir: str) -> JobView:
    """Status, metric curves and events of the job in `output_dir` (or its process, before it records)."""
    from finetune import records

    proc = _PROCS.get(str(resolve_inside(store.workspace, output_dir)))
    alive = proc is not None and proc.poll() is None
    job_id = job_id_of(store, output_dir)
    empty_loss = pd.DataFrame(columns=["step", "value", "name"])
    empty_events = pd.DataFrame(columns=list(EVENT_COLUMNS))
    if job_id is None or not records.job_exists(store, job_id):
        code = "" if proc is None or alive else f" (exited with {proc.returncode}; see {output_dir}/job.log)"
        return JobView(f"job in `{output_dir}`: {'starting' if alive else 'not started'}{code}", alive,
                       empty_loss, empty_events)
    job = records.get_job(store, job_id)
    rows = [(s, v, n) for s, n, v in records.metrics(store, job_id) if _plotted(n, job["method"])]
    ev = records.events(store, job_id)
    running = job["status"] in ("pending", "running") and (proc is None or alive)
    status = f"job `{job_id}`: **{job['status']}** ({job['method']})" + (
        f", adapter `{job['adapter_path']}`" if job.get("adapter_path") else "")
    return JobView(status, running,
                   pd.DataFrame(rows, columns=["step", "value", "name"]) if rows else empty_loss,
                   pd.DataFrame([(e.at, e.kind, e.message) for e in ev], columns=list(EVENT_COLUMNS)))


def stop_job(store: Store, output_dir: str, *, who: str = "app") -> str:
    """Terminate the job process this app started for `output_dir` and record it as stopped."""
    from finetune import records

    key = str(resolve_inside(store.workspace, output_dir))
    with _LOCK:
        proc = _PROCS.get(key)
    if proc is None:
        raise WorkbenchError(f"no job started by this app in `{output_dir}` (jobs started elsewhere: stop them "
                             "where they run)")
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    job_id = job_id_of(store, output_dir)
    if job_id and records.job_exists(store, job_id):
        job: dict[str, Any] = records.get_job(store, job_id)
        if job["status"] in ("pending", "running"):
            records.set_status(store, job_id, "stopped", finished=True)
            records.add_event(store, job_id, "stopped", f"stopped from the app by {who}")
    return f"stopped the job in `{output_dir}` (exit code {proc.returncode})"


#: Where a workspace's job folders are, besides those the store recorded: the app's and `train`'s `jobs/NAME`, and
#: `workbench demo`'s and `fix --train`'s `fix/RUN/METHOD`.
JOB_GLOBS = ("jobs/*/job.yaml", "fix/*/*/job.yaml")


def list_jobs(store: Store) -> list[tuple[str, str]]:
    """(label, job dir relative to the workspace) of every job folder of the workspace (a `job.yaml` in it): those
    the store recorded and those under JOB_GLOBS, newest first; the label reads `folder · method · status` (status
    from the store, else the job's result file, else "not started")."""
    from finetune import records
    from finetune.job.result import read_result

    root = store.workspace.resolve()
    specs = {p.resolve() for pattern in JOB_GLOBS for p in root.glob(pattern)}
    specs |= {p for d in records.job_dirs(store) if (p := (root / d).resolve() / "job.yaml").is_file()}
    found = sorted((p for p in specs if p.is_relative_to(root)), key=lambda p: p.stat().st_mtime, reverse=True)
    out = []
    for spec in found:
        rel = spec.parent.relative_to(root).as_posix()
        job_id = job_id_of(store, rel)
        method, status = _spec_method(spec), "not started"
        if job_id and records.job_exists(store, job_id):
            job = records.get_job(store, job_id)
            method, status = str(job["method"]), str(job["status"])
        elif (res := read_result(spec.parent)) is not None:
            status = res.status
        out.append((f"{rel} · {method} · {status}", rel))
    return out


def _spec_method(spec: Path) -> str:
    import yaml

    try:
        data = yaml.safe_load(spec.read_text())
    except (OSError, yaml.YAMLError):
        return "?"
    return str(data.get("method", "?")) if isinstance(data, dict) else "?"


@dataclass(frozen=True)
class JobDetail:
    """An existing job opened in the Fix tab: what it was asked (its job.yaml) and what it did."""

    summary: str  # markdown: status, steps, final loss, held-out before/after, known facts broken
    config: str  # the job.yaml text
    view: JobView  # status, curves and events, as `follow_job` gives them
    cli: str  # the command that made this job (with --resume when it was cut short)


def open_job(store: Store, output_dir: str) -> JobDetail:
    """The job in `output_dir` (inside the workspace): its config, its result (known facts broken: how many of the
    checked known facts the trained model now gets wrong) and its curves."""
    from finetune.job.result import read_result

    path = resolve_inside(store.workspace, output_dir.strip())
    spec = path / "job.yaml"
    if not spec.is_file():
        raise WorkbenchError(f"`{output_dir}` holds no job.yaml (pick a job dir under jobs/)")
    view = follow_job(store, output_dir.strip())
    res = read_result(path)
    lines = [view.status]
    if res is None:
        lines.append("- no result yet (the job is running, or it ended without writing `result.json`)")
    else:
        fmt = "-" if res.final_loss is None else f"{res.final_loss:.4f}"
        lines.append(f"- {res.status} after {res.steps} steps, final loss {fmt}: {res.message}")
        if res.heldout_before is not None or res.heldout_after is not None:
            lines.append(f"- held-out: {_num(res.heldout_before)} → {_num(res.heldout_after)}")
        if res.known_checked:
            frac = res.known_broken_fraction or 0.0
            lines.append(f"- **known facts broken by the job: {len(res.known_broken)} of {res.known_checked}** "
                         f"({frac:.1%}) of the fix set's validation slice: known facts the base model answered "
                         "right that no training row holds, checked after training"
                         + (f": {', '.join(res.known_broken[:10])}" if res.known_broken else ""))
        else:
            lines.append("- known facts broken by the job: not measured (the fix set has no validation slice)")
        lines += [f"- {note}" for note in res.protection_notes()]
    lines += _gate_lines(store, Path(res.adapter) if res is not None and res.adapter else path / "adapter")
    rel = spec.relative_to(Path(store.workspace).resolve()).as_posix()
    # A finished job's equivalent command writes its card from its records (`workbench train` again would train
    # again); one that started but has no result (killed, stopped) continues with --resume (from its last complete
    # checkpoint, else from the start under the same job id); one not started yet, `workbench train`.
    cut_short = res is None and not view.running and job_id_of(store, output_dir) is not None
    adapter = Path(res.adapter) if res is not None and res.adapter else None
    if adapter is not None and adapter.resolve().is_relative_to(Path(store.workspace).resolve()):
        args: tuple[str, ...] = ("card", adapter.resolve().relative_to(Path(store.workspace).resolve()).as_posix())
        lines.append(f"- made by `workbench train {rel}` (running it again trains again)")
    else:
        args = ("train", rel, "--resume") if cut_short else ("train", rel)
    return JobDetail("\n".join(lines), spec.read_text(), view, _cli(store.workspace, *args))


def _gate_lines(store: Store, adapter: Path) -> list[str]:
    """The latest recorded gate of the job's adapter, its known-facts count beside the job's, each denominator
    named: the gate counts every probe the baseline run got right, the job its fix set's validation slice."""
    from workbench.decisions import gates_of_adapter

    gates = gates_of_adapter(store, adapter) if adapter.exists() else []
    if not gates:
        return ["- gate: none recorded for this adapter yet (`workbench regress --candidate-adapter ...`)"]
    g = gates[0]
    return [f"- gate `{g.id}` (**{g.verdict.upper()}**, {g.gate.policy_label}): known facts broken "
            f"{g.known_broken} of the baseline run (every probe it answered right); {g.guard}"]


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"

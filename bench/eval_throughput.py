"""Eval throughput on the synthetic world: greedy + k samples per probe, probes per second.

    .venv/bin/python bench/eval_throughput.py [--entities 120] [--samples 8] [--threads 2]
        [--limit N] [--skip-vllm] [--skip-lmeval] [--lmeval-batch-sizes 64,288] [--out FILE]

Measured side by side in one process run (each in a fresh workspace, so nothing comes from the cache,
except the cached rerun; model load / vLLM engine start timed apart from generation):

  workbench hf, batched (the backend's batch size) vs one prompt at a time (batch_size 1)
  workbench hf, its decode loop (`decode: loop`, default) vs transformers' generate
  workbench hf, cached rerun of the batched run: wall time and model calls (must be 0)
  workbench hf / vllm, k samples vs 1 sample
  lm-evaluation-harness (its own venv, .bench-cache/lmeval-venv) hf backend, and vllm if it runs
  workbench vllm: base model vs a LoRA adapter (on one LoRA-enabled engine)

The world model is built once into .bench-cache/world[-N]; the lm-eval venv is made there on first
use (torch from the local CPU wheel first, then lm-eval from PyPI). Figures go to stdout and, as
JSON, to --out. Nothing is committed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _world import CACHE, ROOT, cached_world

sys.path.insert(0, str(ROOT))

TASK_DIR = ROOT / "bench" / "lmeval_task"
LMEVAL_VENV = CACHE / "lmeval-venv"
LMEVAL_SPEC = "lm-eval[hf]==0.4.13"  # newest on PyPI when written; [hf]: accelerate + peft for its HF backend
TORCH_SPEC = "torch==2.13.0"  # same as the workbench venv; the CPU wheel (pip's find-links has it)
BASELINE = "workbench-hf batched"
GENERATE = "workbench-hf batched, decode=generate"  # transformers' generate, the path before the decode loop


# -- setup ---------------------------------------------------------------------------------------
def make_adapter(model_dir: Path, out: Path, seed: int = 1) -> str:
    """A peft LoRA (r 8, q/v) with random non-zero B, so it really changes the answers."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    if (out / "adapter_config.json").exists():
        return str(out)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    get_peft_model(model, LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                                     init_lora_weights=False)).save_pretrained(str(out))
    return str(out)


def ensure_lmeval_venv(log: list[str]) -> Path | None:
    """The lm-eval venv's python (made on first use), or None with the reason in `log`. Its transformers is the
    workbench's own version: left to pip it resolved 5.23 against the workbench's 5.19, and a bare `generate`
    ran 1.3-1.8x faster under 5.23 (README "Throughput on the real model"), which a backend ratio must not count."""
    import importlib.metadata

    transformers = f"transformers=={importlib.metadata.version('transformers')}"
    py = LMEVAL_VENV / "bin" / "python"
    check = [str(py), "-c", "import lm_eval, torch, accelerate, importlib.metadata as m; "
             f"assert m.version('transformers') == {transformers.split('==')[1]!r}"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return py
    print(f"making {LMEVAL_VENV} (torch CPU wheel, then {LMEVAL_SPEC}) ...", flush=True)
    base_python = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}") or "python3"
    steps = [[base_python, "-m", "venv", "--clear", str(LMEVAL_VENV)],  # no --system-site-packages
             [str(py), "-m", "pip", "install", "-q", TORCH_SPEC],
             [str(py), "-m", "pip", "install", "-q", LMEVAL_SPEC, transformers]]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            log.append(f"lm-eval venv: `{' '.join(cmd)}` failed: {r.stderr.strip()[-800:]}")
            return None
    return py


def lmeval_versions(py: Path) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
            "('lm_eval', 'torch', 'transformers', 'datasets') }))")
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True)
    out = json.loads(r.stdout) if r.returncode == 0 else {}
    r = subprocess.run([str(py), "-c", "import vllm; print(vllm.__version__)"],
                       capture_output=True, text=True)
    out["vllm"] = r.stdout.strip() if r.returncode == 0 else "not installed"
    return out


def write_lmeval_tasks(probes_file: Path, samples: int, out_dir: Path) -> list[str]:
    """Task YAMLs (greedy + `samples` sampled repeats) over `probes_file`; returns the task names."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(TASK_DIR / "utils.py", out_dir / "utils.py")
    names = []
    for tmpl, name in (("world_greedy.yaml.tmpl", "wbbench_greedy"), ("world_sampled.yaml.tmpl", "wbbench_sampled")):
        if name == "wbbench_sampled" and samples == 0:
            continue
        text = (TASK_DIR / tmpl).read_text().replace("__TASK__", name).replace(
            "__DATA_FILE__", str(probes_file)).replace("__REPEATS__", str(samples))
        (out_dir / f"{name}.yaml").write_text(text)
        names.append(name)
    return names


# -- measurements --------------------------------------------------------------------------------
class Counted:
    """Counts the backend's generate calls (model calls) and prompts, without changing it."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.calls, self.requests = backend, 0, 0
        inner = backend.generate

        def generate(requests: Any) -> Any:
            self.calls += 1
            self.requests += len(requests)
            return inner(requests)

        backend.generate = generate


def workbench_run(label: str, spec: Any, suite: Any, loaded: Any, samples: int, *, backend: Any,
                  workspace: Path | None = None) -> dict[str, Any]:
    """One run_eval in a fresh workspace (or `workspace`, for the cached rerun), timed."""
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store

    ws = workspace or Path(tempfile.mkdtemp(prefix="wb-eval-bench-", dir=CACHE))
    store = Store.open(ws)
    counter = Counted(backend)
    t = time.perf_counter()
    cpu = time.process_time()
    summary = run_eval(store, spec, suite, loaded, EvalOptions(samples=samples, bootstrap=0), backend=backend)
    wall = time.perf_counter() - t
    cpu = time.process_time() - cpu
    n = len(loaded.probes)
    acc = summary.metrics.get("overall", {}).get("accuracy")
    row = {"config": label, "wall_s": wall, "probes": n, "probes_per_s": n / wall, "samples": samples,
           "completions": summary.generated + summary.cached, "generated": summary.generated,
           "cached": summary.cached, "model_calls": counter.calls, "main_process_cpu_s": cpu,
           "greedy_accuracy": acc, "mean_sample_accuracy": summary.metrics.get("mean_sample_accuracy"),
           "workspace": str(ws)}
    print(f"  {label:<44} {wall:8.2f}s  {n / wall:8.1f} probes/s  generated {summary.generated}, "
          f"cached {summary.cached}, model calls {counter.calls}", flush=True)
    return row


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run_lmeval(py: Path, backend: str, model_dir: Path, task_dir: Path, tasks: list[str], batch_size: str,
               threads: int, n_probes: int, env: dict[str, str], label: str) -> dict[str, Any]:
    out = CACHE / f"lmeval-{backend}-{batch_size}.json"
    out.unlink(missing_ok=True)
    cmd = [str(py), str(TASK_DIR / "driver.py"), "--backend", backend, "--model", str(model_dir),
           "--include-path", str(task_dir), "--tasks", ",".join(tasks), "--batch-size", batch_size,
           "--threads", str(threads), "--out", str(out)]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    total = time.perf_counter() - t
    (CACHE / f"lmeval-{backend}-{batch_size}.log").write_text(r.stdout + "\n" + r.stderr)
    if r.returncode != 0 or not out.exists():
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-6:])
        raise RuntimeError(f"lm-eval {backend} exited {r.returncode}: {tail}")
    res = json.loads(out.read_text())
    wall = float(res["wall_s"])
    row = {"config": label, "wall_s": wall, "probes": n_probes, "probes_per_s": n_probes / wall,
           "load_s": res["load_s"], "process_total_s": total, "batch_size": batch_size,
           "n_samples": res.get("n_samples"), "lm_eval_results": res.get("results")}
    print(f"  {label:<44} {wall:8.2f}s  {n_probes / wall:8.1f} probes/s  (load {res['load_s']:.1f}s, "
          f"process total {total:.1f}s)", flush=True)
    return row


# -- main ----------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=120, help="world size (4 probes per entity)")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N probes (0 = all)")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="torch threads everywhere (vLLM: cores bound)")
    ap.add_argument("--hf-batch-size", type=int, default=0, help="0 = the hf backend's default")
    ap.add_argument("--vllm-batch-size", type=int, default=0, help="0 = the vllm backend's default")
    ap.add_argument("--lmeval-batch-sizes", default="64",
                    help="comma list; lm-eval counts sequences (each repeat is one), the best is compared")
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--skip-lmeval", action="store_true")
    ap.add_argument("--skip-lmeval-vllm", action="store_true")
    ap.add_argument("--skip-single", action="store_true", help="skip the one-prompt-at-a-time hf run")
    ap.add_argument("--single-limit", type=int, default=0,
                    help="run one-prompt-at-a-time on the first N probes only (0 = all; probes/s compares)")
    ap.add_argument("--out", type=Path, default=CACHE / "eval_throughput.json")
    args = ap.parse_args()

    CACHE.mkdir(exist_ok=True)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    # vLLM on CPU binds its worker's OpenMP threads; "auto" keeps a core for the scheduler (1 of 2
    # here), so bind explicitly to as many cores as the other configurations get threads.
    cpus = sorted(os.sched_getaffinity(0))[: args.threads]
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cpus)))
    import torch

    torch.set_num_threads(args.threads)

    from workbench.backends.hf import HFBackend
    from workbench.probes import resolve_probes
    from workbench.types import ModelSpec

    notes: list[str] = []
    paths = cached_world(args.entities, verbose=True)
    suite, loaded = resolve_probes(str(paths.suite))
    probes_file = paths.probes
    if args.limit:
        loaded = dataclasses.replace(loaded, probes=loaded.probes[: args.limit])
        probes_file = CACHE / f"probes-{args.entities}-{args.limit}.jsonl"
        probes_file.write_text("".join(paths.probes.read_text().splitlines(keepends=True)[: args.limit]))
    n, k = len(loaded.probes), args.samples
    model = str(paths.model)
    print(f"{n} probes x (greedy + {k} samples), max_tokens {suite.max_tokens}, stop {suite.stop}; "
          f"{args.threads} thread(s); {os.cpu_count()} CPUs; load avg {os.getloadavg()[0]:.2f}", flush=True)
    rows: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}

    def hf_spec(batch_size: int | None, decode: str = "loop") -> ModelSpec:
        opts: tuple[tuple[str, object], ...] = (("decode", decode),)
        if batch_size:
            opts += (("batch_size", batch_size),)
        return ModelSpec(model=model, backend="hf", dtype="float32", options=opts)

    def hf_backend(spec: ModelSpec) -> tuple[Any, float]:
        b = HFBackend(spec)

        def load() -> None:
            _ = b.tokenizer  # loads tokenizer + model
            from workbench.types import GenerationRequest, SamplingParams
            b.generate([GenerationRequest("Q: warm up A:", SamplingParams(max_tokens=2))])  # warm-up
        _, s = timed(load)
        return b, s

    # -- workbench hf ----------------------------------------------------------------------------
    print("workbench hf:", flush=True)
    spec = hf_spec(args.hf_batch_size or None)
    b, load_s = hf_backend(spec)
    extra["hf_load_s"] = load_s
    extra["hf_batch_size"] = b.batch_size
    batched = workbench_run(BASELINE, spec, suite, loaded, k, backend=b)
    batched["load_s"] = load_s
    rows.append(batched)
    # Cached rerun: same workspace, a new (unloaded) backend: nothing may reach the model.
    b2 = HFBackend(spec)
    cached = workbench_run("workbench-hf cached rerun", spec, suite, loaded, k, backend=b2,
                           workspace=Path(batched["workspace"]))
    cached["model_loaded"] = b2._model is not None
    rows.append(cached)
    if not args.skip_single:
        spec1 = hf_spec(1)
        b1, _ = hf_backend(spec1)
        one_loaded = (dataclasses.replace(loaded, probes=loaded.probes[: args.single_limit])
                      if args.single_limit else loaded)
        rows.append(workbench_run("workbench-hf one prompt at a time", spec1, suite, one_loaded, k, backend=b1))
        del b1
    rows.append(workbench_run("workbench-hf batched, 1 sample", spec, suite, loaded, 1, backend=b))
    del b, b2
    gspec = hf_spec(args.hf_batch_size or None, "generate")
    bg, _ = hf_backend(gspec)
    rows.append(workbench_run(GENERATE, gspec, suite, loaded, k, backend=bg))
    del bg

    # -- lm-eval ---------------------------------------------------------------------------------
    lm_py = None
    if not args.skip_lmeval:
        lm_py = ensure_lmeval_venv(notes)
    if lm_py is not None:
        extra["lmeval_env"] = lmeval_versions(lm_py)
        print(f"lm-eval ({extra['lmeval_env']}):", flush=True)
        task_dir = CACHE / f"lmeval-tasks-{args.entities}-{args.limit}-{k}"
        tasks = write_lmeval_tasks(probes_file.resolve(), k, task_dir)
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1",
               "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "HF_DATASETS_CACHE": str(CACHE / "hf-datasets")}
        env.pop("PYTHONPATH", None)
        best: dict[str, Any] | None = None
        for bs in filter(None, args.lmeval_batch_sizes.split(",")):
            try:
                row = run_lmeval(lm_py, "hf", paths.model, task_dir, tasks, bs, args.threads, n, env,
                                 f"lm-eval hf (batch_size {bs})")
            except RuntimeError as e:
                notes.append(str(e))
                print(f"  {e}", flush=True)
                continue
            rows.append(row)
            if best is None or row["wall_s"] < best["wall_s"]:
                best = row
        extra["lmeval_hf_best"] = best["config"] if best else None
        if not args.skip_lmeval_vllm and not args.skip_vllm:
            if extra["lmeval_env"].get("vllm") == "not installed":
                notes.append("lm-eval vllm: vllm is not installed in the lm-eval venv (see the report)")
            else:
                try:
                    rows.append(run_lmeval(lm_py, "vllm", paths.model, task_dir, tasks, "auto", args.threads,
                                           n, env, "lm-eval vllm"))
                except RuntimeError as e:
                    notes.append(str(e))
                    print(f"  {e}", flush=True)

    # -- workbench vllm --------------------------------------------------------------------------
    if not args.skip_vllm:
        from workbench.backends.vllm import VLLMBackend

        print(f"workbench vllm (VLLM_CPU_OMP_THREADS_BIND={os.environ['VLLM_CPU_OMP_THREADS_BIND']}):", flush=True)
        vopts: tuple[tuple[str, object], ...] = (("max_model_len", 64),)
        if args.vllm_batch_size:
            vopts += (("batch_size", args.vllm_batch_size),)
        vspec = ModelSpec(model=model, backend="vllm", dtype="float32", options=vopts)
        vb = VLLMBackend(vspec)
        from workbench.types import GenerationRequest, SamplingParams

        warm_req = [GenerationRequest("Q: warm up A:", SamplingParams(max_tokens=2)),
                    GenerationRequest("Q: warm up A:", SamplingParams(max_tokens=2, temperature=1.0, n=max(k, 1)))]
        _, start_s = timed(lambda: vb._engine(()))
        _, warm_s = timed(lambda: vb.generate(warm_req))  # first generate pays one-off costs (hf gets one too)
        extra["vllm_engine_start_s"], extra["vllm_warmup_s"] = start_s, warm_s
        print(f"  engine start (no LoRA): {start_s:.1f}s, warm-up generate {warm_s:.1f}s", flush=True)
        r = workbench_run("workbench-vllm", vspec, suite, loaded, k, backend=vb)
        r["engine_start_s"] = start_s
        rows.append(r)
        rows.append(workbench_run("workbench-vllm, 1 sample", vspec, suite, loaded, 1, backend=vb))
        vb.close()

        # Adapter cost: one LoRA engine, base model vs adapter, same probes.
        adapter = make_adapter(paths.model, CACHE / f"adapter-{args.entities}")
        lopts = (*vopts, ("enable_lora", True), ("max_loras", 1), ("max_lora_rank", 8))
        lspec = ModelSpec(model=model, backend="vllm", dtype="float32", options=lopts)
        aspec = dataclasses.replace(lspec, adapter=adapter)
        lb, ab = VLLMBackend(lspec), VLLMBackend(aspec)
        _, lstart = timed(lambda: lb._engine(()))
        ab._engine(())  # same key: the same engine
        lb.generate(warm_req)
        ab.generate(warm_req)  # loads the adapter into the engine (as a first adapter request would)
        extra["vllm_lora_engine_start_s"] = lstart
        print(f"  engine start (LoRA enabled): {lstart:.1f}s", flush=True)
        rows.append(workbench_run("workbench-vllm LoRA engine, base model", lspec, suite, loaded, k, backend=lb))
        rows.append(workbench_run("workbench-vllm LoRA engine, adapter", aspec, suite, loaded, k, backend=ab))
        lb.close()
        ab.close()

    # -- report ----------------------------------------------------------------------------------
    by = {r["config"]: r for r in rows}
    base = by[BASELINE]["probes_per_s"]
    for r in rows:
        r["ratio_vs_baseline"] = r["probes_per_s"] / base

    def ratio(a: str, b: str, key: str = "probes_per_s") -> float | None:
        return by[a][key] / by[b][key] if a in by and b in by else None

    lm_best = extra.get("lmeval_hf_best")
    ratios = {
        "hf batched / one-at-a-time (probes/s)": ratio(BASELINE, "workbench-hf one prompt at a time"),
        "hf cached rerun / first run (probes/s)": ratio("workbench-hf cached rerun", BASELINE),
        "hf cached rerun model calls": by["workbench-hf cached rerun"]["model_calls"],
        "workbench-hf / lm-eval-hf (probes/s, goal >= 1.5)": ratio(BASELINE, lm_best) if lm_best else None,
        "workbench-hf decode=generate / lm-eval-hf (probes/s)": ratio(GENERATE, lm_best) if lm_best else None,
        "hf decode loop / decode=generate (probes/s)": ratio(BASELINE, GENERATE),
        "workbench-vllm / workbench-hf (probes/s, goal > 1)": ratio("workbench-vllm", BASELINE),
        "workbench-vllm / lm-eval-vllm (probes/s)": ratio("workbench-vllm", "lm-eval vllm"),
        f"hf cost of {k} samples vs 1 (wall)": ratio(BASELINE, "workbench-hf batched, 1 sample", "wall_s"),
        f"vllm cost of {k} samples vs 1 (wall, goal <= 3)": ratio("workbench-vllm", "workbench-vllm, 1 sample",
                                                                 "wall_s"),
        "vllm adapter vs base, same LoRA engine (wall)": ratio("workbench-vllm LoRA engine, adapter",
                                                               "workbench-vllm LoRA engine, base model", "wall_s"),
        "vllm adapter vs base on a no-LoRA engine (wall)": ratio("workbench-vllm LoRA engine, adapter",
                                                                 "workbench-vllm", "wall_s"),
        "vllm LoRA engine start vs plain engine start": (extra["vllm_lora_engine_start_s"]
                                                         / extra["vllm_engine_start_s"])
        if "vllm_engine_start_s" in extra else None,
    }
    print()
    print(f"{'configuration':<46} {'wall s':>8} {'probes/s':>9} {'vs ' + BASELINE:>26}")
    for r in rows:
        print(f"{r['config']:<46} {r['wall_s']:8.2f} {r['probes_per_s']:9.1f} {r['ratio_vs_baseline']:25.2f}x")
    print("(wall excludes model load / engine start: hf load+warm-up "
          f"{extra['hf_load_s']:.1f}s" + (f", vLLM engine start {extra['vllm_engine_start_s']:.1f}s, "
                                          f"LoRA engine {extra['vllm_lora_engine_start_s']:.1f}s"
                                          if "vllm_engine_start_s" in extra else "")
          + (", lm-eval load in its row's load_s" if lm_best else "") + ")")
    print()
    for name, v in ratios.items():
        print(f"{name:<56} {'n/a' if v is None else f'{v:.2f}' if isinstance(v, float) else v}")
    for note in notes:
        print(f"note: {note}")
    result = {
        "probes": n, "samples": k, "entities": args.entities, "limit": args.limit, "threads": args.threads,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "torch": torch.__version__, "loadavg_end": os.getloadavg()},
        "vllm_cpu_omp_threads_bind": os.environ.get("VLLM_CPU_OMP_THREADS_BIND"),
        "rows": rows, "ratios": ratios, "extra": extra, "notes": notes,
        "median_probes_per_s": statistics.median(r["probes_per_s"] for r in rows),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nresults -> {args.out}")
    for r in rows:  # the fresh workspaces are scratch
        ws = r.get("workspace")
        if ws and Path(ws).exists():
            shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()

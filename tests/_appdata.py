"""A workspace for the app tests, made once per session: the test-size world, a baseline run, a
candidate run with a random LoRA adapter (which breaks many probes), the world's corpus indexed in the
workspace, and both runs' failures attributed by the real pipeline (`attribute_results`: samples, paraphrases,
corpus support and conflict rows, and span tracing of each hallucination).

The app test modules share it through `app_data` (their module fixture) and take a private copy with
`private_copy` / `private_store` where they write (reviews, gates, jobs), so no test sees another's rows."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wscopy import copy_workspace

if TYPE_CHECKING:
    import pytest

    from workbench.store import Store


@dataclass(frozen=True)
class AppData:
    workspace: Path
    baseline: str
    candidate: str
    model: Path


def make_app_workspace(world: Any, root: Path) -> AppData:
    marker = root / "app-data.json"
    if marker.exists():
        d = json.loads(marker.read_text())
        return AppData(Path(d["workspace"]), d["baseline"], d["candidate"], Path(d["model"]))
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from workbench.attribution.attribute import attribute_results
    from workbench.attribution.build import build_index
    from workbench.attribution.index import CorpusIndex, default_index_path
    from workbench.attribution.types import save_attributions
    from workbench.probes import resolve_probes
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    ws = root / "ws"
    store = Store.open(ws)
    suite, loaded = resolve_probes(str(world.suite))
    opts = EvalOptions(samples=3, paraphrases=True, bootstrap=200)
    base = run_eval(store, ModelSpec(model=str(world.model), dtype="float32"), suite, loaded, opts).run_id
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(world.model), dtype=torch.float32)
    lora = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj", "o_proj"],
                                            init_lora_weights=False, lora_alpha=64))
    adapter = root / "random-adapter"
    lora.save_pretrained(str(adapter))
    cand = run_eval(store, ModelSpec(model=str(world.model), adapter=str(adapter), dtype="float32"), suite,
                    loaded, opts).run_id
    build_index(world.corpus, default_index_path(ws))
    with CorpusIndex.open(default_index_path(ws)) as index:
        for run_id in (base, cand):
            save_attributions(store, run_id, attribute_results(load_results(store, run_id), index))
    marker.write_text(json.dumps({"workspace": str(ws), "baseline": base, "candidate": cand,
                                  "model": str(world.model)}))
    return AppData(ws, base, cand, Path(world.model))


def app_data(world: Any, tmp_path_factory: pytest.TempPathFactory) -> AppData:
    """The session's shared app workspace (made by the first module that asks; read-only for the others)."""
    return make_app_workspace(world, tmp_path_factory.getbasetemp() / "app-data")


def private_copy(workspace: Path, dest: Path) -> Path:
    """Copy a workspace to `dest` (tests/wscopy.py: the store through SQLite's backup API; the app's .gradio
    cache left behind); returns dest."""
    return copy_workspace(workspace, dest, ".gradio")


def private_store(data: AppData, tmp_path: Path) -> Store:
    """A private copy of the shared workspace, opened: review rows of one test never leak into another."""
    from workbench.store import Store

    return Store.open(private_copy(data.workspace, tmp_path / "ws"))


NQ = Path(__file__).parent / "data" / "formats" / "nq_open.jsonl"
REAL_SYSTEM = "Answer in one short sentence."
REAL_ROWS = 20
REAL_MAX_TOKENS = 64  # lets the chat model answer in sentences (16 cuts most of them); a few still hit it


@dataclass(frozen=True)
class RealAppData:
    """A workspace of long real answers: the real chat model on NQ rows (baseline), an abstention LoRA SFT job
    trained from the baseline's attributions (the candidate: base + its adapter) and the recorded gate."""

    workspace: Path
    baseline: str
    candidate: str
    gate: dict[str, Any]  # `workbench regress --json`
    job_dir: str  # the SFT job, relative to the workspace
    seconds: dict[str, float]  # wall time of each command


def real_workspace(tmp_path_factory: pytest.TempPathFactory) -> RealAppData:
    """The session's real-model workspace (`make_real_workspace`), built once for every xdist worker: the chat loop
    and the app's real-answer tests read it (and copy it where they write) instead of each running the chain."""
    from artifacts import built
    from realmodel import real_model_dir

    model = real_model_dir()
    return built(tmp_path_factory, "real-app-data", (REAL_ROWS, REAL_MAX_TOKENS, REAL_SYSTEM),
                 lambda folder: make_real_workspace(model, folder))


def make_real_workspace(model: Path, root: Path) -> RealAppData:
    """Every step through the CLI, as a user runs it (subprocesses with hard time limits): `eval --template chat`
    of the first REAL_ROWS NQ rows, `attribute`, `fix`, `train` (8 LoRA SFT steps), `regress` of base + adapter
    against the baseline run, then `attribute` of the candidate. Made once per session (a marker file)."""
    import time

    from clirun import workbench
    from realmodel import small_guard_pool

    marker = root / "real-app-data.json"
    if marker.exists():
        d = json.loads(marker.read_text())
        return RealAppData(Path(d["workspace"]), d["baseline"], d["candidate"], d["gate"], d["job_dir"],
                           d["seconds"])
    root.mkdir(parents=True, exist_ok=True)
    ws = root / "ws"
    seconds: dict[str, float] = {}

    def ok(step: str, *args: str, timeout: float, codes: tuple[int, ...] = (0,)) -> str:
        t0 = time.monotonic()
        proc = workbench(*args, "--workspace", str(ws), timeout=timeout)
        seconds[step] = round(time.monotonic() - t0, 1)
        assert proc.returncode in codes, (step, proc.returncode, proc.stderr[-3000:])
        return proc.stdout

    probes = root / f"nq{REAL_ROWS}.jsonl"
    probes.write_text("".join(NQ.read_text().splitlines(keepends=True)[:REAL_ROWS]))
    # Timeouts: this eval took 50-246 s with other jobs on 2 cores (docs/explanation/testing.md); a hang still fails.
    base = json.loads(ok("eval", "eval", "--model", str(model), "--probes", str(probes), "--template", "chat",
                         "--system-prompt", REAL_SYSTEM, "--max-tokens", str(REAL_MAX_TOKENS), "--json",
                         timeout=900))["run_id"]
    ok("attribute", "attribute", base, timeout=300)
    fixset = ws / "fixsets" / "abstain"
    guard = ("--guard-pool", "none", "--guard-pool", str(small_guard_pool(root)))
    ok("fix", "fix", base, "--out", str(fixset), *guard, timeout=300)
    job = ws / "jobs" / "abstain"
    spec = root / "abstain.yaml"
    spec.write_text(f"base_model: {model}\nfixset: {fixset}\nmethod: sft\noutput_dir: {job}\n"
                    "lora: {r: 8, alpha: 16, target_modules: [q_proj, v_proj]}\n"
                    # adapter_scale 1.0: the auto sweep (half of this job's time) is the real demo's test's to check;
                    # replay_kl 0: the KL term (a third of it) is test_rehearsal's and the real demo's test's
                    "trainer: {max_steps: 8, per_device_batch_size: 4, max_length: 80, learning_rate: 0.003, "
                    "adapter_scale: 1.0, replay_kl: 0}\n")
    ok("train", "train", str(spec), timeout=600)
    gate = json.loads(ok("regress", "regress", "--baseline", base, "--candidate", str(model), "--candidate-adapter",
                         str(job / "adapter"), *guard, "--json", timeout=900, codes=(0, 1, 3)))
    ok("attribute candidate", "attribute", gate["candidate_run"], timeout=300)
    data = RealAppData(ws, base, gate["candidate_run"], gate, "jobs/abstain", seconds)
    marker.write_text(json.dumps({**asdict(data), "workspace": str(ws)}))
    return data


STRICT_POLICY = "gates:\n  - {type: max_broken, name: nothing_broken, max_count: 0}\n"


@dataclass(frozen=True)
class ThreeGates:
    """A private copy of the shared app workspace with three candidates of its baseline, each made by a job whose
    records (job.yaml, result.json, the fix set's fixset.json, the adapter folder) say what made it, and each gated,
    oldest first: `pass` (an sft job that fixed a few hallucinations), `warn` (a staged sft→dpo job that traded most
    hallucinations for abstentions: abstention up more than 20 points), `fail` (a dpo job that broke one known fact:
    WARN under the built-in policy, FAIL under STRICT_POLICY, recorded with `policy_source` strict.yaml)."""

    store: Store
    baseline: str
    runs: dict[str, str]  # verdict -> candidate run
    gates: dict[str, str]  # verdict -> gate id
    jobs: dict[str, Path]  # verdict -> job folder, `fix/BASELINE/METHOD` in the workspace as `workbench demo` lays out


def three_gates(data: AppData, dest: Path) -> ThreeGates:
    """ThreeGates over a private copy of `data` (in about a second: the candidates' answers are the baseline's with
    chosen verdicts changed, written into the store; the gates are the real gate's)."""
    import yaml

    from finetune.job.result import JobResult, write_result
    from workbench.gating import gate_runs
    from workbench.regression import parse_policy
    from workbench.runner import summarize
    from workbench.store import Store

    store = Store.open(private_copy(data.workspace, dest / "ws"))
    base = store.get_run(data.baseline)
    probes = {p["id"]: p for p in store.probe_rows(base.id)}
    answers = store.answer_rows(base.id)
    greedy = {a["probe_id"]: a["verdict"] for a in answers if a["kind"] == "greedy" and a["variant"] == 0}
    right = sorted(p for p, v in greedy.items() if v == "correct")
    wrong = sorted(p for p, v in greedy.items() if v == "incorrect")
    assert len(right) >= 20 and len(wrong) >= 0.25 * len(greedy), (len(right), len(wrong))  # the world's split
    changes = {"pass": {p: "correct" for p in wrong[:4]},
               "warn": {p: "not_attempted" for p in wrong},
               "fail": {**{p: "correct" for p in wrong[:4]}, right[0]: "incorrect"}}
    methods = {"pass": {"method": "sft"}, "warn": {"method": "staged", "stages": [{"method": "sft"},
                                                                                     {"method": "dpo"}]},
               "fail": {"method": "dpo"}}
    steps = {"pass": 40, "warn": 60, "fail": 30}
    folder = store.workspace / "fix" / base.id
    fixset = folder / "fixset"
    fixset.mkdir(parents=True)
    (fixset / "fixset.json").write_text(json.dumps({"run_id": base.id, "strategy": "auto", "model": base.model}))
    policy_file = dest / "strict.yaml"
    policy_file.write_text(STRICT_POLICY)
    runs, gates, jobs = {}, {}, {}
    for verdict, changed in changes.items():
        strict = verdict == "fail"
        job = folder / str(methods[verdict]["method"])
        adapter = job / "adapter"
        shutil.copytree(_adapter_of(store, data), adapter)
        (job / "job.yaml").write_text(yaml.safe_dump({**methods[verdict], "fixset": str(fixset),
                                                      "output_dir": str(job), "base_model": base.model}))
        write_result(JobResult(job_id=f"job-{verdict}", status="done", output_dir=str(job), adapter=str(adapter),
                               steps=steps[verdict], final_loss=0.1, heldout_before=0.0, heldout_after=0.5,
                               resumed_from=None, stop_reason=None, message="done", seconds=1.0,
                               known_checked=23, known_broken=right[:3] if strict else []), job)
        run = store.create_run(model=base.model, adapter=str(adapter), backend=base.backend,
                               fingerprint=f"{base.fingerprint}-{verdict}", suite=base.suite,
                               suite_config=base.suite_config, options=base.options, n_probes=base.n_probes,
                               skipped_bad=base.skipped_bad)
        store.add_probes(run, list(probes.values()))
        store.add_answers(run, [_changed(a, changed, probes) for a in answers])
        store.finish_run(run, status="done", metrics=summarize(store, run, bootstrap=0), generated=0,
                         cached=len(answers))
        rec = gate_runs(store, base.id, run, parse_policy(STRICT_POLICY, str(policy_file)) if strict else None,
                        policy_source=str(policy_file) if strict else None)
        assert rec.result.verdict == verdict, (verdict, rec.result.verdict, [g.status for g in rec.result.gates])
        runs[verdict], gates[verdict], jobs[verdict] = run, rec.id, job
    return ThreeGates(store, base.id, runs, gates, jobs)


def _adapter_of(store: Store, data: AppData) -> Path:
    """The shared workspace's candidate adapter (a real peft folder), copied into each job's folder."""
    return Path(store.get_run(data.candidate).adapter or "")


def _changed(answer: dict[str, Any], changed: dict[str, str], probes: dict[str, Any]) -> dict[str, Any]:
    """A copy of one of the baseline's answer rows, its greedy verdict on the question changed where asked (with
    an answer text to match: an accepted answer, or an abstention)."""
    row = {k: v for k, v in answer.items() if k not in ("id", "run_id")}
    verdict = changed.get(row["probe_id"])
    if verdict is None or row["kind"] != "greedy" or row["variant"] != 0:
        return row
    text = {"correct": probes[row["probe_id"]]["answers"][0], "not_attempted": "I don't know",
            "incorrect": "Zorvia"}[verdict]
    return {**row, "verdict": verdict, "text": text}

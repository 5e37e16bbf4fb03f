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
    """Copy a workspace to `dest` (its store closed first; the app's .gradio cache left behind); returns dest."""
    from workbench.store import Store

    Store.open(workspace).engine.dispose()
    shutil.copytree(workspace, dest, ignore=shutil.ignore_patterns(".gradio"))
    return dest


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

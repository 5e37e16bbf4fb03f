"""Shared setup of the finetune tests: the test world, one stored eval run, attributions from truth; and
the job helpers several modules use (a parameter snapshot, adapter weights, a job subprocess to kill and
resume).

Imported by the finetune test modules; the module-level memo makes the world, the eval run and the fix
set once per session, whichever test module asks first.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clirun import start_script
from transformers import TrainerCallback
from zygote import Forked

_MEMO: dict[str, Any] = {}
#: LoRA on every linear layer learns the tiny world's facts in 100 steps (q/v alone: 3 of 8).
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
#: Resumed vs uninterrupted adapter weights. Measured: 0.0 (bit-identical) on CPU with one thread; the
#: bound leaves room for other BLAS builds.
RESUME_TOLERANCE = 1e-4


@dataclass(frozen=True)
class FtWorld:
    paths: Any  # evals.world.WorldPaths
    store: Any  # workbench.store.Store
    run_id: str
    truth: dict[str, dict[str, Any]]
    suite: Any
    loaded: Any
    fixset: Path
    root: Path


def attributions_from_truth(store: Any, run_id: str, truth: dict[str, dict[str, Any]]) -> list[Any]:
    """The expected category of every probe the model got wrong (test setup: attribution is another layer)."""
    from workbench.attribution.types import CATEGORIES, Attribution
    from workbench.results import load_results
    from workbench.types import Verdict

    out = []
    for r in load_results(store, run_id).probes:
        cat = truth[r.probe.id]["expected_category"]
        if cat and r.verdict != Verdict.CORRECT:
            out.append(Attribution(r.probe.id, cat, 0.9, "Unknown", CATEGORIES[cat], {"from": "truth"}))
    return out


def new_run(w: FtWorld, attributions: list[Any] | None = None) -> str:
    """Another eval run of the base model (all generations come from the cache) with given attributions."""
    from workbench.attribution.types import save_attributions
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec

    s = run_eval(w.store, ModelSpec(model=str(w.paths.model)), w.suite, w.loaded,
                 EvalOptions(samples=4, paraphrases=True, bootstrap=0))
    save_attributions(w.store, s.run_id, attributions if attributions is not None
                      else attributions_from_truth(w.store, s.run_id, w.truth))
    return s.run_id


def setup(request: pytest.FixtureRequest, tmp_root: Path) -> FtWorld:
    if "w" in _MEMO:
        return _MEMO["w"]  # type: ignore[no-any-return]
    import torch
    from artifacts import world

    from evals.world import TEST_CONFIG
    from finetune.fixset import build_fixset
    from workbench.attribution.types import save_attributions
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    torch.set_num_threads(1)
    paths = world(request.getfixturevalue("tmp_path_factory"), TEST_CONFIG)
    store = Store.open(tmp_root / "ws")
    suite, loaded = resolve_probes(paths.suite)
    s = run_eval(store, ModelSpec(model=str(paths.model)), suite, loaded,
                 EvalOptions(samples=4, paraphrases=True, bootstrap=0))
    truth = {t["probe_id"]: t for t in map(json.loads, paths.truth.read_text().splitlines())}
    save_attributions(store, s.run_id, attributions_from_truth(store, s.run_id, truth))
    fixset = tmp_root / "fix"
    build_fixset(store, s.run_id, fixset)
    w = FtWorld(paths, store, s.run_id, truth, suite, loaded, fixset, tmp_root)
    _MEMO["w"] = w
    return w


def greedy_verdicts(w: FtWorld, adapter: str | None) -> dict[str, str]:
    """probe id -> verdict of the question's greedy answer, evaluated through the hf backend."""
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec

    s = run_eval(w.store, ModelSpec(model=str(w.paths.model), adapter=adapter), w.suite, w.loaded,
                 EvalOptions(bootstrap=0))
    return {r.probe.id: str(r.verdict) for r in load_results(w.store, s.run_id).probes}


# -- job helpers ------------------------------------------------------------------------------------------


class Snapshot(TrainerCallback):  # type: ignore[misc]
    """Trainable parameters at the start and the end of training."""

    def __init__(self) -> None:
        self.before: dict[str, Any] = {}
        self.after: dict[str, Any] = {}

    @staticmethod
    def _grab(model: Any) -> dict[str, Any]:
        return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        self.before = self._grab(model)

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        self.after = self._grab(model)


def adapter_weights(adapter: Path) -> dict[str, Any]:
    """A saved peft adapter's tensors by name."""
    from safetensors.torch import load_file

    return dict(load_file(str(adapter / "adapter_model.safetensors")))


def max_diff(a: dict[str, Any], b: dict[str, Any]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def start_job(w: FtWorld, job: Path, *, resume: bool = False, step_delay: float = 0.0,
              stall_save: str = "") -> subprocess.Popen[str] | Forked:
    """The job process on JOB (one thread) through tests/jobworker.py, forked from the zygote: `step_delay` seconds
    after every step, `stall_save` "STEP:SECONDS" stalls that checkpoint's save before its commit."""
    from finetune.job.launcher import job_arguments

    cmd = job_arguments(job, resume=resume, workspace=str(w.store.workspace), threads=1)
    if step_delay:
        cmd += ["--step-delay", str(step_delay)]
    if stall_save:
        cmd += ["--stall-save", stall_save]
    return start_script(Path(__file__).with_name("jobworker.py"), cmd, cwd=Path(__file__).resolve().parents[1])


def wait_for(path: Path, proc: subprocess.Popen[str] | Forked, timeout: float = 300) -> None:
    """Until `path` exists; the job's stderr if it ends first; the job killed on timeout."""
    t0 = time.monotonic()
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"job ended (rc {proc.returncode}) before {path} appeared:\n{proc.communicate()[1]}")
        if time.monotonic() - t0 > timeout:
            proc.kill()
            raise AssertionError(f"{path} did not appear in {timeout} s")
        time.sleep(0.05)


def resume_job(w: FtWorld, job: Path) -> Any:
    """`--resume` in the job process to the end; the JobResult it wrote into its output_dir."""
    from finetune.job import load_spec, read_result

    proc = start_job(w, job, resume=True)
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    result = read_result(load_spec(job).output_dir)
    assert result is not None
    return result


class PoisonForTests(TrainerCallback):  # type: ignore[misc]
    """Fills the trainable weights with NaN before `at_step` (the NaN watchdog must fire)."""

    def __init__(self, at_step: int) -> None:
        self.at_step = at_step

    def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        import torch

        if state.global_step + 1 == self.at_step and model is not None:
            with torch.no_grad():
                for p in model.parameters():
                    if p.requires_grad:
                        p.fill_(float("nan"))

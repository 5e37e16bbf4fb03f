"""Resume after a real SIGKILL: mid-training and mid-save. The resumed adapter must match an
uninterrupted run (same seed, one torch thread) within RESUME_TOLERANCE."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
import torch
from ftworld import RESUME_TOLERANCE, FtWorld, adapter_weights, max_diff, resume_job, start_job, wait_for

from finetune import records
from finetune.job import EarlyStopSpec, JobResult, JobSpec, TrainerSpec, run_job, save_spec
from finetune.job.checkpoint import COMPLETE, STAGING, complete_checkpoints
from finetune.job.known_guard import STATE_FILE

pytestmark = pytest.mark.slow
STEPS, EVERY = 30, 10



@pytest.fixture(scope="module")
def uninterrupted(w: FtWorld, tmp_path_factory: pytest.TempPathFactory) -> JobResult:
    """An uninterrupted run (in-process, one thread)."""
    result = run_job(_spec(w, tmp_path_factory.mktemp("ref") / "job"), w.store)
    assert result.status == "done" and result.adapter
    return result


@pytest.fixture(scope="module")
def reference(uninterrupted: JobResult) -> dict[str, torch.Tensor]:
    """The uninterrupted run's adapter."""
    return adapter_weights(Path(str(uninterrupted.adapter)))


def _spec(w: FtWorld, out: Path) -> JobSpec:
    # lr high enough that every step moves the weights measurably; checkpoints every 10 steps; the known facts
    # scored every 5 steps (their scores and best state travel in the checkpoints).
    return JobSpec(fixset=str(w.fixset), output_dir=str(out), method="sft", checkpoint_every=EVERY,
                   keep_checkpoints=2, trainer=TrainerSpec(max_steps=STEPS, learning_rate=3e-3, seed=0),
                   early_stop=EarlyStopSpec(known_every=EVERY // 2))


def test_resume_after_sigkill_mid_training(w: FtWorld, reference: dict[str, torch.Tensor], uninterrupted: JobResult,
                                           tmp_path: Path) -> None:
    out = tmp_path / "job"
    job = save_spec(_spec(w, out), tmp_path / "job.yaml")
    proc = start_job(w, job, step_delay=0.15)
    wait_for(out / "checkpoints" / f"checkpoint-{EVERY}" / COMPLETE, proc)
    time.sleep(0.3)  # a step or two past the checkpoint
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "adapter").exists()
    assert [p.name for p in complete_checkpoints(out / "checkpoints")] == [f"checkpoint-{EVERY}"]
    scores = json.loads((out / "checkpoints" / f"checkpoint-{EVERY}" / STATE_FILE).read_text())
    assert scores["last"]["step"] == EVERY and scores["before"]  # the scores made before the kill
    result = resume_job(w, job)
    assert result.status == "done" and result.steps == STEPS
    # the same decision as the uninterrupted job: the base answers and the best state came back
    assert (result.known_checked, result.known_broken, result.kept_step) == (
        uninterrupted.known_checked, uninterrupted.known_broken, uninterrupted.kept_step)
    assert str(result.resumed_from).endswith(f"checkpoint-{EVERY}")
    diff = max_diff(reference, adapter_weights(out / "adapter"))
    print(f"resume after SIGKILL mid-training: max abs diff {diff:.3g}")
    assert diff < RESUME_TOLERANCE
    kinds = [e.kind for e in records.events(w.store, result.job_id)]
    assert kinds[0] == "start" and "resume" in kinds and kinds[-1] == "done" and "checkpoint" in kinds


def test_a_job_without_step_checkpoints_resumes_from_a_timed_one(w: FtWorld, reference: dict[str, torch.Tensor],
                                                                 tmp_path: Path) -> None:
    """`checkpoint_every: 0` (what `fix --train` writes) with `checkpoint_minutes`: killed midway, the job resumes
    from the last timed checkpoint, not from step 0, and ends with the uninterrupted job's adapter."""
    out = tmp_path / "job"
    spec = _spec(w, out).model_copy(update={"checkpoint_every": 0, "checkpoint_minutes": 0.02})  # every 1.2 s
    job = save_spec(spec, tmp_path / "job.yaml")
    proc = start_job(w, job, step_delay=0.15)
    ckpts = out / "checkpoints"
    t0 = time.monotonic()
    while not complete_checkpoints(ckpts) and proc.poll() is None and time.monotonic() - t0 < 300:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (out / "adapter").exists()
    first = complete_checkpoints(ckpts)[-1]
    assert 0 < int(first.name.split("-")[1]) < STEPS
    result = resume_job(w, job)
    assert result.status == "done" and result.steps == STEPS
    assert result.resumed_from is not None and Path(result.resumed_from).name.startswith("checkpoint-")
    assert int(Path(result.resumed_from).name.split("-")[1]) >= int(first.name.split("-")[1])
    diff = max_diff(reference, adapter_weights(out / "adapter"))
    print(f"resume from a timed checkpoint: max abs diff {diff:.3g}")
    assert diff < RESUME_TOLERANCE


def test_kill_during_save_leaves_incomplete_checkpoint_ignored(w: FtWorld, reference: dict[str, torch.Tensor],
                                                               tmp_path: Path) -> None:
    out = tmp_path / "job"
    job = save_spec(_spec(w, out), tmp_path / "job.yaml")
    proc = start_job(w, job, stall_save=f"{2 * EVERY}:60")  # the save at step 20 stalls before its rename
    wait_for(out / "checkpoints" / STAGING / "SAVING", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ckpts = out / "checkpoints"
    assert (ckpts / STAGING / f"checkpoint-{2 * EVERY}").is_dir()  # written, never renamed
    # A checkpoint renamed but killed before its COMPLETE marker must be ignored as well.
    (ckpts / "checkpoint-25").mkdir()
    (ckpts / "checkpoint-25" / "trainer_state.json").write_text("{}")
    assert [p.name for p in complete_checkpoints(ckpts)] == [f"checkpoint-{EVERY}"]
    result = resume_job(w, job)
    assert str(result.resumed_from).endswith(f"checkpoint-{EVERY}") and result.status == "done"
    assert not (ckpts / STAGING).exists() and not (ckpts / "checkpoint-25").exists()
    assert [p.name for p in complete_checkpoints(ckpts)] == [f"checkpoint-{2 * EVERY}", f"checkpoint-{STEPS}"]
    diff = max_diff(reference, adapter_weights(out / "adapter"))
    print(f"resume after SIGKILL mid-save: max abs diff {diff:.3g}")
    assert diff < RESUME_TOLERANCE

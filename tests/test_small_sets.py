"""A small fix set (a handful of targets) trains until its targets are fixed: its steps' rule is raised, the targets
and the known facts are scored on the way, and the job stops at the first scoring where the fix is made and the known
facts hold (`early_stop.until_fixed`)."""

from __future__ import annotations

from pathlib import Path

from ftworld import ALL_LINEAR, FtWorld, attributions_from_truth, new_run

from finetune import records
from finetune.fixset import FixOptions, build_fixset
from finetune.job import from_dict, resolve, run_job
from finetune.job.defaults import SMALL_SET_ROWS, SMALL_SET_STEPS


def test_a_small_set_trains_until_its_targets_are_fixed(w: FtWorld, tmp_path: Path) -> None:
    every = attributions_from_truth(w.store, w.run_id, w.truth)
    few = [a for a in every if a.category == "data:missing"][:4]  # four unknown facts: abstention rows
    run = new_run(w, few)
    manifest = build_fixset(w.store, run, tmp_path / "fix", FixOptions(heldout_fraction=0.0))
    targeted = sum(n for c, n in manifest.counts["sft"].items() if c != "replay")
    assert 0 < targeted <= SMALL_SET_ROWS
    spec = from_dict({"fixset": str(tmp_path / "fix"), "output_dir": str(tmp_path / "job"),
                      "lora": {"target_modules": ALL_LINEAR}})
    job = resolve(spec)
    es = job.spec.early_stop
    assert es.until_fixed is True and es.known_every and es.known_every == max(1, job.max_steps // 12)
    assert f"x{SMALL_SET_STEPS} for a small fix set" in job.steps_rule
    result = run_job(job, w.store)
    events = {e.kind: e for e in records.events(w.store, result.job_id)}
    assert "fixed" in events and result.status == "done" and result.steps < job.max_steps
    assert "stopped once its targets were fixed" in result.message
    assert (events["fixed"].data or {})["targets_fixed"] >= es.min_targets_fixed
    # the same set with the rule off trains its epochs' steps and scores nothing on the way
    off = resolve(from_dict({**spec.to_dict(), "output_dir": str(tmp_path / "off"),
                             "early_stop": {"until_fixed": False}}))
    assert off.spec.early_stop.until_fixed is False and off.spec.early_stop.known_every == 0
    assert off.max_steps * SMALL_SET_STEPS == job.max_steps or job.max_steps == 1000

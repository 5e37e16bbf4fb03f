"""bench/fix_efficacy.py's "unseen broken": correct-before probes of the fix set's reserved slice (no
training row, not the validation slice rollback chooses by) that the adapter gets wrong, counted on their own."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchload import load_bench, run_main

from finetune.job import JobResult


def test_unseen_broken_counts_only_the_reserved_known_probes() -> None:
    fe = load_bench("fix_efficacy")
    probes = [fe.Probe("k1", "known", "known", "", "correct", {"sft": "incorrect"}),  # reserved, broken
              fe.Probe("k2", "known", "known", "", "correct", {"sft": "correct"}),  # reserved, kept
              fe.Probe("k3", "known", "known", "", "correct", {"sft": "not_attempted"}),  # slice / replay: not unseen
              fe.Probe("k4", "other", "rare", "", "incorrect", {"sft": "incorrect"}),  # reserved but never correct
              fe.Probe("t1", "data:missing", "absent", "train", "incorrect", {"sft": "not_attempted"})]
    job = JobResult(job_id="j", status="done", output_dir="/tmp/j", adapter="/tmp/j/adapter", steps=10, final_loss=0.1,
                    heldout_before=None, heldout_after=None, resumed_from=None, stop_reason=None, message="done",
                    seconds=1.0, known_checked=1, known_broken=["k3"])
    goals = fe.adapter_report("sft", job, probes, ["data:missing"], {"k1", "k2", "k4"})["goals"]
    assert (goals["unseen_broken"], goals["n_unseen"]) == (1, 2)
    assert round(goals["broken"] * goals["n_correct_before"]) == 2  # k1 and k3: every correct-before probe


def test_bench_refuses_a_bad_reserve_fraction_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main("fix_efficacy", ["--reserve-fraction", "1.5", "--workspace", "/nonexistent/never-made"],
                         monkeypatch, capsys)
    assert code == 2 and "--reserve-fraction" in err, err[-2000:]


def test_bench_refuses_a_world_dir_that_is_no_built_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main("fix_efficacy", ["--world-dir", str(tmp_path), "--workspace", str(tmp_path / "ws")],
                         monkeypatch, capsys)
    assert code == 2 and "--world-dir" in err, err[-2000:]
    assert not (tmp_path / "ws").exists()  # refused before any work

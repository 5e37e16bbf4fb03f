"""The fix plan (finetune/fixset/plan.py): one ProbeFix per probe, saying which fix it gets and why, and the rows the
writers render from it; FixOptions checked when made."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from ftworld import FtWorld

from finetune.fixset import FixOptions, build_fixset, plan_fixset, read_inputs
from finetune.fixset.plan import fix_kind, usable_guard_facts
from workbench.errors import WorkbenchError


def test_options_are_checked_when_made_and_name_the_field() -> None:
    assert FixOptions().replay == 4.0 and FixOptions(strategy="rl").replay == 1.0
    assert FixOptions(replay_ratio=0.5, strategy="rl").replay == 0.5
    for bad, field in (({"strategy": "abstian"}, "abstain"), ({"replay_ratio": -1}, "`replay_ratio`"),
                       ({"heldout_fraction": 1.0}, "`heldout_fraction`"),
                       ({"validation_fraction": 0.5, "reserve_fraction": 0.5}, "`reserve_fraction`"),
                       ({"rehearsal_ratio": 101}, "`rehearsal_ratio`")):
        with pytest.raises(WorkbenchError, match=field):
            FixOptions(**bad)


def test_fix_kind_by_category_and_strategy() -> None:
    assert fix_kind("data:missing", "auto", False) == "abstain"
    assert fix_kind("data:missing", "auto", True) == "inject"
    assert fix_kind("data:underrepresented", "auto", False) == "inject"
    assert fix_kind("behavior:unstable", "auto", False) == "dpo"
    assert fix_kind("data:missing", "inject", False) == "skip"
    assert fix_kind("behavior:over-abstain", "inject", False) == "dpo"
    assert fix_kind("data:missing", "dpo", False) == "dpo-abstain"
    assert fix_kind("behavior:unstable", "rl", False) == "rl"


@pytest.mark.slow  # the session's fine-tuning world
def test_the_plan_says_who_gets_what_and_the_rows_follow_it(w: FtWorld, tmp_path: Path) -> None:
    from datasets import load_from_disk

    options = FixOptions()
    inputs = read_inputs(w.store, w.run_id, options)
    plan = plan_fixset(inputs, options, usable_guard_facts(inputs, options))
    assert [f.probe_id for f in plan.targeted] == [pid for pid in inputs.results.by_id() if pid in inputs.targeted]
    assert all(f.why for f in (*plan.targeted, *plan.known)) and plan.needs_abstention and not plan.unguarded
    by_fix = defaultdict(set)
    for f in (*plan.targeted, *plan.known):
        by_fix[f.fix].add(f.probe_id)
    assert {f.category for f in plan.targeted if f.fix == "abstain"} <= {"data:missing", "knowledge:unknown"}
    assert all(f.answer and f.rejected for f in plan.targeted if f.fix == "dpo")
    assert by_fix["validation"] and by_fix["replay"] and not by_fix["validation"] & by_fix["replay"]

    m = build_fixset(w.store, w.run_id, tmp_path / "fx", options)
    data = load_from_disk(m.path)
    sft, dpo = list(data["sft"]), list(data["dpo"])
    assert {r["probe_id"] for r in sft if r["source"] == "abstain"} == by_fix["abstain"]
    assert {r["probe_id"] for r in sft if r["source"] == "inject"} == by_fix["inject"]
    assert {r["probe_id"] for r in dpo if r["category"] not in ("replay",)} <= by_fix["dpo"]
    assert {r["probe_id"] for r in sft + dpo if r["category"] == "replay"} <= by_fix["replay"]
    assert {v["probe_id"] for v in m.validation} == by_fix["validation"] and m.skipped == plan.skipped
    assert m.heldout_probe_ids == plan.heldout

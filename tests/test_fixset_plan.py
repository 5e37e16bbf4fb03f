"""The fix plan (finetune/fixset/plan.py): one ProbeFix per probe, saying which fix it gets and why, and the rows the
writers render from it; FixOptions checked when made."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

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


def _field_inputs() -> Any:
    """A run of field probes (reviewed user reports, tagged as `workbench reports export` tags them) and one benchmark
    probe, every failure attributed as unknown to the model (what a real model's field failures mostly are)."""
    from finetune.chatform import RowForm
    from finetune.fixset import FixInputs
    from workbench.attribution.types import Attribution
    from workbench.probes import Suite
    from workbench.reports import FieldOrigin
    from workbench.results import Answer, ProbeResult, RunResults
    from workbench.store.db import RunRecord
    from workbench.types import Probe, Verdict

    def result(pid: str, answers: tuple[str, ...], said: str, verdict: Verdict, *tags: str) -> ProbeResult:
        probe = Probe(pid, f"What is {pid}?", answers, tags=tags)
        return ProbeResult(probe, (Answer(0, "greedy", 0, "", said, verdict, None, "stop"),), ())

    answer, abstain = ("field", "field:hallucinated"), ("field", "field:should-refuse", "field:should-abstain")
    probes = (
        result("field-taught", ("Canberra",), "Sydney", Verdict.INCORRECT, *answer),
        result("field-silent", ("Ottawa",), "I don't know", Verdict.NOT_ATTEMPTED, *answer),
        result("field-refuse", ("I don't know",), "Paris", Verdict.INCORRECT, *abstain),
        result("field-refused", ("I don't know",), "I don't know", Verdict.NOT_ATTEMPTED, *abstain),
        result("field-known", ("Bern",), "Bern", Verdict.CORRECT, "field", "field:correct"),
        result("bench-unknown", ("Vaduz",), "Lyon", Verdict.INCORRECT),
        result("bench-known", ("Rome",), "Rome", Verdict.CORRECT),
    )
    run = RunRecord("r", "", None, "done", "m", None, "hf", "", "s", {}, {}, len(probes), 0, 0, 0, None)
    failed = [p.probe.id for p in probes if p.verdict != Verdict.CORRECT]
    atts = {pid: Attribution(pid, "knowledge:unknown", 0.9, "unknown", "abstain") for pid in failed}
    origin = {"field-taught": FieldOrigin("field-taught", ("rep-1", "rep-2"), "hallucinated", "ann", "t")}
    return FixInputs(RunResults(run, probes), Suite(name="s", data="p.jsonl"), atts, (), {},
                     RowForm("Q: {question} A:", "."), origin)


def test_no_field_probe_is_held_out_while_other_targets_are() -> None:
    """A held-out share measures generalisation on benchmark failures; a reported complaint is always trained on."""
    from finetune.fixset.plan import FIELD_TAG

    inputs = _field_inputs()
    tags = {r.probe.id: r.probe.tags for r in inputs.results.probes}
    for seed in range(5):
        plan = plan_fixset(inputs, FixOptions(heldout_fraction=0.9, validation_fraction=0, seed=seed))
        field = {f.probe_id: f.split for f in plan.targeted if FIELD_TAG in tags[f.probe_id]}
        assert len(field) == 4 and set(field.values()) == {"train"}, field
        assert plan.heldout == ["bench-unknown"]  # the one benchmark failure: 0.9 of one rounds to one


def test_no_probe_with_a_given_fact_is_held_out() -> None:
    """A --facts answer (by question or by probe id) is a fact given to teach: never held out, as a field probe is;
    the held-out share is drawn from the other targets."""
    import dataclasses

    from workbench.grading.normalize import normalize
    from workbench.results import Answer, ProbeResult
    from workbench.types import Probe, Verdict

    base = _field_inputs()
    extra = tuple(ProbeResult(Probe(f"unknown-{i}", f"Who is {i}?", (f"P{i}",)),
                              (Answer(0, "greedy", 0, "", "Lyon", Verdict.INCORRECT, None, "stop"),), ())
                  for i in range(6))
    atts = {**base.attributions, **{r.probe.id: dataclasses.replace(base.attributions["bench-unknown"],
                                                                    probe_id=r.probe.id) for r in extra}}
    inputs = dataclasses.replace(base, results=dataclasses.replace(base.results,
                                                                   probes=(*base.results.probes, *extra)),
                                 attributions=atts)
    given = {"unknown-0": "P0", "unknown-1": "P1", "unknown-2": "P2"}
    facts = {"unknown-0": "P0", normalize("Who is 1?"): "P1", "unknown-2": "P2"}  # by probe id, or by question
    held_without = set()
    for seed in range(8):
        options = FixOptions(heldout_fraction=0.5, validation_fraction=0, seed=seed)
        held_without |= set(plan_fixset(inputs, options).heldout)
        plan = plan_fixset(dataclasses.replace(inputs, facts=facts), options)
        by_id = {f.probe_id: f for f in plan.targeted}
        assert all(by_id[pid].split == "train" and by_id[pid].answer == a for pid, a in given.items()), plan.heldout
        assert plan.heldout and not set(plan.heldout) & set(given)  # the share still comes from the others
    assert held_without & set(given)  # without the facts, the same draws hold some of them out


def test_a_field_probe_gets_its_reviewers_decision_whatever_its_attribution() -> None:
    import random

    from finetune.fixset.rows import Writer, dpo_rows, sft_rows

    inputs = _field_inputs()
    fixes = {}
    for strategy in ("auto", "inject", "abstain", "dpo", "rl"):
        plan = plan_fixset(inputs, FixOptions(strategy=strategy, heldout_fraction=0, validation_fraction=0))
        fixes[strategy] = {f.probe_id: f for f in (*plan.targeted, *plan.known)}
    for strategy in ("auto", "inject", "abstain"):  # the SFT strategies: the reference answer, or abstention
        got = fixes[strategy]
        assert (got["field-taught"].fix, got["field-taught"].answer, got["field-taught"].source) == (
            "inject", "Canberra", "field")
        assert got["field-silent"].fix == "inject" and got["field-refuse"].fix == "abstain"
        assert got["field-refused"].fix == "skip" and "the run abstained" in got["field-refused"].why
    assert fixes["auto"]["bench-unknown"].fix == "abstain"  # a benchmark probe keeps its category's fix
    assert fixes["inject"]["bench-unknown"].fix == "skip"
    dpo = fixes["dpo"]
    assert (dpo["field-taught"].fix, dpo["field-taught"].answer, dpo["field-taught"].rejected) == (
        "dpo", "Canberra", "Sydney")
    assert dpo["field-silent"].fix == "dpo" and dpo["field-silent"].rejected is None  # rejects the abstention
    assert (dpo["field-refuse"].fix, dpo["field-refuse"].rejected) == ("dpo-abstain", "Paris")
    assert {pid for pid, f in fixes["rl"].items() if f.fix == "rl"} == {
        "field-taught", "field-silent", "field-refuse", "bench-unknown"}
    taught = fixes["auto"]["field-taught"]
    assert "report rep-1 (+1 more), decided hallucinated by ann" in taught.why and taught.origin
    assert "a reviewed report" in fixes["auto"]["field-refuse"].origin  # no reports in the workspace: its tags say
    assert fixes["auto"]["field-known"].fix == "replay" and fixes["auto"]["field-known"].origin
    assert not fixes["auto"]["bench-known"].origin

    plan = plan_fixset(inputs, FixOptions(heldout_fraction=0, validation_fraction=0))
    assert [f.probe_id for f in plan.field] == ["field-taught", "field-silent", "field-refuse", "field-refused",
                                                "field-known"]
    rows = sft_rows(Writer(plan, inputs, "I don't know", ()), random.Random(0)).rows
    assert {r["probe_id"]: r["completion"] for r in rows if r["category"] != "replay"} == {
        "field-taught": " Canberra.", "field-silent": " Ottawa.", "field-refuse": " I don't know.",
        "bench-unknown": " I don't know."}
    plan = plan_fixset(inputs, FixOptions(strategy="dpo", heldout_fraction=0, validation_fraction=0))
    pairs = {r["probe_id"]: (r["chosen"], r["rejected"])
             for r in dpo_rows(Writer(plan, inputs, "I don't know", ()), random.Random(0)).rows
             if r["category"] != "replay"}
    assert pairs["field-taught"] == (" Canberra.", " Sydney.") and pairs["field-silent"] == (
        " Ottawa.", " I don't know.")
    assert pairs["field-refuse"] == (" I don't know.", " Paris.") and plan.needs_abstention


def test_a_field_report_decided_again_after_the_export_says_so() -> None:
    from dataclasses import replace

    from workbench.reports import FieldOrigin

    inputs = _field_inputs()
    again = FieldOrigin("field-taught", ("rep-1",), "should-refuse", "bo", "t")
    inputs = replace(inputs, field={"field-taught": again})
    taught = plan_fixset(inputs, FixOptions(heldout_fraction=0, validation_fraction=0)).targeted[0]
    assert taught.fix == "inject" and taught.answer == "Canberra"  # what the run evaluated is what is taught
    assert "decided should-refuse by bo since the run's export (export and eval again)" in taught.origin

"""Regression policy: YAML schema, helpful errors, and every gate passing and failing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.regression.compare import ProbeOutcome, RunOutcomes, compare
from workbench.regression.comparison import ComparisonResult, GateResult
from workbench.regression.policy import (
    DEFAULT_POLICY_YAML,
    GATE_TYPES,
    default_policy,
    load_policy,
    parse_policy,
)
from workbench.types import Verdict

C, W, N = Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED
Row = tuple[Verdict, Verdict, tuple[str, ...]]


def _compare(rows: Sequence[Row], gate_yaml: str, resamples: int = 500) -> ComparisonResult:
    base = {f"p{k:03d}": ProbeOutcome(f"p{k:03d}", t, b, "b") for k, (b, _, t) in enumerate(rows)}
    cand = {f"p{k:03d}": ProbeOutcome(f"p{k:03d}", t, c, "c") for k, (_, c, t) in enumerate(rows)}
    policy = parse_policy(f"bootstrap: {{resamples: {resamples}}}\ngates:\n{gate_yaml}")
    return compare(RunOutcomes("1", "base", base), RunOutcomes("2", "cand", cand), policy)


def _gate(rows: Sequence[Row], gate_yaml: str) -> GateResult:
    (result,) = _compare(rows, gate_yaml).gates
    return result


def _same(n: int, tags: tuple[str, ...] = ()) -> list[Row]:
    return [(v, v, tags) for v in [C, W, N] * (n // 3)]


# --- schema and errors ---------------------------------------------------------------------------------


def test_default_policy_parses_and_covers_documented_gates() -> None:
    policy = default_policy()
    assert policy.bootstrap.resamples == 2000 and policy.bootstrap.seed == 0
    assert policy.bootstrap.confidence == 0.95
    assert len({g.name for g in policy.gates}) == len(policy.gates) >= 4
    assert "gates:" in DEFAULT_POLICY_YAML
    # broken known facts come first: the guard set's fail above 2%, then the probes' warn above 1%, fail above
    # 2.5%; abstention over all probes warns
    broken = [(g.scope, g.max_fraction, g.severity) for g in policy.gates if g.type == "max_broken_fraction"]
    assert broken == [("guard", 0.02, "fail"), ("probes", 0.025, "fail"), ("probes", 0.01, "warn")]
    assert policy.gates[0].type == "min_fixed" and policy.gates[0].scope == "targets"  # what the fix was for
    assert policy.gates[0].severity == "fail" and policy.gates[0].min_count == 1  # type: ignore[union-attr]
    (abstention,) = [g for g in policy.gates if g.type == "max_abstention_increase"]
    assert abstention.severity == "warn"


def test_default_policy_on_issue_14s_breakage() -> None:
    """3.7% and 5.2% of 267 broken with a net gain fail; the good jobs' 0.4-0.9% pass (1-2%: warn)."""

    def verdict(broken: int) -> str:
        rows = [(C, C, ())] * (267 - broken) + [(C, W, ())] * broken + [(W, C, ())] * 60 + [(W, W, ())] * 73
        return _compare(rows, DEFAULT_POLICY_YAML.split("gates:\n", 1)[1]).verdict

    assert [verdict(k) for k in (14, 10, 7, 4, 3, 2, 1, 0)] == ["fail"] * 3 + ["warn"] * 2 + ["pass"] * 3


def test_gate_name_defaults_to_type_and_severity_to_fail() -> None:
    policy = parse_policy("gates:\n  - type: max_broken\n    max_count: 2\n")
    (gate,) = policy.gates
    assert (gate.name, gate.severity, gate.type) == ("max_broken", "fail", "max_broken")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gatez: []\n", "unknown key `gatez`. Did you mean `gates`?"),
        ("bootstrap: {resampels: 10}\ngates: [{type: max_broken}]\n", "Did you mean `resamples`?"),
        (
            "gates:\n  - type: max_broken\n    max_cout: 1\n",
            "unknown key `gates[0].max_cout`. Did you mean `max_count`?",
        ),
        ("gates:\n  - type: max_brokn\n", "unknown type `max_brokn`. Did you mean `max_broken`?"),
        ("gates:\n  - type: mcnemar\n    severity: warn\n    alhpa: 0.1\n", "Did you mean `alpha`?"),
    ],
)
def test_unknown_keys_and_types_suggest_the_closest_name(text: str, fragment: str) -> None:
    with pytest.raises(WorkbenchError) as err:
        parse_policy(text, "p.yaml")
    assert fragment in str(err.value) and str(err.value).startswith("p.yaml: ")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gates:\n  - type: max_broken\n    max_count: -1\n", "`gates[0].max_count`"),
        ("gates:\n  - type: mcnemar\n    severity: block\n", "`gates[0].severity`"),
        ("gates:\n  - {type: max_broken}\n  - {type: max_broken}\n", "repeated: max_broken"),
        ("gates: []\n", "`gates`"),
        ("- type: max_broken\n", "a policy is a mapping"),
        ("gates:\n  - {max_count: 1}\n", "is missing `type`"),
        ("gates: [\n", "not valid YAML"),
    ],
)
def test_invalid_values_are_reported_with_their_location(text: str, fragment: str) -> None:
    with pytest.raises(WorkbenchError, match=r"p\.yaml") as err:
        parse_policy(text, "p.yaml")
    assert fragment in str(err.value)


def test_load_policy_reads_a_file_and_names_a_missing_one(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("gates:\n  - {type: mcnemar, alpha: 0.01}\n", encoding="utf-8")
    assert load_policy(path).gates[0].alpha == 0.01  # type: ignore[union-attr]
    with pytest.raises(WorkbenchError, match="cannot read policy file"):
        load_policy(tmp_path / "missing.yaml")


def test_every_gate_type_is_tested_below() -> None:
    assert set(GATE_TYPES) == {
        "max_hallucination_increase",
        "hallucination_rate_must_drop",
        "max_tag_correct_drop",
        "max_abstention_on_previously_correct",
        "max_abstention_increase",
        "max_broken_fraction",
        "max_broken",
        "max_still_wrong",
        "min_fixed",
        "mcnemar",
    }


def test_min_fixed_on_the_fix_targets() -> None:
    rows: list[Row] = [(W, W, ())] * 6 + [(N, N, ())] * 2 + [(C, C, ())] * 10
    policy = parse_policy("gates:\n  - {type: min_fixed, scope: targets}\n")
    base = {f"p{k:03d}": ProbeOutcome(f"p{k:03d}", t, b, "b") for k, (b, _, t) in enumerate(rows)}

    def gate(cand_rows: list[Row], targets: frozenset[str] | None) -> GateResult:
        cand = {f"p{k:03d}": ProbeOutcome(f"p{k:03d}", t, c, "c") for k, (_, c, t) in enumerate(cand_rows)}
        (result,) = compare(RunOutcomes("1", "b", base), RunOutcomes("2", "c", cand), policy, targets=targets).gates
        return result

    targets = frozenset(f"p{k:03d}" for k in range(8))  # the six hallucinated and two refused probes
    nothing = gate(rows, targets)  # nothing broke, nothing fixed: no plain pass
    assert not nothing.passed and nothing.message.startswith("fix targets: 0 of 8") and nothing.severity == "fail"
    refused = [(W, N, ()), *rows[1:]]  # a hallucination now refused is fixed (abstention targets)
    assert gate(refused, targets).passed
    right = [*rows[:6], (N, C, ()), *rows[7:]]
    assert gate(right, targets).passed
    # fixed probes outside the targets do not count
    assert not gate(refused, frozenset(f"p{k:03d}" for k in range(1, 8))).passed
    unknown = gate(rows, None)  # no lineage: said, never a blind pass
    assert unknown.passed and unknown.message.startswith("not checked") and "lineage" in unknown.message


def test_the_guard_set_decides_where_the_probes_are_too_few_and_the_verdict_line_says_so() -> None:
    """A team's own 8 questions, 3 answered right: McNemar cannot fail on them (it needs 6 baseline-correct). With
    the guard set evaluated beside them (enough known facts), its gate decides: the verdict is conclusive and its
    line names that evidence and what to add; with too small a guard set, or none, the verdict stays inconclusive
    and the line says what to add."""
    from workbench.regression.compare import GuardOutcomes
    from workbench.regression.wording import verdict_line

    probes = [(C, C)] * 3 + [(W, W)] * 5
    base = {f"p{k}": ProbeOutcome(f"p{k}", (), b, "b") for k, (b, _) in enumerate(probes)}
    cand = {f"p{k}": ProbeOutcome(f"p{k}", (), c, "c") for k, (_, c) in enumerate(probes)}

    def gate(guard: GuardOutcomes | None) -> ComparisonResult:
        policy = default_policy().model_copy(update={"bootstrap": default_policy().bootstrap.model_copy(
            update={"resamples": 200})})
        return compare(RunOutcomes("1", "b", base), RunOutcomes("2", "c", cand), policy, guard=guard)

    def guard(known: int, broken: int) -> GuardOutcomes:
        rows = [(C, W)] * broken + [(C, C)] * (known - broken)
        b = {f"g{k}": ProbeOutcome(f"g{k}", (), v, "b") for k, (v, _) in enumerate(rows)}
        c = {f"g{k}": ProbeOutcome(f"g{k}", (), v, "c") for k, (_, v) in enumerate(rows)}
        return GuardOutcomes(RunOutcomes("3", "b", b), RunOutcomes("4", "c", c))

    decided = gate(guard(60, 1))
    mc = next(g for g in decided.gates if g.name == "not_significantly_worse")
    assert mc.detectable is not None and mc.detectable.adequate and mc.detectable.needed == 6
    assert mc.detectable.decided_by == "the guard set's 60 known facts (guard_facts_kept)"
    assert decided.verdict == "pass" and decided.exit_code == 0  # 1 of 60 broken: within the guard's 2%
    assert verdict_line(decided) == (
        "PASS (exit 0): not_significantly_worse decided on the guard set's 60 known facts (guard_facts_kept), your "
        "probes holding 3 baseline-correct (McNemar needs >= 6): add >= 3 probes the baseline answers right to "
        "decide on your own")
    failed = gate(guard(60, 2))  # 2 of 60 broken: over 2%, the guard's gate fails the candidate
    assert failed.verdict == "fail" and verdict_line(failed).startswith(
        "FAIL (exit 1): guard_facts_kept failed; not_significantly_worse decided on the guard set's 60")
    # the gate guide shows this line
    from docshow import DOCS, assert_shows, fenced, sections

    (shown,) = fenced(sections(DOCS / "guides" / "gate.md")["Verdicts and exit codes"], "text")
    assert_shows(shown.splitlines(), verdict_line(failed))
    small = gate(guard(4, 0))  # fewer known facts than the test needs: no stand-in
    assert small.verdict == "inconclusive" and verdict_line(small) == (
        "INCONCLUSIVE (exit 3): not_significantly_worse could not have failed on this probe set (3 baseline-correct "
        "probes, it needs >= 6): add >= 3 probes the baseline answers right, or grow the guard set (4 known facts; "
        "`--guard-pool FILE` adds your own)")
    # a tag gate that names its tags asks for those: absent, the guard set does not answer for them
    named = parse_policy("bootstrap: {resamples: 200}\ngates:\n"
                         "  - {type: max_broken_fraction, scope: guard, max_fraction: 0.02}\n"
                         "  - {type: max_tag_correct_drop, tags: [finance], max_points: 1.0}\n")
    tagged = compare(RunOutcomes("1", "b", base), RunOutcomes("2", "c", cand), named, guard=guard(60, 0))
    assert tagged.verdict == "inconclusive" and [g.type for g in tagged.inconclusive_gates] == ["max_tag_correct_drop"]
    none = gate(GuardOutcomes(note="left out with --no-guard"))
    assert none.verdict == "inconclusive" and verdict_line(none).endswith(
        "add >= 3 probes the baseline answers right, or evaluate the guard set beside them (not checked: left out "
        "with --no-guard)")


# --- each gate, pass and fail --------------------------------------------------------------------------


def test_max_hallucination_increase() -> None:
    gate = "  - {type: max_hallucination_increase, max_points: 1}\n"
    assert _gate(_same(60), gate).passed
    worse = _same(60) + [(C, W, ())] * 20
    result = _gate(worse, gate)
    assert (
        not result.passed and result.observed is not None and result.observed > 1 and result.unit == "points"
    )
    # ci_low reads "significantly above X": a small rise does not fail it
    slight = _same(90) + [(C, W, ())] * 2 + [(W, C, ())]
    assert _gate(slight, "  - {type: max_hallucination_increase, bound: ci_low}\n").passed


def test_hallucination_rate_must_drop() -> None:
    gate = "  - {type: hallucination_rate_must_drop}\n"
    assert not _gate(_same(60), gate).passed
    assert _gate(_same(60) + [(W, C, ())] * 20, gate).passed
    assert _gate(_same(60) + [(W, N, ())] * 20, gate).passed  # abstaining instead of hallucinating counts
    strict = "  - {type: hallucination_rate_must_drop, min_drop_points: 5, bound: delta}\n"
    assert not _gate(_same(60) + [(W, C, ())] * 2, strict).passed


def test_max_tag_correct_drop_names_the_failing_tag() -> None:
    rows = _same(30, ("stable",)) + [(C, W, ("fragile",))] * 20 + _same(9, ("fragile",))
    result = _gate(rows, "  - {type: max_tag_correct_drop, max_points: 1}\n")
    assert not result.passed and len(result.details) == 1 and result.details[0].startswith("fragile:")
    assert _gate(rows, "  - {type: max_tag_correct_drop, tags: [stable]}\n").passed
    assert _gate(rows, "  - {type: max_tag_correct_drop, min_probes: 100}\n").passed
    assert _gate(_same(30, ("stable",)), "  - {type: max_tag_correct_drop}\n").passed
    no_tags = _gate(_same(30), "  - {type: max_tag_correct_drop}\n")
    assert no_tags.passed and no_tags.observed is None


def test_max_abstention_on_previously_correct() -> None:
    rows = [(C, C, ())] * 90 + [(C, N, ())] * 10 + [(W, W, ())] * 30
    assert not _gate(rows, "  - {type: max_abstention_on_previously_correct, max_fraction: 0.05}\n").passed
    result = _gate(rows, "  - {type: max_abstention_on_previously_correct, max_fraction: 0.1}\n")
    assert result.passed and result.observed == pytest.approx(0.1)
    assert _gate(_same(30), "  - {type: max_abstention_on_previously_correct}\n").passed


def test_max_abstention_increase_counts_every_probe() -> None:
    # hallucinations traded for abstentions: no baseline-correct probe moves, yet abstention rises 20 points
    rows = _same(60) + [(W, N, ())] * 20
    gate = "  - {type: max_abstention_increase, max_points: 10}\n"
    result = _gate(rows, gate)
    assert not result.passed and result.observed == pytest.approx(25.0) and result.unit == "points"
    assert _gate(rows, "  - {type: max_abstention_on_previously_correct}\n").passed  # blind to it
    assert _gate(_same(60) + [(W, N, ())] * 2, gate).passed
    assert _gate(rows, "  - {type: max_abstention_increase, max_points: 30}\n").passed


def test_max_broken_fraction_counts_wrong_and_abstained() -> None:
    # DPO broke 14 of 267 baseline-correct probes while fixing 60; McNemar saw a net gain
    rows = [(C, C, ())] * 246 + [(C, W, ())] * 12 + [(C, N, ())] * 2 + [(W, C, ())] * 60 + [(W, W, ())] * 73
    assert len(rows) == 393 and sum(r[0] == C for r in rows) == 260
    rows += [(C, C, ())] * 7  # 267 baseline-correct
    result = _compare(rows, "  - {type: max_broken_fraction, max_fraction: 0.025}\n  - {type: mcnemar}\n")
    broken, mcnemar = result.gates
    assert not broken.passed and broken.observed == pytest.approx(14 / 267)
    assert "14 of 267" in broken.message and "12 now wrong, 2 now abstain" in broken.message
    assert mcnemar.passed
    # the good fix jobs' range passes: 2 of 267 (0.75%)
    good = [(C, C, ())] * 265 + [(C, W, ())] * 2 + [(W, C, ())] * 60
    assert _gate(good, "  - {type: max_broken_fraction, max_fraction: 0.025}\n").passed
    assert not _gate(good, "  - {type: max_broken_fraction, max_fraction: 0.005}\n").passed
    assert _gate(_same(30), "  - {type: max_broken_fraction}\n").passed


def test_max_broken() -> None:
    rows = [*_same(30), (C, W, ()), (C, N, ()), (C, W, ()), (W, C, ())]
    assert not _gate(rows, "  - {type: max_broken, max_count: 2}\n").passed
    result = _gate(rows, "  - {type: max_broken, max_count: 3}\n")
    assert result.passed and result.observed == 3


def test_mcnemar_fails_only_when_significantly_worse() -> None:
    gate = "  - {type: mcnemar, alpha: 0.05}\n"
    assert not _gate(_same(30) + [(C, W, ())] * 20 + [(W, C, ())] * 2, gate).passed
    assert _gate(_same(30) + [(C, W, ())] * 10 + [(W, C, ())] * 8, gate).passed
    assert _gate(_same(30) + [(W, C, ())] * 20, gate).passed  # significantly *better* passes


def test_warn_severity_gives_warn_verdict_and_exit_zero() -> None:
    rows = _same(30) + [(C, W, ())] * 3
    result = _compare(rows, "  - {type: max_broken, severity: warn}\n  - {type: mcnemar}\n")
    assert [g.status for g in result.gates] == ["warn", "pass"]
    assert (result.verdict, result.exit_code) == ("warn", 0)
    failed = _compare(rows, "  - {type: max_broken}\n")
    assert (failed.verdict, failed.exit_code) == ("fail", 1)


def test_max_still_wrong_counts_hallucinations_not_fixed() -> None:
    rows = _same(30) + [(W, W, ())] * 2 + [(W, N, ())]  # 12 hallucinated before: 12 still, 1 now abstains
    result = _gate(rows, "  - {type: max_still_wrong, max_count: 11, severity: warn}\n")
    assert not result.passed and result.status == "warn" and result.observed == 12
    assert "12 of 13 probes hallucinated by the baseline still hallucinated" in result.message
    assert _gate(rows, "  - {type: max_still_wrong, max_count: 12}\n").passed


def test_field_gates_count_the_field_suite_and_say_when_there_is_none() -> None:
    from workbench.regression.compare import GuardOutcomes

    def runs(verdicts: Sequence[tuple[Verdict, Verdict]]) -> GuardOutcomes:
        b = {f"f{k}": ProbeOutcome(f"f{k}", ("field",), v, "b") for k, (v, _) in enumerate(verdicts)}
        c = {f"f{k}": ProbeOutcome(f"f{k}", ("field",), v, "c") for k, (_, v) in enumerate(verdicts)}
        return GuardOutcomes(RunOutcomes("3", "base", b), RunOutcomes("4", "cand", c))

    probes = _same(30)
    base = {f"p{k:03d}": ProbeOutcome(f"p{k:03d}", t, b, "b") for k, (b, _, t) in enumerate(probes)}
    cand = {f"p{k:03d}": ProbeOutcome(f"p{k:03d}", t, c, "c") for k, (_, c, t) in enumerate(probes)}
    policy = parse_policy("gates:\n  - {type: max_broken, scope: field}\n"
                          "  - {type: max_still_wrong, scope: field, severity: warn}\n")

    def gates(field: GuardOutcomes | None) -> tuple[GateResult, ...]:
        return compare(RunOutcomes("1", "base", base), RunOutcomes("2", "cand", cand), policy, field=field).gates

    broken, still = gates(runs([(C, W), (W, W), (W, C)]))  # a fixed complaint came back; one still fails
    assert broken.status == "fail" and broken.message.startswith("field suite: 1 ")
    assert still.status == "warn" and still.message.startswith("field suite: 1 of 2 reported failures not fixed")
    kept, fixed = gates(runs([(C, C), (W, C)]))
    assert kept.status == fixed.status == "pass"
    for g in gates(None):  # no field suite: said, never a silent pass
        assert g.passed and "not checked: no field suite" in g.message


def test_field_gate_counts_a_refusal_as_not_fixed_where_the_reviewer_gave_the_answer() -> None:
    from workbench.regression.compare import GuardOutcomes
    from workbench.reports import ABSTAIN_TAG

    answer, abstain = ("field", "field:hallucinated"), ("field", "field:should-refuse", ABSTAIN_TAG)
    field = [(answer, W, W),  # still hallucinated
             (answer, W, N),  # now refused, though the reviewer wrote the answer: not fixed
             (abstain, W, N),  # should abstain and now does: fixed
             (answer, W, C),  # fixed
             (abstain, W, W),  # should abstain, still answers: still hallucinated
             (answer, C, C), (answer, N, N)]  # not reported failures: not counted

    def side(k: int) -> RunOutcomes:
        return RunOutcomes(str(k), str(k), {f"f{i}": ProbeOutcome(f"f{i}", t, row[k], "a")
                                            for i, (t, *row) in enumerate(field)})

    probes = {"p": ProbeOutcome("p", (), C, "b")}
    runs = RunOutcomes("1", "base", probes), RunOutcomes("2", "cand", probes)
    policy = parse_policy("gates:\n  - {type: max_still_wrong, scope: field, max_count: 2, severity: warn}\n"
                          "  - {type: max_still_wrong, name: three, scope: field, max_count: 3}\n")
    over, within = compare(*runs, policy, field=GuardOutcomes(side(0), side(1))).gates
    assert over.message == ("field suite: 3 of 5 reported failures not fixed (2 still hallucinated, 1 now refused "
                            "though the reviewer gave the answer) > 2")
    assert (over.status, over.observed, within.status, within.observed) == ("warn", 3, "pass", 3)
    assert over.detectable is not None
    assert over.detectable.text == "could detect: >= 3 unfixed reported failures of 5 baseline-hallucinated (60.0%)"


def test_still_wrong_on_the_probes_counts_hallucinations_only_whatever_the_tags() -> None:
    # The field reading is for the field suite alone: on the probes (even tagged like field probes) a refusal of a
    # hallucinated probe is not counted, as before.
    rows = [(W, W, ("field",)), (W, N, ("field", "field:hallucinated")), *_same(6)]
    result = _gate(rows, "  - {type: max_still_wrong}\n")
    assert result.observed == 3 and "3 of 4 probes hallucinated by the baseline still hallucinated" in result.message

"""What each gate could detect on the probe set, and the inconclusive verdict when a fail gate could not fail."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from workbench.regression import compare, default_policy, parse_policy
from workbench.regression.compare import ProbeOutcome, RunOutcomes
from workbench.regression.comparison import EXIT_CODES, ComparisonResult, worst_exit_code
from workbench.regression.detect import smallest_mcnemar, smallest_shift
from workbench.regression.transitions import Transition
from workbench.types import Verdict

C, W, N = Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED
Row = tuple[Verdict, Verdict, tuple[str, ...]]


def _compare(rows: Sequence[Row], gates: str | None = None, resamples: int = 2000) -> ComparisonResult:
    base = {f"q{k:03d}": ProbeOutcome(f"q{k:03d}", t, b, "Paris" if b == C else "Lyon", question=f"Q{k}?")
            for k, (b, _, t) in enumerate(rows)}  # fmt: skip
    cand = {f"q{k:03d}": ProbeOutcome(f"q{k:03d}", t, c, "I don't know" if c == N else "Nice")
            for k, (_, c, t) in enumerate(rows)}  # fmt: skip
    policy = default_policy() if gates is None else parse_policy(f"bootstrap: {{resamples: {resamples}}}\n{gates}")
    return compare(RunOutcomes("b", "base", base), RunOutcomes("c", "cand", cand), policy)


def test_issue_18_blanket_refusal_is_not_a_pass() -> None:
    """A real model with 4 of 100 right; the adapter makes it refuse 96: hallucinated 95% -> 0%, not attempted
    1% -> 96%, correct 4% -> 4%. Every gate used to pass ("McNemar 0 broken vs 0 fixed", "no tag to check")."""
    rows = [(C, C, ())] * 4 + [(W, N, ())] * 95 + [(N, N, ())]
    result = _compare(rows)
    assert result.verdict == "inconclusive" and result.exit_code == 3 != EXIT_CODES["pass"]
    status = {g.name: g.status for g in result.gates}
    assert status["not_significantly_worse"] == "inconclusive"  # McNemar: 4 known facts can never reach p < 0.05
    assert status["abstention_within_20_points"] == "warn"  # the trade is named
    assert status["no_tag_drops_over_1_point"] == "pass"  # no tags: nothing to check is not "blind"
    (blind,) = result.inconclusive_gates
    assert blind.detectable is not None and not blind.detectable.can_fail
    assert "4 baseline-correct probes" in blind.detectable.text and "p = 0.125" in blind.detectable.text
    head = {r.label: (r.baseline_count, r.candidate_count) for r in result.headline.rows}
    assert head == {"correct": (4, 4), "hallucinated": (95, 0), "abstained": (1, 96)}
    assert result.headline.row("abstained").delta.ci_low > 0.85 and result.headline.changed == 95
    assert [c.transition for c in result.changes] == [Transition.NOW_ABSTAINS] * 95
    assert result.to_dict()["inconclusive_gates"] == ["not_significantly_worse"]


def test_the_same_trade_with_enough_known_facts_is_judged() -> None:
    rows = [(C, C, ())] * 30 + [(W, N, ())] * 69 + [(N, N, ())]
    result = _compare(rows)
    assert not result.inconclusive_gates and (result.verdict, result.exit_code) == ("warn", 0)
    assert [g.name for g in result.gates if g.status == "warn"] == ["abstention_within_20_points"]


@pytest.mark.parametrize(("alpha", "k"), [(0.05, 6), (0.01, 8), (0.2, 4)])
def test_smallest_mcnemar_is_the_fewest_broken_probes_reaching_alpha(alpha: float, k: int) -> None:
    assert smallest_mcnemar(alpha) == k
    gate = f"gates:\n  - {{type: mcnemar, alpha: {alpha}}}\n"
    fails = [not _compare([(C, W, ())] * b + [(W, W, ())] * 20, gate).gates[0].passed for b in (k - 1, k)]
    assert fails == [False, True]


def test_mcnemar_is_inconclusive_below_six_known_facts_only() -> None:
    gate = "gates:\n  - {type: mcnemar}\n"
    for known, verdict in ((0, "inconclusive"), (5, "inconclusive"), (6, "pass")):
        result = _compare([(C, C, ())] * known + [(W, W, ())] * 50, gate)
        assert result.verdict == verdict, known
    warn_only = _compare([(C, C, ())] * 3 + [(W, W, ())] * 50, "gates:\n  - {type: mcnemar, severity: warn}\n")
    assert warn_only.verdict == "pass"  # only fail-severity gates make a verdict inconclusive
    assert warn_only.gates[0].detectable is not None and not warn_only.gates[0].detectable.can_fail


def test_a_failed_gate_wins_over_an_inconclusive_one() -> None:
    gates = "gates:\n  - {type: mcnemar}\n  - {type: max_broken_fraction, max_fraction: 0.01}\n"
    result = _compare([(C, C, ())] * 3 + [(C, W, ())] + [(W, W, ())] * 50, gates)
    assert [g.status for g in result.gates] == ["inconclusive", "fail"] and result.verdict == "fail"


@pytest.mark.parametrize(
    ("n", "gate", "tags"),
    [
        (100, "{type: max_hallucination_increase, bound: ci_low}", ()),
        (480, "{type: max_hallucination_increase, bound: ci_high, max_points: 2}", ()),
        (480, "{type: max_tag_correct_drop, max_points: 1}", ("t",)),
        (100, "{type: max_tag_correct_drop, max_points: 3, bound: ci_low}", ("t",)),
        (200, "{type: max_abstention_increase, max_points: 2, bound: ci_low}", ()),
    ],
)
def test_smallest_detectable_effect_matches_the_real_gate(n: int, gate: str, tags: tuple[str, ...]) -> None:
    """The exact-bootstrap prediction equals the 2,000-resample gate: k - 1 moved probes pass, k fail."""
    base: list[Row] = [(C, C, tags)] * (n // 2) + [(W, W, tags)] * (n - n // 2)
    adverse = N if "abstention" in gate else W
    k = _compare(base, f"gates:\n  - {gate}\n").gates[0].detectable.smallest  # type: ignore[union-attr]
    assert k is not None and k > 1
    moved = [not _compare([(C, adverse, tags)] * j + base[j:], f"gates:\n  - {gate}\n").gates[0].passed
             for j in (k - 1, k)]  # fmt: skip
    assert moved == [False, True]


def test_smallest_shift_edges() -> None:
    assert smallest_shift(100, 0, 0.0, "low", 0.95) is None  # nothing can move
    assert smallest_shift(100, 3, 0.0, "low", 0.95) is None  # 3 of 100 never clear zero at 95%
    assert smallest_shift(100, 5, 0.0, "low", 0.95) == 4
    assert smallest_shift(100, 50, 0.10, "delta", 0.95) == 11  # strictly more than 10 points


def test_counting_gates_move_in_steps_of_one_over_b() -> None:
    gate = "gates:\n  - {type: max_broken_fraction, max_fraction: 0.025}\n"
    (g,) = _compare([(C, C, ())] * 4 + [(W, W, ())] * 96, gate).gates
    assert g.detectable is not None and g.detectable.smallest == 1 and g.detectable.adequate
    assert "1 broken probe of 4 baseline-correct (25.0%)" in g.detectable.text
    (g,) = _compare([(C, C, ())] * 267 + [(W, W, ())] * 10, gate).gates
    assert g.detectable is not None and g.detectable.smallest == 7  # 7 / 267 = 2.6% > 2.5%
    (g,) = _compare([(W, W, ())] * 20, gate).gates
    assert g.detectable is not None and not g.detectable.can_fail and g.status == "pass"  # nothing known to break


def test_tag_gate_lists_blind_tags_and_named_tags_must_be_checkable() -> None:
    rows = [(C, C, ("big",))] * 40 + [(C, C, ("tiny",))] * 2 + [(W, W, ("tiny",))] * 3
    (g,) = _compare(rows, "gates:\n  - {type: max_tag_correct_drop}\n").gates
    assert g.status == "pass" and g.detectable is not None and g.detectable.can_fail
    assert "blind on 1: tiny" in g.detectable.text
    named = _compare(rows, "gates:\n  - {type: max_tag_correct_drop, tags: [tiny]}\n")
    assert named.verdict == "inconclusive"
    missing = _compare(rows, "gates:\n  - {type: max_tag_correct_drop, tags: [big, absent]}\n")
    assert missing.verdict == "inconclusive"
    assert any("absent" in d for d in missing.gates[0].detectable.details)  # type: ignore[union-attr]
    only_tiny = [(C, C, ("tiny",))] * 2 + [(W, W, ("tiny",))] * 3
    all_blind = _compare(only_tiny, "gates:\n  - {type: max_tag_correct_drop}\n")
    assert all_blind.verdict == "inconclusive"


def test_worst_exit_code_ranks_fail_over_inconclusive_over_pass() -> None:
    assert worst_exit_code([0, 3, 0]) == 3 and worst_exit_code([3, 1, 0]) == 1 and worst_exit_code([]) == 0

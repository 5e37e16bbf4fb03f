"""Regression statistics: McNemar exact, paired bootstrap (loop reference, coverage), transitions, compare."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from workbench.errors import WorkbenchError
from workbench.regression import stats
from workbench.regression.compare import ProbeOutcome, RunOutcomes, compare
from workbench.regression.stats import METRICS, mcnemar_exact, paired_bootstrap
from workbench.regression.transitions import (
    TRANSITION_HELP,
    TRANSITION_OF,
    Flip,
    Transition,
    TransitionMatrix,
    flip_of,
    grouped_transitions,
    transition_of,
    verdict_changed,
)
from workbench.types import Verdict

C, W, N = Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED
ORDER = (C, W, N)


def _runs(rows: Sequence[tuple[Verdict, Verdict, tuple[str, ...]]]) -> tuple[RunOutcomes, RunOutcomes]:
    base = {
        f"p{k:03d}": ProbeOutcome(f"p{k:03d}", tags, b, f"base{k}") for k, (b, _, tags) in enumerate(rows)
    }
    cand = {
        f"p{k:03d}": ProbeOutcome(f"p{k:03d}", tags, c, f"cand{k}") for k, (_, c, tags) in enumerate(rows)
    }
    return RunOutcomes("r1", "baseline", base), RunOutcomes("r2", "candidate", cand)


# --- McNemar -------------------------------------------------------------------------------------------


def test_mcnemar_matches_statsmodels_exact_on_random_tables() -> None:
    rng = np.random.default_rng(123)
    for _ in range(60):
        n = int(rng.integers(1, 120))
        base = rng.random(n) < 0.6
        cand = np.where(rng.random(n) < 0.3, ~base, base)  # paired: flip a few
        table = [[int(np.sum(base & cand)), int(np.sum(base & ~cand))],
                 [int(np.sum(~base & cand)), int(np.sum(~base & ~cand))]]  # fmt: skip
        ours = mcnemar_exact(broken=table[0][1], fixed=table[1][0])
        ref = sm_mcnemar(table, exact=True)
        assert ours.p_value == pytest.approx(float(ref.pvalue), abs=1e-12)


def test_mcnemar_edge_cases() -> None:
    assert mcnemar_exact(0, 0).p_value == 1.0
    assert mcnemar_exact(3, 3).p_value == 1.0
    assert mcnemar_exact(10, 0).p_value == pytest.approx(2 * 0.5**10)
    assert mcnemar_exact(10, 0).worse and not mcnemar_exact(0, 10).worse


# --- metrics -------------------------------------------------------------------------------------------


def _ref_metrics(verdicts: list[Verdict]) -> dict[str, float]:
    """Plain-Python SimpleQA metrics."""
    n = len(verdicts)
    c, i = verdicts.count(C), verdicts.count(W)
    aga = c / (c + i) if c + i else 0.0
    correct = c / n
    f = 2 * correct * aga / (correct + aga) if correct + aga else 0.0
    return {"correct": correct, "incorrect": i / n, "not_attempted": verdicts.count(N) / n,
            "accuracy_given_attempted": aga, "f_score": f}  # fmt: skip


def test_rates_match_plain_definitions_including_degenerate_runs() -> None:
    for verdicts in ([C, W, N, C], [N, N], [W, W, N], [C]):
        counts = np.array([verdicts.count(v) for v in ORDER])
        got = {k: float(v) for k, v in stats.rates(counts).items()}
        assert got == pytest.approx(_ref_metrics(verdicts))


# --- paired bootstrap ----------------------------------------------------------------------------------


def _reference_bootstrap(base: list[Verdict], cand: list[Verdict], n_resamples: int, seed: int,
                         confidence: float) -> dict[str, tuple[float, float]]:  # fmt: skip
    """The obvious loop: resample probe indices jointly, recompute both runs' metrics."""
    rng = np.random.default_rng(seed)
    n = len(base)
    deltas: dict[str, list[float]] = {m: [] for m in METRICS}
    for _ in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        mb = _ref_metrics([base[i] for i in idx])
        mc = _ref_metrics([cand[i] for i in idx])
        for m in METRICS:
            deltas[m].append(mc[m] - mb[m])
    q = [(1 - confidence) / 2, (1 + confidence) / 2]
    return {m: tuple(float(x) for x in np.quantile(deltas[m], q)) for m in METRICS}  # type: ignore[misc]


@pytest.mark.parametrize("chunk", [2_000_000, 50])  # 50: many small chunks must give the same draws
def test_paired_bootstrap_equals_reference_loop(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", chunk)
    rng = np.random.default_rng(7)
    base = [ORDER[k] for k in rng.integers(0, 3, size=37)]
    cand = [
        ORDER[k] if rng.random() < 0.4 else b for k, b in zip(rng.integers(0, 3, size=37), base, strict=True)
    ]
    got = paired_bootstrap(base, cand, n_resamples=300, seed=5, confidence=0.9)
    ref = _reference_bootstrap(base, cand, 300, 5, 0.9)
    point_b, point_c = _ref_metrics(base), _ref_metrics(cand)
    for m in METRICS:
        d = got[m]
        assert (d.ci_low, d.ci_high) == pytest.approx(ref[m], abs=1e-12)
        assert d.delta == pytest.approx(point_c[m] - point_b[m], abs=1e-12)
        assert d.ci_low <= d.delta <= d.ci_high or d.ci_low == d.ci_high


def test_paired_bootstrap_is_deterministic_for_a_seed() -> None:
    base, cand = [C, W, N, C, C, W] * 5, [C, C, N, W, C, N] * 5
    assert paired_bootstrap(base, cand, seed=3) == paired_bootstrap(base, cand, seed=3)
    assert paired_bootstrap(base, cand, seed=3) != paired_bootstrap(base, cand, seed=4)


def test_paired_bootstrap_ci_coverage_on_synthetic_data() -> None:
    """200 datasets drawn from a known joint distribution: the 95% CIs cover the true deltas ~95%."""
    cells = np.array([[0.35, 0.05, 0.05], [0.10, 0.20, 0.03], [0.07, 0.02, 0.13]])
    true_delta = cells.sum(axis=0) - cells.sum(axis=1)  # candidate marginal - baseline marginal
    rng = np.random.default_rng(2024)
    hits = {"correct": 0, "incorrect": 0}
    datasets = 200
    for k in range(datasets):
        codes = rng.choice(9, size=200, p=cells.ravel())
        base, cand = [ORDER[c // 3] for c in codes], [ORDER[c % 3] for c in codes]
        got = paired_bootstrap(base, cand, n_resamples=1000, seed=k)
        for j, m in enumerate(("correct", "incorrect")):
            hits[m] += got[m].ci_low <= true_delta[j] <= got[m].ci_high
    for m, h in hits.items():
        assert 0.9 <= h / datasets <= 0.99, (m, h)


def test_paired_bootstrap_refuses_bad_input() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap([C], [C, W])
    with pytest.raises(ValueError):
        paired_bootstrap([], [])
    with pytest.raises(ValueError):
        paired_bootstrap([C], [C], confidence=1.0)


# --- transitions ---------------------------------------------------------------------------------------


def test_transition_matrix_on_hand_made_pairs() -> None:
    pairs = [(C, C), (C, C), (C, W), (C, N), (W, C), (N, C), (N, C), (W, W), (W, N), (N, N), (N, W)]
    tm = TransitionMatrix.from_pairs(pairs)
    assert tm.counts == ((2, 1, 1), (1, 1, 1), (2, 1, 1))
    assert (tm.fixed, tm.broken, tm.still_wrong, tm.still_correct, tm.total) == (3, 2, 4, 2, 11)
    assert tm.count(N, C) == 2
    assert sum(tm.flips().values()) == tm.total
    assert [flip_of(b, c) for b, c in pairs[:4]] == [Flip.STILL_CORRECT] * 2 + [Flip.BROKEN] * 2
    assert tm.to_dict()["counts"] == [[2, 1, 1], [1, 1, 1], [2, 1, 1]]


def test_named_transitions_refine_the_mcnemar_flips() -> None:
    expected = {
        (C, C): "still_correct", (C, W): "broken_hallucinates", (C, N): "broken_abstains",
        (W, C): "fixed", (N, C): "fixed",
        (W, W): "still_hallucinates", (W, N): "now_abstains", (N, W): "now_hallucinates", (N, N): "still_abstains",
    }  # fmt: skip
    assert {k: str(v) for k, v in TRANSITION_OF.items()} == expected
    for (b, c), t in TRANSITION_OF.items():
        assert transition_of(b, c) is t and t.flip is flip_of(b, c)  # McNemar's partition is unchanged
        assert t.changed is verdict_changed(b, c) is (b != c)
    # the case: incorrect -> not attempted is an abstention change, not "still wrong"
    assert transition_of(W, N) is Transition.NOW_ABSTAINS and verdict_changed(W, N)
    # a transition never borrows a flip's name for other cells
    for t in Transition:
        cells = {k for k, v in TRANSITION_OF.items() if v is t}
        if str(t) in {str(f) for f in Flip}:
            assert cells == {k for k in TRANSITION_OF if str(flip_of(*k)) == str(t)}
    assert set(TRANSITION_HELP) == set(Transition)


def test_transition_counts_and_changed() -> None:
    pairs = [(C, C), (C, W), (C, N), (W, C), (N, C), (W, W), (W, N), (W, N), (N, W), (N, N)]
    tm = TransitionMatrix.from_pairs(pairs)
    counts = tm.transitions()
    assert counts[Transition.FIXED] == 2 and counts[Transition.NOW_ABSTAINS] == 2
    assert sum(counts.values()) == tm.total and tm.changed == sum(b != c for b, c in pairs) == 7
    assert tm.to_dict()["transitions"]["now_abstains"] == 2 and tm.to_dict()["changed"] == 7


def test_grouped_transitions_count_a_probe_in_each_of_its_groups() -> None:
    groups = grouped_transitions([(("a", "b"), C, W), (("b",), W, C), ((), C, C)])
    assert list(groups) == ["a", "b"]
    assert (groups["a"].broken, groups["a"].fixed) == (1, 0)
    assert (groups["b"].broken, groups["b"].fixed, groups["b"].total) == (1, 1, 2)


# --- compare -------------------------------------------------------------------------------------------


def test_noop_comparison_has_zero_flips_and_passes() -> None:
    rows = [(v, v, ("geo",) if k % 2 else ("people",)) for k, v in enumerate([C, W, N] * 20)]
    base, _ = _runs(rows)
    result = compare(base, RunOutcomes("r1b", "same again", dict(base.outcomes)))
    assert result.changes == () and result.overall.transitions.fixed == result.overall.transitions.broken == 0
    assert result.verdict == "pass" and result.exit_code == 0
    for d in result.overall.metrics.values():
        assert d.delta == d.ci_low == d.ci_high == 0.0
    assert result.overall.mcnemar.p_value == 1.0
    assert set(result.by_tag) == {"geo", "people"}


def test_compare_pairs_by_id_and_reports_flips_tags_and_categories() -> None:
    base, cand = _runs([(C, W, ("a",)), (W, C, ("a", "b")), (N, N, ("b",)), (C, C, ())])
    base.outcomes["p000"] = ProbeOutcome("p000", ("a",), C, "Paris", category="unknown_fact")
    result = compare(base, cand)
    assert [(c.probe_id, c.flip) for c in result.changes] == [("p000", Flip.BROKEN), ("p001", Flip.FIXED)]
    assert result.broken[0].baseline_answer == "Paris" and result.broken[0].candidate_answer == "cand0"
    assert result.by_tag["a"].n == 2 and result.by_tag["b"].transitions.fixed == 1
    assert list(result.by_category) == ["unknown_fact"] and result.by_category["unknown_fact"].broken == 1


def test_changes_list_every_verdict_change_with_its_transition_and_question() -> None:
    base, cand = _runs([(C, W, ()), (W, N, ()), (N, W, ()), (W, W, ()), (N, C, ()), (C, C, ())])
    base.outcomes["p000"] = ProbeOutcome("p000", (), C, "Paris", question="Capital of France?")
    result = compare(base, cand)
    assert [(c.probe_id, c.flip, c.transition) for c in result.changes] == [
        ("p000", Flip.BROKEN, Transition.BROKEN_HALLUCINATES),
        ("p001", Flip.STILL_WRONG, Transition.NOW_ABSTAINS),
        ("p002", Flip.STILL_WRONG, Transition.NOW_HALLUCINATES),
        ("p004", Flip.FIXED, Transition.FIXED),
    ]
    assert result.broken[0].question == "Capital of France?" and result.changes[1].question == ""
    assert [c.probe_id for c in result.changed(Transition.NOW_ABSTAINS, Transition.NOW_HALLUCINATES)] == [
        "p001", "p002"]  # fmt: skip
    assert result.changed() == result.changes and len(result.changes) == result.headline.changed


def test_mismatched_probe_sets_are_refused() -> None:
    base, cand = _runs([(C, C, ()), (W, W, ()), (N, N, ())])
    del cand.outcomes["p001"]
    cand.outcomes["extra"] = ProbeOutcome("extra", (), C, "x")
    with pytest.raises(
        WorkbenchError, match=r"1 only in the baseline .*p001.*1 only in the candidate .*extra"
    ):
        compare(base, cand)
    with pytest.raises(WorkbenchError, match="no probe outcomes"):
        compare(RunOutcomes("a", "a", {}), RunOutcomes("b", "b", {}))

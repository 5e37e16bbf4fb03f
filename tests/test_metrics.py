import numpy as np
import pytest

from workbench.grading.metrics import compute_metrics, metrics_by_tag
from workbench.types import Verdict

C, I, A = Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED  # noqa: E741 - the three grades


def test_metrics_hand_computed() -> None:
    # 6 correct, 3 incorrect, 1 abstained out of 10
    m = compute_metrics([C] * 6 + [I] * 3 + [A], bootstrap=0)
    assert m.n == 10
    assert m.correct == pytest.approx(0.6)
    assert m.incorrect == pytest.approx(0.3)
    assert m.not_attempted == pytest.approx(0.1)
    assert m.accuracy_given_attempted == pytest.approx(6 / 9)
    assert m.f_score == pytest.approx(2 * 0.6 * (6 / 9) / (0.6 + 6 / 9))
    assert m.ci is None


def test_metrics_edge_cases() -> None:
    all_abstain = compute_metrics([A] * 4, bootstrap=0)
    assert (all_abstain.correct, all_abstain.accuracy_given_attempted, all_abstain.f_score) == (0, 0, 0)
    assert compute_metrics([], bootstrap=100).n == 0


def test_bootstrap_ci_contains_point_and_is_seeded() -> None:
    verdicts = [C] * 50 + [I] * 30 + [A] * 20
    m1 = compute_metrics(verdicts, bootstrap=500, seed=1)
    m2 = compute_metrics(verdicts, bootstrap=500, seed=1)
    assert m1.ci == m2.ci
    assert m1.ci is not None
    lo, hi = m1.ci["correct"].low, m1.ci["correct"].high
    assert lo < 0.5 < hi
    # normal approximation of a proportion's 95% interval: +-1.96*sqrt(p(1-p)/n) = +-0.098
    assert hi - lo == pytest.approx(2 * 1.96 * np.sqrt(0.25 / 100), rel=0.2)


def test_by_tag_counts_multi_tagged_probes_in_each() -> None:
    by = metrics_by_tag([C, I, A], [("x",), ("x", "y"), ("y",)], bootstrap=0)
    assert by["x"].n == 2 and by["x"].correct == 0.5
    assert by["y"].n == 2 and by["y"].not_attempted == 0.5


def test_truncation_share_and_its_warning_threshold() -> None:
    from workbench.grading.metrics import TRUNCATED_WARN_SHARE, truncation, truncation_warnings

    assert truncation(["stop", "length", "stop", "stop"]) == {"n": 1, "of": 4, "share": 0.25}
    assert truncation([]) == {"n": 0, "of": 0, "share": 0.0}
    at = truncation(["length"] + ["stop"] * 9)  # exactly the threshold: no warning
    assert at["share"] == TRUNCATED_WARN_SHARE and truncation_warnings({"truncated": at}) == []
    over = truncation(["length"] * 2 + ["stop"] * 8)
    (line,) = truncation_warnings({"truncated": over, "truncated_samples": at})
    assert line.startswith("warning: 2 of 10 answers (20%)")
    assert truncation_warnings({"overall": {}}) == []  # a run stored before truncation was measured

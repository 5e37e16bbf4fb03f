"""The risk shift a gate reports: the candidate's hallucination risk beside the baseline's, on the same questions.

A fix that makes a model sure of its wrong answers can leave accuracy flat and still be worse: its errors stop
looking like errors. The risk score needs no reference, so the shift is read on any pair of runs, the team's
traffic included; where the probes have references, `confident_wrong` counts the hallucinations each model makes
with a low risk (under CONFIDENT), the ones no reviewer would be sent to.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from workbench.results import RunResults
from workbench.risk.run import score_results
from workbench.risk.score import HIGH

#: A hallucination scored under this risk is a confident one.
CONFIDENT = 0.2


@dataclass(frozen=True)
class RiskShift:
    """Both runs' risk over the questions both answered.

    Attributes:
        answers: Questions scored in both runs.
        baseline_mean / candidate_mean: Mean risk (the expected share of made-up answers, by the score).
        diff_ci: 95% bootstrap interval of the mean paired difference (candidate - baseline).
        baseline_high / candidate_high: Answers at risk >= HIGH (0.5).
        baseline_confident_wrong / candidate_confident_wrong: Answers graded hallucinations that scored under
            CONFIDENT (only where the probes have references; 0 otherwise).
        scored_by: The risk model (what it was fitted on).
    """

    answers: int
    baseline_mean: float
    candidate_mean: float
    diff_ci: tuple[float, float]
    baseline_high: int
    candidate_high: int
    baseline_confident_wrong: int
    candidate_confident_wrong: int
    scored_by: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        lo, hi = self.diff_ci
        return (f"mean risk {self.baseline_mean:.3f} -> {self.candidate_mean:.3f} over {self.answers} answers "
                f"(difference 95% CI [{lo:+.3f}, {hi:+.3f}]); risk >= {HIGH}: {self.baseline_high} -> "
                f"{self.candidate_high}; confident hallucinations (risk < {CONFIDENT}): "
                f"{self.baseline_confident_wrong} -> {self.candidate_confident_wrong}")


def risk_shift(baseline: RunResults, candidate: RunResults, wrong: tuple[set[str], set[str]], *,
               resamples: int = 1000, seed: int = 0) -> RiskShift | None:
    """The shift between two runs' loaded results (each scored by the shipped risk model); `wrong`: the probe ids
    each run got wrong, as the gate reads them (reviewers' overrides applied). None when they share no question."""
    b, c = score_results(baseline), score_results(candidate)
    br, cr = {r.probe_id: r.risk for r in b.risks}, {r.probe_id: r.risk for r in c.risks}
    ids = [p for p in br if p in cr]
    if not ids:
        return None
    bv, cv = np.array([br[p] for p in ids]), np.array([cr[p] for p in ids])
    d = cv - bv
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), (resamples, len(d)))].mean(axis=1)
    return RiskShift(
        answers=len(ids), baseline_mean=float(bv.mean()), candidate_mean=float(cv.mean()),
        diff_ci=(float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))),
        baseline_high=int((bv >= HIGH).sum()), candidate_high=int((cv >= HIGH).sum()),
        baseline_confident_wrong=sum(br[p] < CONFIDENT for p in ids if p in wrong[0]),
        candidate_confident_wrong=sum(cr[p] < CONFIDENT for p in ids if p in wrong[1]),
        scored_by=c.model.fitted_on)

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

from workbench.risk.run import Scored, score_run
from workbench.risk.stored import load_risks
from workbench.store import Store

#: A hallucination scored under this risk is a confident one.
CONFIDENT = 0.2
HIGH = 0.5


@dataclass(frozen=True)
class RiskShift:
    """Both runs' risk over the questions both answered.

    Attributes:
        answers: Questions scored in both runs.
        baseline_mean / candidate_mean: Mean risk (the expected share of made-up answers, by the score).
        diff_ci: 95% bootstrap interval of the mean paired difference (candidate - baseline).
        baseline_high / candidate_high: Answers at risk >= 0.5.
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


def _scored(store: Store, run_id: str) -> tuple[Scored, dict[str, float]]:
    """The run scored now (pure Python over its stored answers), with the scores `eval --risk` stored, which win:
    they are what the team saw."""
    scored = score_run(store, run_id, save=False)
    risks = {r.probe_id: r.risk for r in scored.risks}
    risks.update({k: v.risk for k, v in load_risks(store, run_id).items()})
    return scored, risks


def risk_shift(store: Store, baseline_id: str, candidate_id: str, *, resamples: int = 1000,
               seed: int = 0) -> RiskShift | None:
    """The shift between two stored runs; None when they share no answered question."""
    (b, br), (c, cr) = _scored(store, baseline_id), _scored(store, candidate_id)
    ids = [p for p in br if p in cr]
    if not ids:
        return None
    bv, cv = np.array([br[p] for p in ids]), np.array([cr[p] for p in ids])
    d = cv - bv
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), (resamples, len(d)))].mean(axis=1)
    wrong_b = {r.probe_id for r, h in zip(b.risks, b.hallucinated(), strict=True) if h}
    wrong_c = {r.probe_id for r, h in zip(c.risks, c.hallucinated(), strict=True) if h}
    return RiskShift(
        answers=len(ids), baseline_mean=float(bv.mean()), candidate_mean=float(cv.mean()),
        diff_ci=(float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))),
        baseline_high=int((bv >= HIGH).sum()), candidate_high=int((cv >= HIGH).sum()),
        baseline_confident_wrong=sum(br[p] < CONFIDENT for p in ids if p in wrong_b),
        candidate_confident_wrong=sum(cr[p] < CONFIDENT for p in ids if p in wrong_c),
        scored_by=c.model.fitted_on)

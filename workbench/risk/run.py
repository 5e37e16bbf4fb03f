"""A run's answers scored for risk: features from its stored generations, then the risk model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.results import ProbeResult, RunResults, load_results
from workbench.risk.features import Features, declines, features
from workbench.risk.score import HIGH, RiskModel, auroc, default_model
from workbench.risk.stored import AnswerRisk, save_risks
from workbench.store import Store
from workbench.types import Verdict


@dataclass(frozen=True)
class Scored:
    """A run's scored answers, with the grade each had (when the run had references)."""

    run_id: str
    risks: tuple[AnswerRisk, ...]
    verdicts: tuple[Verdict, ...]
    model: RiskModel

    def hallucinated(self) -> list[bool]:
        return [v == Verdict.INCORRECT for v in self.verdicts]

    def summary(self) -> dict[str, Any]:
        """What `eval --risk` and `risk score` report: how many, the mean, how many at risk >= 0.5, and the AUROC
        against the run's own grades (None without both kinds)."""
        risks = [r.risk for r in self.risks]
        return {"run_id": self.run_id, "scored": len(risks), "mean_risk": sum(risks) / len(risks) if risks else None,
                "high_risk": sum(r >= HIGH for r in risks), "auroc_vs_grades": auroc(risks, self.hallucinated()),
                "risk_model": self.model.fitted_on}


def probe_features(r: ProbeResult) -> Features:
    """The features of the question's greedy answer: its samples and the paraphrases' greedy answers as evidence."""
    answer = r.greedy[0]
    samples = [a.text for a in r.samples if a.variant == 0]
    paraphrases = [a.text for a in r.greedy[1:]]
    return features(r.probe.question, answer.text, answer.mean_logprob, samples, paraphrases,
                    declines=declines(answer.text, r.probe.question, r.probe.language))


def score_results(results: RunResults, model: RiskModel | None = None) -> Scored:
    """Every answered question of loaded results scored (pure: nothing read or written)."""
    model = model or default_model()
    risks = tuple(AnswerRisk(probe_id=r.probe.id, variant=0, risk=model.risk(f), features=f,
                             scored_by=model.fitted_on)
                  for r, f in ((r, probe_features(r)) for r in results.probes))
    return Scored(run_id=results.run.id, risks=risks, verdicts=tuple(r.verdict for r in results.probes), model=model)


def score_run(store: Store, run_id: str, model: RiskModel | None = None, *, save: bool = True) -> Scored:
    """Score every answered question of the run (`save`: and store the scores, replacing earlier ones)."""
    scored = score_results(load_results(store, run_id), model)
    if save:
        save_risks(store, scored.run_id, scored.risks)
    return scored

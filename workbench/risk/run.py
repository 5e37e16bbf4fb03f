"""A run's answers scored for risk: features from its stored generations, then the risk model."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.grading.refusal import read
from workbench.results import ProbeResult, load_results
from workbench.risk.features import Features, features
from workbench.risk.score import RiskModel, default_model
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


def probe_features(r: ProbeResult) -> Features:
    """The features of the question's greedy answer: its samples and the paraphrases' greedy answers as evidence."""
    answer = r.greedy[0]
    languages = (r.probe.language,) if r.probe.language else ()
    declines = read(answer.text, r.probe.question, languages).declines
    samples = [a.text for a in r.samples if a.variant == 0]
    paraphrases = [a.text for a in r.greedy[1:]]
    return features(r.probe.question, answer.text, answer.mean_logprob, samples, paraphrases, declines=declines)


def score_run(store: Store, run_id: str, model: RiskModel | None = None, *, save: bool = True) -> Scored:
    """Score every answered question of the run (`save`: and store the scores, replacing earlier ones)."""
    model = model or default_model()
    results = load_results(store, run_id)
    risks, verdicts = [], []
    for r in results.probes:
        f = probe_features(r)
        risks.append(AnswerRisk(probe_id=r.probe.id, variant=0, risk=model.risk(f), features=f,
                                scored_by=model.fitted_on))
        verdicts.append(r.verdict)
    if save:
        save_risks(store, results.run.id, risks)
    return Scored(run_id=results.run.id, risks=tuple(risks), verdicts=tuple(verdicts), model=model)

"""Reports scored for risk with no reference: is the answer the user saw made up? (`workbench reports score`)

The model under review is asked each report's prompt again: a greedy answer and N samples. The logged answer's risk
is read from how the samples agree with it (`workbench.risk.features`; the log-prob only where the model's own greedy
answer says the same: the logged text need not be this model's generation) and turned into a probability by the
risk model (`workbench.risk.score`). A report whose export held no answer has the model's greedy answer scored
instead, with its mean log-prob.

The asking is an ordinary run (`workbench.runner.run_eval`), so the generation cache, batching, resume and every
backend are the runner's: the reports become probes of a suite named `traffic` (probe id = report id, tag
`traffic`, the prompt as `reports export` writes it). A probe needs a reference, and traffic has none: its one
accepted answer is the logged answer, so that run's "correct" reads "the model says the logged answer again", not
"right". Reports asking the same prompt share one generation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.errors import WorkbenchError
from workbench.probes import LoadResult, Suite
from workbench.reports.queue import QueuedReport, RiskEvidence, list_reports, save_risks
from workbench.reports.suite import prompt_question, shared_system
from workbench.results import ProbeResult, load_results
from workbench.risk.features import content, declines, features, same
from workbench.risk.score import RiskModel, default_model
from workbench.runner import EvalOptions, Limits, run_eval
from workbench.store import Store, utcnow
from workbench.types import ModelSpec, Probe

SUITE_NAME = "traffic"
TRAFFIC_TAG = "traffic"
#: The reference of a report without a logged answer (a probe needs one); no generation says it, so the run grades
#: such a report's answers INCORRECT, which means nothing here: its risk is read from the samples.
NO_ANSWER = "(no answer in the export)"
#: Disagreeing samples kept as a report's evidence (the distinct ones, most frequent first).
SHOWN_SAMPLES = 5


@dataclass(frozen=True)
class ScoredReports:
    run_id: str
    scored: int
    model: RiskModel
    risks: tuple[tuple[str, float], ...]  # (report id, risk), riskiest first


def traffic_suite(reports: Sequence[QueuedReport], *, template: str = "chat", max_tokens: int | None = None,
                  stop: list[str] | None = None) -> tuple[Suite, LoadResult]:
    """The reports as a suite of probes: one per report, the logged answer its reference (see the module)."""
    shared = shared_system(reports) if template == "chat" else None  # a plain template has no system turn
    suite = Suite(name=SUITE_NAME, data="field reports", template=template, tags=[TRAFFIC_TAG])
    suite = suite.with_generation(max_tokens=max_tokens, stop=stop, system_prompt=shared)
    probes = tuple(Probe(id=r.id, question=prompt_question(r, shared),
                         answers=(_logged(r) or NO_ANSWER,),
                         tags=(TRAFFIC_TAG,), source=f"{r.source}:{r.line}") for r in reports)
    return suite, LoadResult(probes=probes, skipped=0, problems=(), source="field reports")


def score_reports(store: Store, spec: ModelSpec, reports: Sequence[QueuedReport], *, samples: int = 5,
                  temperature: float = 1.0, seed: int = 0, template: str = "chat", max_tokens: int | None = None,
                  stop: list[str] | None = None, model: RiskModel | None = None, limits: Limits | None = None,
                  progress: Callable[[int, int], None] | None = None) -> ScoredReports:
    """Ask `spec` every report's prompt again (greedy + `samples` samples, in one run), score each report's answer
    and store the scores (replacing earlier ones). `model`: the risk model (default: the shipped one)."""
    if not reports:
        raise WorkbenchError("no report to score; import some with `workbench reports import FILE` (a traffic "
                             "export of unflagged conversations is read like flagged ones)")
    if samples < 1:
        raise WorkbenchError(f"scoring needs samples (--samples 1 or more, 5 is a good start), got {samples}: the "
                             "risk of an answer is read from how the model's samples agree with it")
    model = model or default_model()  # before any generation: a missing model file is refused at once
    suite, loaded = traffic_suite(reports, template=template, max_tokens=max_tokens, stop=stop)
    options = EvalOptions(samples=samples, temperature=temperature, seed=seed, bootstrap=0)
    run = run_eval(store, spec, suite, loaded, options, limits=limits or Limits(), progress=progress)
    results = {r.probe.id: r for r in load_results(store, run.run_id).probes}
    name = spec.model + (f" + {spec.adapter}" if spec.adapter else "")
    now = utcnow()
    scored = [(r.id, *_score(r, results[r.id], model, run.run_id, name, now)) for r in reports]
    save_risks(store, scored)
    ranked = sorted(((rid, risk) for rid, risk, _ in scored), key=lambda x: -x[1])
    return ScoredReports(run_id=run.run_id, scored=len(scored), model=model, risks=tuple(ranked))


def select_reports(store: Store, *, status: str | None = None, source: str | None = None,
                   unscored: bool = False) -> list[QueuedReport]:
    """The reports `reports score` asks about: every stored one, or those of a status / source file, or (with
    `unscored`) only those never scored."""
    chosen = list_reports(store, status=status, source=source)
    return [r for r in chosen if not (unscored and r.risk is not None)]


def _logged(r: QueuedReport) -> str:
    """The answer the user saw, "" when the export held none."""
    return (r.answer or "").strip()


def _score(r: QueuedReport, result: ProbeResult, model: RiskModel, run_id: str, name: str,
           now: str) -> tuple[float, RiskEvidence]:
    greedy = result.greedy[0]
    drawn = [a.text for a in result.samples if a.variant == 0]
    logged = _logged(r)
    answer = logged or greedy.text
    mine = content(answer, r.question)
    # The logged text's own log-prob is unknown (it need not be this model's generation); where the model's greedy
    # answer says the same, the greedy answer's log-prob is the model's confidence in it.
    logprob = greedy.mean_logprob if not logged or same(mine, content(greedy.text, r.question)) else None
    f = features(r.question, answer, logprob, drawn, [], declines=declines(answer, r.question))
    others = [s.strip() for s in drawn if not same(mine, content(s, r.question))]
    shown = tuple(s for s, _ in Counter(o for o in others if o).most_common(SHOWN_SAMPLES))  # a blank shows nothing
    evidence = RiskEvidence(run_id=run_id, risk_model=model.fitted_on, scored="logged" if logged else "greedy",
                            features=f.to_dict(), samples=len(drawn), agreeing=len(drawn) - len(others),
                            disagreeing=shown, greedy=greedy.text.strip(), model=name, scored_at=now)
    return model.risk(f), evidence



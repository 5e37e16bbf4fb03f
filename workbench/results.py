"""A stored run read back as typed per-probe results: what attribution, regression and the app read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from workbench.grading.normalize import normalize
from workbench.probes import Suite
from workbench.store import RunRecord, Store
from workbench.types import Probe, Verdict


@dataclass(frozen=True)
class Answer:
    variant: int  # 0 = the question, 1.. = paraphrases
    kind: str  # greedy | sample
    sample_index: int
    prompt: str
    text: str
    verdict: Verdict
    mean_logprob: float | None
    finish_reason: str
    engine: str | None = None  # what produced the text (Backend.engine()); None: stored before engines were

    @property
    def engine_label(self) -> str:
        return self.engine or "unknown (before engines were recorded)"


@dataclass(frozen=True)
class ProbeResult:
    probe: Probe
    greedy: tuple[Answer, ...]  # one per variant, the question's first
    samples: tuple[Answer, ...]  # every variant's samples

    @property
    def verdict(self) -> Verdict:
        return self.greedy[0].verdict

    @property
    def answer(self) -> str:
        return self.greedy[0].text

    @property
    def sample_accuracy(self) -> float:
        """Share of samples (all variants) graded correct; 0 without samples."""
        return sum(a.verdict == Verdict.CORRECT for a in self.samples) / len(self.samples) if self.samples else 0.0

    @property
    def agreement(self) -> float | None:
        """Share of the most common normalized sample answer (of the question's samples)."""
        texts = [normalize(a.text) for a in self.samples if a.variant == 0]
        return Counter(texts).most_common(1)[0][1] / len(texts) if texts else None

    @property
    def mean_logprob(self) -> float | None:
        return self.greedy[0].mean_logprob


@dataclass(frozen=True)
class RunResults:
    run: RunRecord
    probes: tuple[ProbeResult, ...]

    def by_id(self) -> dict[str, ProbeResult]:
        return {r.probe.id: r for r in self.probes}

    def engines(self) -> dict[str, int]:
        """Answers per engine that produced them (greedy and samples), most first."""
        counts = Counter(a.engine_label for r in self.probes for a in (*r.greedy, *r.samples))
        return dict(counts.most_common())


def probe_from_dict(d: dict[str, object]) -> Probe:
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    return Probe(**fields)  # type: ignore[arg-type]


def load_results(store: Store, run_id: str) -> RunResults:
    run = store.get_run(run_id)
    answers: dict[str, list[Answer]] = {}
    for r in store.answer_rows(run.id):
        answers.setdefault(r["probe_id"], []).append(Answer(
            variant=r["variant"], kind=r["kind"], sample_index=r["sample_index"], prompt=r["prompt"],
            text=r["text"], verdict=Verdict(r["verdict"]), mean_logprob=r["mean_logprob"],
            finish_reason=r["finish_reason"], engine=r["engine"]))
    out = []
    for d in store.probe_rows(run.id):
        probe = probe_from_dict(d)
        rows = answers.get(probe.id, [])
        greedy = tuple(sorted((a for a in rows if a.kind == "greedy"), key=lambda a: a.variant))
        if not greedy or greedy[0].variant != 0:  # unfinished run: the question is not answered yet
            continue
        samples = tuple(sorted((a for a in rows if a.kind == "sample"), key=lambda a: (a.variant, a.sample_index)))
        out.append(ProbeResult(probe, greedy, samples))
    return RunResults(run, tuple(out))


def suite_of_run(run: RunRecord) -> Suite:
    """The suite settings `run` recorded, as a Suite carrying the run's budget rule (`max_tokens_rule`: where its
    max_tokens came from; "suite" for runs from before it was recorded): every suite rebuilt from a run (a resume,
    a rerun like it, its fix sets) comes from here."""
    return Suite.model_validate(run.suite_config).with_max_tokens_rule(
        str(run.options.get("max_tokens_rule", "suite")))


def effective_suite(run: RunRecord, base: Suite | None = None) -> Suite:
    """The suite exactly as `run` generated under it: its recorded suite settings (max_tokens, stop and system
    prompt as the run applied them) with the run's `--template` override in place of the suite's template.
    Fix sets and the tag breaker render their rows with it, so that training prompts are the evaluation's.
    `base`: a suite to use instead of the recorded one (the override still applies)."""
    suite = base or suite_of_run(run)
    template = run.options.get("template")
    return suite.model_copy(update={"template": template}) if template and template != suite.template else suite

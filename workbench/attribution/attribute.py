"""Attribute a stored run: every failed probe (greedy answer to the question not correct) gets one
category from the knowledge axis (the model's own answers) and the data axis (the corpus index).

The method sees only what a user's run has: the probes, the model's graded answers and the corpus.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from workbench.attribution.data_axis import data_axis, support_bucket
from workbench.attribution.decide import DataAxis, Thresholds, decide
from workbench.attribution.engine import CorpusEngine
from workbench.attribution.entropy import Embed, Spread, spread
from workbench.attribution.knowledge import ALPHA, ChanceModel, Knowledge, assess, significant
from workbench.attribution.spans import trace_spans
from workbench.attribution.types import Attribution, save_attributions
from workbench.results import ProbeResult, RunResults, load_results
from workbench.store import Store
from workbench.types import Verdict


@dataclass(frozen=True)
class Options:
    """Attribution knobs. alpha: binomial test level; embed: merge sample clusters by embedding."""

    alpha: float = ALPHA
    thresholds: Thresholds = field(default_factory=Thresholds)
    embed: Embed | None = None


def missing_signals(results: RunResults, index: CorpusEngine | None) -> list[str]:
    """Run-wide signals the attribution has to do without."""
    missing = []
    if not any(r.samples for r in results.probes):
        missing.append("samples")
    has_paraphrases = any(r.probe.paraphrases for r in results.probes)
    if not has_paraphrases or all(len(r.greedy) == 1 for r in results.probes):
        missing.append("paraphrases")
    if index is None:
        missing.append("corpus")
    return missing


def attribute_results(results: RunResults, index: CorpusEngine | None,
                      options: Options = Options()) -> list[Attribution]:
    probes = results.probes
    failed = [r for r in probes if r.verdict != Verdict.CORRECT]
    by_id = {r.probe.id: r for r in failed}
    chance = ChanceModel(probes)
    data = data_axis(index, probes, failed)
    run_missing = missing_signals(results, index)
    knowledge = {r.probe.id: assess(r, chance.chance(r), alpha=options.alpha) for r in failed}
    data = _with_trace(data, knowledge)
    if index is not None:  # where the words of each hallucination come from (span tracing)
        data = {pid: replace(d, spans=[s.as_dict() for s in trace_spans(index, r.answer)])
                if (r := by_id[pid]).verdict == Verdict.INCORRECT and d.available else d for pid, d in data.items()}
    out = []
    for r in failed:
        missing = [*run_missing, *(["subject"] if index is not None and not r.probe.subject else [])]
        out.append(decide(r, knowledge[r.probe.id], _spread(r, options.embed), data[r.probe.id], missing,
                          options.thresholds))
    return out


def _with_trace(data: dict[str, DataAxis], knowledge: dict[str, Knowledge]) -> dict[str, DataAxis]:
    """Pool the Unknown, conflict-free failures per support level: right samples vs summed chance.
    One fact's 1 right sample in 20 is noise; a level's 25 in 640 where chance gives 9 is a trace."""
    pools: dict[int, list[Knowledge]] = defaultdict(list)
    for pid, d in data.items():
        kn = knowledge[pid]
        if d.available and d.support > 0 and not d.conflict and not d.contradiction and kn.level == "Unknown" and kn.n:
            pools[support_bucket(d.support)].append(kn)
    trace: dict[int, float] = {}
    for bucket, kns in pools.items():
        k, n = sum(kn.k for kn in kns), sum(kn.n for kn in kns)
        trace[bucket] = significant(k, n, sum(kn.n * kn.chance for kn in kns) / n)[1] or 1.0
    return {pid: replace(d, trace_p=trace.get(support_bucket(d.support))) if d.available else d
            for pid, d in data.items()}


def attribute_run(store: Store, run_id: str, *, index: CorpusEngine | None,
                  options: Options = Options()) -> list[Attribution]:
    """Attribute the run's failed probes and store the result with the run (replacing any earlier one)."""
    results = load_results(store, run_id)
    items = attribute_results(results, index, options)
    save_attributions(store, results.run.id, items)
    return items


def _spread(r: ProbeResult, embed: Embed | None) -> Spread | None:
    """Agreement / semantic entropy of the question's own samples (other variants ask differently)."""
    own = [s for s in r.samples if s.variant == 0]
    return spread([s.text for s in own], [s.mean_logprob for s in own], embed=embed)

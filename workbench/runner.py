"""One evaluation run: model x suite -> greedy answer + k samples per probe variant, graded and stored.

Every finished batch of generations is committed to the cache and the store before the next starts,
so a run killed at any moment loses nothing it finished, and a rerun generates only what is missing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench import prompting
from workbench.backends import Backend
from workbench.errors import PartialGenerationError, WorkbenchError
from workbench.grading import Grader, make_grader
from workbench.grading.metrics import compute_metrics, metrics_by_tag
from workbench.probes import LoadResult, Suite
from workbench.store import Store
from workbench.store.cache import cache_key
from workbench.types import Completion, GenerationRequest, ModelSpec, Probe, SamplingParams, Verdict


@dataclass(frozen=True)
class EvalOptions:
    """Options of `workbench eval` that change what is generated.

    Attributes:
        samples: Sampled answers per prompt variant (0 = greedy only). Attribution wants >= 10.
        paraphrases: Also ask each probe's paraphrases (greedy + samples for each).
        temperature: Sampling temperature of the samples.
        top_p: Nucleus mass of the samples.
        seed: Seed of the samples.
        logprobs: Ask for token log-probs (mean log-prob is kept per answer).
        template: Overrides the suite's prompt template.
        bootstrap: Resamples for metric confidence intervals.
    """

    samples: int = 0
    paraphrases: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    logprobs: bool = True
    template: str | None = None
    bootstrap: int = 1000

    def __post_init__(self) -> None:
        if self.samples < 0:
            raise ValueError(f"`samples` must be >= 0, got {self.samples}")


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    n: int
    metrics: dict[str, Any]
    generated: int
    cached: int
    skipped_bad: int


@dataclass(frozen=True)
class _Slot:
    """One completion the run needs: which probe, variant, kind and sample index."""

    probe: Probe
    variant: int
    kind: str  # greedy | sample
    sample_index: int
    request: GenerationRequest
    key: str


def render_prompt(suite: Suite, template: str | None, question: str, backend: Backend | None) -> str:
    tpl = template or suite.template
    if tpl == "chat":
        if backend is None:
            raise WorkbenchError("template `chat` needs a backend with the tokenizer's chat template")
        return backend.format_chat(question, suite.system_prompt)
    return prompting.render(tpl, question)


def run_eval(
    store: Store,
    spec: ModelSpec,
    suite: Suite,
    loaded: LoadResult,
    options: EvalOptions = EvalOptions(),
    *,
    backend: Backend | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunSummary:
    """Evaluate `spec` on the suite's probes; returns the stored run's summary."""
    from workbench.backends import backend_class

    backend = backend or backend_class(spec.backend)(spec)  # cheap: models load on first generate
    fingerprint = backend.fingerprint()
    grader = make_grader(suite.grader, tuple(suite.abstention_phrases), suite.grader_options, store=store)
    probes = loaded.probes
    slots = _plan(probes, suite, options, fingerprint, backend)  # before the run row: a bad template leaves none
    run_id = store.create_run(
        model=spec.model, adapter=spec.adapter, backend=spec.backend, fingerprint=fingerprint,
        suite=suite.name, suite_config=suite.model_dump(), options=dataclasses.asdict(options),
        n_probes=len(probes), skipped_bad=loaded.skipped,
    )
    store.add_probes(run_id, [dataclasses.asdict(p) for p in probes])
    cached = store.cache_get_many([s.key for s in slots])
    n_cached = sum(s.key in cached for s in slots)
    done = n_cached
    # Answers for cached slots are written first; then missing ones batch by batch.
    _store_answers(store, run_id, grader, [(s, _from_cache(cached[s.key])) for s in slots if s.key in cached])
    if progress:
        progress(done, len(slots))
    missing = [s for s in slots if s.key not in cached]
    generated = 0
    try:
        for batch in _batches(missing, backend.batch_size):
            try:
                results = _generate(backend, batch)
            except PartialGenerationError as e:
                _keep(store, run_id, grader, fingerprint, e.pairs)
                generated += len(e.pairs)
                raise
            _keep(store, run_id, grader, fingerprint, results)
            generated += len(results)
            done += len(results)
            if progress:
                progress(done, len(slots))
    except BaseException:
        store.finish_run(run_id, status="failed", metrics=None, generated=generated, cached=n_cached)
        raise
    metrics = summarize(store, run_id, bootstrap=options.bootstrap)
    metrics["grader"] = {"name": suite.grader, **grader.report()}
    store.finish_run(run_id, status="done", metrics=metrics, generated=generated, cached=n_cached)
    return RunSummary(run_id=run_id, n=len(probes), metrics=metrics, generated=generated, cached=n_cached,
                      skipped_bad=loaded.skipped)


def _plan(probes: Sequence[Probe], suite: Suite, options: EvalOptions, fingerprint: str,
          backend: Backend) -> list[_Slot]:
    greedy = SamplingParams(temperature=0.0, max_tokens=suite.max_tokens, stop=tuple(suite.stop),
                            logprobs=options.logprobs)
    sampled = dataclasses.replace(greedy, temperature=options.temperature, top_p=options.top_p,
                                  seed=options.seed, n=max(options.samples, 1))
    slots: list[_Slot] = []
    for p in probes:
        for v, question in enumerate(p.variants(options.paraphrases)):
            prompt = render_prompt(suite, options.template, question, backend)
            g = GenerationRequest(prompt, greedy)
            slots.append(_Slot(p, v, "greedy", 0, g, cache_key(fingerprint, g, 0)))
            if options.samples:
                r = GenerationRequest(prompt, sampled)
                slots += [_Slot(p, v, "sample", i, r, cache_key(fingerprint, r, i)) for i in range(options.samples)]
    return slots


def _batches(slots: Sequence[_Slot], prompts_per_batch: int) -> list[list[_Slot]]:
    """Group missing slots by request (n samples of one prompt travel together), then chunk."""
    by_request: dict[GenerationRequest, list[_Slot]] = {}
    for s in slots:
        by_request.setdefault(s.request, []).append(s)
    groups = list(by_request.values())
    return [[s for g in groups[i : i + prompts_per_batch] for s in g] for i in range(0, len(groups), prompts_per_batch)]


def _generate(backend: Backend, batch: Sequence[_Slot]) -> list[tuple[_Slot, Completion]]:
    by_request: dict[GenerationRequest, list[_Slot]] = {}
    for s in batch:
        by_request.setdefault(s.request, []).append(s)
    requests = []
    for req, group in by_request.items():
        n = len({s.sample_index for s in group})  # probes asking the same question share one generation
        if n == req.sampling.n:
            requests.append(req)
        else:  # only some samples missing (e.g. --samples grew): draw the rest under a derived seed
            first = min(s.sample_index for s in group)
            seed = (req.sampling.seed or 0) * 1_000_003 + first
            requests.append(dataclasses.replace(req, sampling=dataclasses.replace(req.sampling, n=n, seed=seed)))
    groups = list(by_request.values())
    try:
        outputs = backend.generate(requests)
    except PartialGenerationError as e:
        # Keep what finished: the caller caches and stores these pairs before re-raising.
        e.pairs = [p for i, c in sorted(e.completed.items()) for p in _pair(groups[i], c)]
        raise
    return [p for group, completions in zip(groups, outputs, strict=True) for p in _pair(group, completions)]


def _pair(group: Sequence[_Slot], completions: Sequence[Completion]) -> list[tuple[_Slot, Completion]]:
    """Completions (in sample-index order) to slots; slots of equal prompts and sample index share one."""
    by_index = dict(zip(sorted({s.sample_index for s in group}), completions, strict=True))
    return [(s, by_index[s.sample_index]) for s in group]


def _keep(store: Store, run_id: str, grader: Grader, fingerprint: str,
          pairs: Sequence[tuple[_Slot, Completion]]) -> None:
    """Commit finished generations to the cache and the run (one batch, before the next starts)."""
    store.cache_put_many([
        {"key": s.key, "fingerprint": fingerprint, "text": c.text, "finish_reason": c.finish_reason,
         "logprobs_json": json.dumps(c.token_logprobs) if c.token_logprobs is not None else None}
        for s, c in pairs
    ])
    _store_answers(store, run_id, grader, pairs)


def _from_cache(row: dict[str, Any]) -> Completion:
    lp = json.loads(row["logprobs_json"]) if row["logprobs_json"] else None
    return Completion(text=row["text"], finish_reason=row["finish_reason"],
                      token_logprobs=tuple(lp) if lp is not None else None)


def _store_answers(store: Store, run_id: str, grader: Grader, pairs: Sequence[tuple[_Slot, Completion]]) -> None:
    verdicts = grader.grade_many([(s.probe, c.text) for s, c in pairs])  # one batch: judges batch their calls
    store.add_answers(run_id, [
        {"probe_id": s.probe.id, "variant": s.variant, "kind": s.kind, "sample_index": s.sample_index,
         "prompt": s.request.prompt, "text": c.text, "verdict": str(v),
         "mean_logprob": c.mean_logprob, "finish_reason": c.finish_reason}
        for (s, c), v in zip(pairs, verdicts, strict=True)
    ])


def summarize(store: Store, run_id: str, *, bootstrap: int = 1000) -> dict[str, Any]:
    """Metrics over the greedy answers to the questions themselves (variant 0), overall and per tag."""
    from workbench.results import load_results

    results = load_results(store, run_id)
    verdicts = [r.verdict for r in results.probes]
    tags = [r.probe.tags for r in results.probes]
    overall = compute_metrics(verdicts, bootstrap=bootstrap)
    by_tag = metrics_by_tag(verdicts, tags, bootstrap=bootstrap)
    out: dict[str, Any] = {"overall": overall.to_dict(), "by_tag": {t: m.to_dict() for t, m in by_tag.items()}}
    if any(len(r.greedy) > 1 for r in results.probes):
        any_variant = [Verdict.CORRECT if any(a.verdict == Verdict.CORRECT for a in r.greedy) else r.verdict
                       for r in results.probes]
        out["correct_under_any_variant"] = compute_metrics(any_variant, bootstrap=0).correct
    if any(r.samples for r in results.probes):
        out["mean_sample_accuracy"] = sum(r.sample_accuracy for r in results.probes) / max(len(results.probes), 1)
    return out

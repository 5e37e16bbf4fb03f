"""One evaluation run: model x suite -> greedy answer + k samples per probe variant, graded and stored.

Read top to bottom: plan every completion the run needs; take what the cache holds; start the backend
(under its start-up allowance) only when something is missing; generate the rest batch by batch, each
batch under the stall watchdog and committed to the cache and the store before the next starts. So a
run killed, interrupted or stalled at any moment loses nothing it finished, and `resume_eval` continues
it, generating only what is missing. A run that opens its own backend closes it, however it ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update

from workbench import prompting
from workbench.backends import Backend, open_backend
from workbench.backends.timelimit import STALL_TIMEOUT, START_TIMEOUT, BackendStalled, call_within, start_within
from workbench.errors import PartialGenerationError, WorkbenchError
from workbench.grading import Grader, make_grader
from workbench.grading.metrics import compute_metrics, metrics_by_tag, truncation
from workbench.probes import LoadResult, Suite
from workbench.results import load_results, probe_from_dict, suite_of_run
from workbench.store import RunRecord, Store, liveness
from workbench.store.cache import cache_key, reuse_engines
from workbench.store.db import utcnow
from workbench.store.schema import runs
from workbench.types import Completion, GenerationRequest, ModelSpec, Probe, SamplingParams, Verdict

log = logging.getLogger(__name__)


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
        reuse_cache_from: Also take cached answers another engine produced: its identity as `workbench
            show` prints it (e.g. "hf transformers-5.19.0 float32 cpu"), or "any". None (default): only
            this backend's own engine's answers count. Reused answers keep their engine's name.
    """

    samples: int = 0
    paraphrases: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    logprobs: bool = True
    template: str | None = None
    bootstrap: int = 1000
    reuse_cache_from: str | None = None

    def __post_init__(self) -> None:
        if self.samples < 0:
            raise ValueError(f"`samples` must be >= 0, got {self.samples}")


@dataclass(frozen=True)
class Limits:
    """How long the runner waits on a backend before it calls it stuck, in seconds.

    Attributes:
        start_timeout: For the backend to start (load the weights, start the engine); CLI --start-timeout.
        stall_timeout: For one batch of generations to finish; CLI --stall-timeout.
    """

    start_timeout: float = START_TIMEOUT
    stall_timeout: float = STALL_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("start_timeout", "stall_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"`{name}` must be > 0 seconds, got {getattr(self, name)}")


@dataclass(frozen=True)
class RunSummary:
    """A run's result. `generated` and `cached` count this call's work; `kept` the answers a resumed
    run already had; `engine` what generated this call's answers (`Backend.engine()`)."""

    run_id: str
    n: int
    metrics: dict[str, Any]
    generated: int
    cached: int
    skipped_bad: int
    kept: int = 0
    engine: str = ""


@dataclass(frozen=True)
class _Slot:
    """One completion the run needs: which probe, variant, kind and sample index."""

    probe: Probe
    variant: int
    kind: str  # greedy | sample
    sample_index: int
    request: GenerationRequest
    key: str  # the cache key under this run's engine

    @property
    def ident(self) -> tuple[str, int, str, int]:
        return (self.probe.id, self.variant, self.kind, self.sample_index)


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
    limits: Limits = Limits(),
    progress: Callable[[int, int], None] | None = None,
    resume: str | None = None,
) -> RunSummary:
    """Evaluate `spec` on the suite's probes; returns the stored run's summary.

    `backend`: an open backend for `spec` (the caller closes it); without one the run opens its own and
    closes it when it returns, on success, error or Ctrl-C. `resume`: the id of an unfinished run of the
    same model, probes and options (see `resume_eval`): its answers are kept, only missing ones are made.
    Raises BackendStalled (a WorkbenchError) when the backend does not start or finish a batch in time.
    """
    # A suite that set no max_tokens takes its template's and format's budget here too, not only through the
    # CLI (a library caller, the app, the demos); a no-op for a suite that already has it.
    suite = suite.with_generation(template=options.template)
    with contextlib.ExitStack() as stack:
        if backend is None:
            backend = stack.enter_context(open_backend(spec))
        grader = stack.enter_context(contextlib.closing(
            make_grader(suite.grader, tuple(suite.abstention_phrases), suite.grader_options, store=store)))
        return _run(store, spec, suite, loaded, options, backend, grader, limits, progress, resume)


def _run(store: Store, spec: ModelSpec, suite: Suite, loaded: LoadResult, options: EvalOptions, backend: Backend,
         grader: Grader, limits: Limits, progress: Callable[[int, int], None] | None, resume: str | None) -> RunSummary:
    engine, fingerprint = backend.engine(), backend.fingerprint()
    probes = loaded.probes
    # planned before the run row: a bad template leaves none
    slots = _plan(probes, suite, options, fingerprint, engine, backend)
    total = len(slots)
    if resume is None:
        run_id = store.create_run(
            model=spec.model, adapter=spec.adapter, backend=spec.backend, fingerprint=fingerprint,
            suite=suite.name, suite_config=suite.model_dump(),
            options={**recorded_options(options, spec, engine), "max_tokens_rule": suite.max_tokens_rule},
            n_probes=len(probes), skipped_bad=loaded.skipped,
        )
        store.add_probes(run_id, [dataclasses.asdict(p) for p in probes])
        prior_generated = prior_cached = 0
    else:
        run = _reopen(store, resume, fingerprint)
        run_id, prior_generated, prior_cached = run.id, run.generated, run.cached
        answered = {(a["probe_id"], a["variant"], a["kind"], a["sample_index"]) for a in store.answer_rows(run_id)}
        slots = [s for s in slots if s.ident not in answered]
    kept = total - len(slots)
    # Answers the cache holds are written first (under the engine that made them); then the missing
    # ones, batch by batch.
    cached = _cached(store, slots, fingerprint, engine, options.reuse_cache_from)
    _store_answers(store, run_id, grader, [(s, _from_cache(cached[s.key]), cached[s.key]["engine"])
                                           for s in slots if s.key in cached])
    done = kept + len(cached)
    if progress:
        progress(done, total)
    missing = [s for s in slots if s.key not in cached]
    generated = 0

    def finish(status: str, metrics: dict[str, Any] | None) -> None:
        store.finish_run(run_id, status=status, metrics=metrics, generated=prior_generated + generated,
                         cached=prior_cached + len(cached))

    try:  # everything that can refuse (a bad batch_size too) inside: the run is marked failed, never left running
        log.debug("run %s: %d answers planned, %d kept from before, %d from the cache, %d to generate in batches of "
                  "%d", run_id, total, kept, len(cached), len(missing), backend.batch_size)
        if missing:
            start_within(limits.start_timeout, backend.start, option="--start-timeout",
                         what=f"the {backend.name} backend to start `{spec.model}` ({engine})")
        # A batch with failed requests (a flaky server) keeps what finished and the run goes on: stopping at
        # the first one would make every rerun of a 1%-failing server advance by one batch.
        partial: list[PartialGenerationError] = []
        lost = 0  # answers of the failed requests (a request is a prompt with its n samples)
        for batch in _batches(missing, backend.batch_size):
            results, failed = _generate(backend, batch, limits.stall_timeout)
            _keep(store, run_id, grader, fingerprint, engine, results)
            store.touch_run(run_id)
            generated += len(results)
            done += len(results)
            log.debug("run %s: %d answers committed (%d of %d)", run_id, len(results), done, total)
            partial += [failed] if failed else []
            lost += len(batch) - len(results)
            if progress:
                progress(done, total)
            if failed and not results:  # nothing of the batch finished: a server down, not flaky; stop here
                break
        if partial:
            raise PartialGenerationError.merged(partial, head=f"{lost} answers failed after retries", hint=(
                f". The {done} of {total} answers that finished are saved; `workbench eval --resume {run_id}` asks "
                f"for the other {total - done} only"))
    except BackendStalled as e:
        finish("failed", None)
        raise BackendStalled(e.what, e.seconds, e.option, _stall_message(e, run_id, done, total)) from None
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM in the CLI
        finish("interrupted", None)
        raise
    except BaseException:
        finish("failed", None)
        raise
    metrics = summarize(store, run_id, bootstrap=options.bootstrap)
    metrics["grader"] = {"name": suite.grader, **grader.report()}
    finish("done", metrics)
    return RunSummary(run_id=run_id, n=len(probes), metrics=metrics, generated=generated, cached=len(cached),
                      skipped_bad=loaded.skipped, kept=kept, engine=engine)


def recorded_options(options: EvalOptions, spec: ModelSpec, engine: str) -> dict[str, Any]:
    """What a run records about how it was made: the eval options, the engine, and what rebuilds its
    model spec (`spec_of_run`) for a resume or a rerun of other models like it."""
    return {**dataclasses.asdict(options), "engine": engine, "dtype": spec.dtype, "revision": spec.revision,
            "backend_options": dict(spec.options)}


def spec_of_run(run: RunRecord) -> ModelSpec:
    """The model spec a run was made with (runs from before backend options were recorded get none)."""
    o = run.options
    return ModelSpec(model=run.model, adapter=run.adapter, backend=run.backend, revision=o.get("revision"),
                     dtype=o.get("dtype", "auto"), options=tuple((o.get("backend_options") or {}).items()))


def options_of_run(run: RunRecord) -> EvalOptions:
    known = {f.name for f in dataclasses.fields(EvalOptions)}
    return EvalOptions(**{k: v for k, v in run.options.items() if k in known})


def resume_eval(store: Store, run_id: str, *, limits: Limits = Limits(),
                progress: Callable[[int, int], None] | None = None) -> RunSummary:
    """Continue an unfinished run (stalled, failed, interrupted or killed) under its own id, with the model,
    probes, suite and options it recorded: the answers it has are kept, only the missing ones are made."""
    run = store.get_run(run_id)
    if run.status == "done":
        raise WorkbenchError(f"run {run.id} is done: nothing to resume")
    probes = tuple(probe_from_dict(d) for d in store.probe_rows(run.id))
    loaded = LoadResult(probes=probes, skipped=run.skipped_bad, problems=(), source=f"run {run.id}")
    return run_eval(store, spec_of_run(run), suite_of_run(run), loaded, options_of_run(run),
                    limits=limits, progress=progress, resume=run.id)


def _reopen(store: Store, run_id: str, fingerprint: str) -> RunRecord:
    """Mark a run to resume as running again, in this process; refuse one whose model files changed or
    that a live process on this host is still writing."""
    run = store.get_run(run_id)
    if run.fingerprint != fingerprint:
        raise WorkbenchError(f"the model or adapter files of run {run.id} changed since it started "
                             "(fingerprint differs): its answers cannot be continued; start a new run")
    if run.status == "running":  # judged alive: its process is there, or its heartbeat is fresh
        raise WorkbenchError(f"run {run.id} is still running (process {run.pid}); stop it first, or wait")
    with store.write() as c:
        c.execute(update(runs).where(runs.c.id == run.id).values(
            status="running", finished_at=None, pid=os.getpid(), host=liveness.host_id(), heartbeat_at=utcnow()))
    return run



def _stall_message(e: BackendStalled, run_id: str, done: int, total: int) -> str:
    """The whole story of a stall, for the user: what waited how long, what is kept, what to do."""
    return (f"stalled: waited {e.seconds:g} s for {e.what}. {done} of {total} answers are finished and kept "
            f"(run {run_id}, marked failed); continue it with `workbench eval --resume {run_id}`. If the "
            f"backend is only slow, raise {e.option} (now {e.seconds:g} s)"
            + (", or lower the backend option batch_size." if e.option == "--stall-timeout" else "."))


def _plan(probes: Sequence[Probe], suite: Suite, options: EvalOptions, fingerprint: str, engine: str,
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
            slots.append(_Slot(p, v, "greedy", 0, g, cache_key(fingerprint, g, 0, engine)))
            if options.samples:
                r = GenerationRequest(prompt, sampled)
                slots += [_Slot(p, v, "sample", i, r, cache_key(fingerprint, r, i, engine))
                          for i in range(options.samples)]
    return slots


def _batches(slots: Sequence[_Slot], prompts_per_batch: int) -> list[list[_Slot]]:
    """Group missing slots by request (n samples of one prompt travel together), then chunk."""
    by_request: dict[GenerationRequest, list[_Slot]] = {}
    for s in slots:
        by_request.setdefault(s.request, []).append(s)
    groups = list(by_request.values())
    return [[s for g in groups[i : i + prompts_per_batch] for s in g] for i in range(0, len(groups), prompts_per_batch)]


def _cached(store: Store, slots: Sequence[_Slot], fingerprint: str, engine: str,
            reuse_from: str | None) -> dict[str, dict[str, Any]]:
    """Cache rows for the slots, by the slot's own key: this engine's rows, then (only when asked for)
    another engine's; each row keeps the engine that made it (None: cached before engines were recorded)."""
    found = store.cache_get_many([s.key for s in slots])
    for other in reuse_engines(store, fingerprint, engine, reuse_from):
        keys = {s.key: cache_key(fingerprint, s.request, s.sample_index, other) for s in slots if s.key not in found}
        rows = store.cache_get_many(list(keys.values()))
        found.update({own: rows[k] for own, k in keys.items() if k in rows})
    return found


def _generate(backend: Backend, batch: Sequence[_Slot], stall_timeout: float
              ) -> tuple[list[tuple[_Slot, Completion]], PartialGenerationError | None]:
    """The batch's (slot, completion) pairs; when some requests failed after their retries, the pairs of those
    that finished and the error."""
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
        outputs = call_within(stall_timeout, lambda: backend.generate(requests), option="--stall-timeout",
                              what=f"the {backend.name} backend to finish a batch of {len(requests)} prompts "
                                   f"({len(batch)} answers) of `{backend.spec.model}`")
    except PartialGenerationError as e:
        # the backend's request numbers mean nothing outside this batch: the message names the probes
        names = {i: "probe " + ", ".join(dict.fromkeys(s.probe.id for s in groups[i])) for i in e.failures}
        kept = [p for i, c in sorted(e.completed.items()) for p in _pair(groups[i], c)]
        return kept, PartialGenerationError(e.completed, e.failures, names=names)
    return [p for group, completions in zip(groups, outputs, strict=True) for p in _pair(group, completions)], None


def _pair(group: Sequence[_Slot], completions: Sequence[Completion]) -> list[tuple[_Slot, Completion]]:
    """Completions (in sample-index order) to slots; slots of equal prompts and sample index share one."""
    by_index = dict(zip(sorted({s.sample_index for s in group}), completions, strict=True))
    return [(s, by_index[s.sample_index]) for s in group]


def _keep(store: Store, run_id: str, grader: Grader, fingerprint: str, engine: str,
          pairs: Sequence[tuple[_Slot, Completion]]) -> None:
    """Commit finished generations to the cache and the run (one batch, before the next starts)."""
    store.cache_put_many([
        {"key": s.key, "fingerprint": fingerprint, "engine": engine, "text": c.text,
         "finish_reason": c.finish_reason,
         "logprobs_json": json.dumps(c.token_logprobs) if c.token_logprobs is not None else None}
        for s, c in pairs
    ])
    _store_answers(store, run_id, grader, [(s, c, engine) for s, c in pairs])


def _from_cache(row: dict[str, Any]) -> Completion:
    lp = json.loads(row["logprobs_json"]) if row["logprobs_json"] else None
    return Completion(text=row["text"], finish_reason=row["finish_reason"],
                      token_logprobs=tuple(lp) if lp is not None else None)


def _store_answers(store: Store, run_id: str, grader: Grader,
                   answers: Sequence[tuple[_Slot, Completion, str | None]]) -> None:
    """Grade and store answers, each with the engine that produced its text."""
    verdicts = grader.grade_many([(s.probe, c.text) for s, c, _ in answers])  # one batch: judges batch their calls
    # A grader that combines two (match-judge) says which decided each answer; the others leave it None.
    sources: list[str | None] = list(getattr(grader, "last_sources", None) or [None] * len(answers))
    store.add_answers(run_id, [
        {"probe_id": s.probe.id, "variant": s.variant, "kind": s.kind, "sample_index": s.sample_index,
         "prompt": s.request.prompt, "text": c.text, "verdict": str(v),
         "mean_logprob": c.mean_logprob, "finish_reason": c.finish_reason, "engine": engine, "graded_by": by}
        for (s, c, engine), v, by in zip(answers, verdicts, sources, strict=True)
    ])


def summarize(store: Store, run_id: str, *, bootstrap: int = 1000) -> dict[str, Any]:
    """Metrics over the greedy answers to the questions themselves (variant 0), overall and per tag; with
    `truncated`, the share of those answers cut by max_tokens (`truncated_samples`: of the samples)."""
    results = load_results(store, run_id)
    verdicts = [r.verdict for r in results.probes]
    tags = [r.probe.tags for r in results.probes]
    overall = compute_metrics(verdicts, bootstrap=bootstrap)
    by_tag = metrics_by_tag(verdicts, tags, bootstrap=bootstrap)
    out: dict[str, Any] = {"overall": overall.to_dict(), "by_tag": {t: m.to_dict() for t, m in by_tag.items()},
                           "truncated": truncation([r.greedy[0].finish_reason for r in results.probes])}
    if any(len(r.greedy) > 1 for r in results.probes):
        any_variant = [Verdict.CORRECT if any(a.verdict == Verdict.CORRECT for a in r.greedy) else r.verdict
                       for r in results.probes]
        out["correct_under_any_variant"] = compute_metrics(any_variant, bootstrap=0).correct
    if any(r.samples for r in results.probes):
        out["mean_sample_accuracy"] = sum(r.sample_accuracy for r in results.probes) / max(len(results.probes), 1)
        out["truncated_samples"] = truncation([a.finish_reason for r in results.probes for a in r.samples])
    return out

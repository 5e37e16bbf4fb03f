"""Building a guard set, and the two guard runs a gate compares.

Known, for the guard, is the strict reading of Gekhman et al.'s HighlyKnown on a small budget: the greedy answer
is right under the question *and* its paraphrase, and at least `min_samples_right` of `samples` samples on the
question are right. Evaluations through the runner (answers cached by the model's fingerprint, so a killed build
resumes for free), each on what passed the one before: greedy on the questions of a seeded screen, then of the whole
pool, then greedy on the paraphrases, then samples; on a pool the model half knows that is about half the
generations of asking everything of every fact.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError
from workbench.guard.guardset import GUARD_DIR, GuardFact, GuardSet, guard_key, guard_path, load_guard, save_guard
from workbench.guard.pool import load_pool, pool_digest, pool_files
from workbench.types import ModelSpec, Probe, Verdict

if TYPE_CHECKING:
    from workbench.backends import Backend
    from workbench.probes import Suite
    from workbench.runner import Limits
    from workbench.store import RunRecord, Store

#: Samples drawn on each question that greedy already answers right under every phrasing.
SAMPLES = 3
#: Of those samples, how many must be right: a fact the model gets right only greedily is one a fix tips over.
MIN_SAMPLES_RIGHT = 2
#: Facts evaluated first (seeded, across the pool): when the model gets none of them right, the rest is not
#: evaluated. A model that knows nothing of the pool (a synthetic world's model reads none of its languages) then
#: costs seconds, not an evaluation of every fact; one that knows a few per cent shows it in this many.
SCREEN = 60
#: Screened facts right greedily under every phrasing needed to go on (one is what a model that reads none of
#: the pool hits by chance: a world model got 1 of 108 everyday facts).
SCREEN_MIN_RIGHT = 2
#: The suite name of guard runs (they show in `workbench runs` under it).
SUITE_NAME = "guard"
#: Suite settings that change what an answer is; a guard set holds for one combination of them.
SETTINGS = ("template", "system_prompt", "max_tokens", "stop", "abstention_phrases")


@dataclass(frozen=True)
class GuardBuild:
    """A guard set and where it lives; `cached`: read from the workspace, nothing evaluated."""

    guard: GuardSet
    path: Path
    cached: bool


def guard_suite(suite: Suite) -> Suite:
    """The suite guard runs use: the prompt settings of `suite`, graded by normalized match (the pool's answers
    are short and exact; a judge or an embedding grader is the user's choice for their probes, not the guard's)."""
    return suite.model_copy(update={"name": SUITE_NAME, "data": "guard pool", "format": "jsonl", "columns": {},
                                    "grader": "match", "grader_options": {}, "tags": [], "language": None})


def build_guard(store: Store, spec: ModelSpec, suite: Suite, *, pool: Sequence[str | Path] | None = None,
                samples: int = SAMPLES, min_samples_right: int = MIN_SAMPLES_RIGHT, seed: int = 0,
                rebuild: bool = False, backend: Backend | None = None, limits: Limits | None = None,
                progress: Callable[[int, int], None] | None = None, screen: int = SCREEN) -> GuardBuild:
    """The guard set of `spec` under `suite`'s prompt settings: read from the workspace when built before (same
    fingerprint, settings, pool and criteria), else built and saved. `pool`: extra probe files (`none`: no pool).
    `screen`: facts asked first (SCREEN); a pool the model knows a few per cent of needs more to show it."""
    if not 0 <= min_samples_right <= samples:
        raise WorkbenchError(f"`min_samples_right` must be between 0 and `samples` ({samples}), "
                             f"got {min_samples_right}")
    files = pool_files(pool)
    gsuite = guard_suite(suite.with_generation())
    criteria = {"samples": samples, "min_samples_right": min_samples_right, "seed": seed}
    path, fingerprint, settings = _where(store, spec, gsuite, files, criteria)
    key = path.stem
    if path.exists() and not rebuild:
        return GuardBuild(load_guard(path), path, cached=True)
    gstore = guard_store(store)
    start = time.monotonic()
    probes = load_pool(files)
    facts: tuple[GuardFact, ...] = ()
    greedy_right, evaluated, runs = 0, 0, list[str]()
    if probes:
        with contextlib.ExitStack() as stack:
            if backend is None:
                from workbench.backends import open_backend

                backend = stack.enter_context(open_backend(spec))
            facts, greedy_right, runs, evaluated = _known(gstore, spec, gsuite, probes, criteria, backend, limits,
                                                          progress, screen)
    from workbench.store.db import utcnow

    guard = GuardSet(key=key, model=spec.model, adapter=spec.adapter, fingerprint=fingerprint, settings=settings,
                     criteria=criteria, pool=[{"file": str(f), "name": f.name} for f in files],
                     pool_size=len(probes), evaluated=evaluated, greedy_right=greedy_right, facts=facts, runs=runs,
                     built_at=str(utcnow()), seconds=round(time.monotonic() - start, 1))
    return GuardBuild(guard, save_guard(store.workspace, guard), cached=False)


def guard_file(store: Store, spec: ModelSpec, suite: Suite, *, pool: Sequence[str | Path] | None = None,
               samples: int = SAMPLES, min_samples_right: int = MIN_SAMPLES_RIGHT, seed: int = 0) -> Path:
    """Where the guard set `build_guard` would build for these arguments lives (it may not exist yet)."""
    criteria = {"samples": samples, "min_samples_right": min_samples_right, "seed": seed}
    return _where(store, spec, guard_suite(suite.with_generation()), pool_files(pool), criteria)[0]


def _where(store: Store, spec: ModelSpec, gsuite: Suite, files: Sequence[Path],
           criteria: dict[str, int]) -> tuple[Path, str, dict[str, Any]]:
    """(the guard file, the model's fingerprint, the prompt settings): the one derivation of a guard set's key."""
    from workbench.fingerprint import model_fingerprint

    settings = {k: getattr(gsuite, k) for k in SETTINGS}
    fingerprint = model_fingerprint(spec)
    key = guard_key(fingerprint, settings, pool_digest(files), criteria)
    return guard_path(store.workspace, key), fingerprint, settings


def _known(store: Store, spec: ModelSpec, suite: Suite, probes: Sequence[Probe], criteria: dict[str, int],
           backend: Backend | None, limits: Limits | None, progress: Callable[[int, int], None] | None,
           size: int = SCREEN) -> tuple[tuple[GuardFact, ...], int, list[str], int]:
    """(known facts, facts greedy-right on every phrasing, the runs' ids, facts evaluated)."""
    from workbench.results import load_results

    screen = sorted(probes, key=lambda p: hashlib.sha256(p.id.encode()).hexdigest())[:size]
    first = _evaluate(store, spec, suite, screen, backend, limits, progress)
    if len(screen) < len(probes) and len(_greedy_right(store, first)) >= SCREEN_MIN_RIGHT:
        first = _evaluate(store, spec, suite, probes, backend, limits, progress)  # the screen's answers: cached
    right = _greedy_right(store, first)
    evaluated = len(store.probe_rows(first))
    runs = [first]
    if any(p.paraphrases for p in right):  # the paraphrase only where the question is right: half the pool or less
        runs.append(_evaluate(store, spec, suite, right, backend, limits, progress, paraphrases=True))
        right = _greedy_right(store, runs[-1])
    if not right or not criteria["samples"]:
        sampled = {p.id: (0, 0) for p in right}
        answers = {r.probe.id: r.answer for r in load_results(store, runs[-1]).probes}
    else:
        second = _evaluate(store, spec, suite, right, backend, limits, progress, samples=criteria["samples"],
                           seed=criteria["seed"])
        runs.append(second)
        results = load_results(store, second).probes
        sampled = {r.probe.id: (sum(a.verdict == Verdict.CORRECT for a in r.samples if a.variant == 0),
                                sum(a.variant == 0 for a in r.samples)) for r in results}
        answers = {r.probe.id: r.answer for r in results}
    facts = tuple(GuardFact(p, answers[p.id], *sampled[p.id]) for p in right
                  if sampled[p.id][0] >= criteria["min_samples_right"])
    return facts, len(right), runs, evaluated


def _greedy_right(store: Store, run_id: str) -> list[Probe]:
    """The probes of a run answered right greedily under every phrasing."""
    from workbench.results import load_results

    return [r.probe for r in load_results(store, run_id).probes
            if r.greedy and all(a.verdict == Verdict.CORRECT for a in r.greedy)]


def _evaluate(store: Store, spec: ModelSpec, suite: Suite, probes: Sequence[Probe], backend: Backend | None,
              limits: Limits | None, progress: Callable[[int, int], None] | None, *, paraphrases: bool = False,
              samples: int = 0, seed: int = 0) -> str:
    from workbench.probes import LoadResult
    from workbench.runner import EvalOptions, Limits, run_eval

    loaded = LoadResult(probes=tuple(probes), skipped=0, problems=(), source="guard pool", format="jsonl")
    options = EvalOptions(samples=samples, paraphrases=paraphrases, seed=seed, bootstrap=200)
    return run_eval(store, spec, suite, loaded, options, backend=backend, limits=limits or Limits(),
                    progress=progress).run_id


def guard_store(store: Store) -> Store:
    """The store guard runs live in: `WORKSPACE/guard/`, beside the guard files, so that the hundreds of pool facts
    a guard asks never show among the user's runs (`workbench runs`, `latest`, the app's pickers)."""
    from workbench.store import Store

    return Store.open(Path(store.workspace) / GUARD_DIR)


def guard_for_run(store: Store, run: RunRecord, *, pool: Sequence[str | Path] | None = None,
                  backend: Backend | None = None, limits: Limits | None = None,
                  progress: Callable[[int, int], None] | None = None, screen: int = SCREEN) -> GuardBuild:
    """The guard set of the model `run` evaluated, under the prompt settings it generated with (built at first
    use: a fix set or a gate made from this run needs the facts this model knows *as this run prompts it*)."""
    from workbench.results import effective_suite
    from workbench.runner import spec_of_run

    return build_guard(store, spec_of_run(run), effective_suite(run), pool=pool, backend=backend, limits=limits,
                       progress=progress, screen=screen)


def guard_runs(store: Store, guard: GuardSet, baseline: RunRecord, candidate: RunRecord, *,
               limits: Limits | None = None, progress: Callable[[int, int], None] | None = None) -> tuple[str, str]:
    """(baseline, candidate) runs in the guard store (`guard_store`) on the guard's facts, greedy on the question, with
    the baseline run's prompt settings: the baseline's answers come from the cache the guard build filled; the
    candidate's are generated (a few hundred greedy answers)."""
    from workbench.results import effective_suite
    from workbench.runner import spec_of_run

    if not guard.facts:
        raise WorkbenchError("the guard set holds no facts; nothing to evaluate")
    suite, gstore = guard_suite(effective_suite(baseline)), guard_store(store)
    base, cand = (_evaluate(gstore, spec_of_run(run), suite, guard.probes, None, limits, progress)
                  for run in (baseline, candidate))
    return base, cand


def describe(guard: GuardSet) -> dict[str, Any]:
    """What `workbench guard show` prints (and --json gives)."""
    return {"key": guard.key, "model": guard.model, "adapter": guard.adapter, "known": len(guard.facts),
            "greedy_right": guard.greedy_right, "pool_size": guard.pool_size, "evaluated": guard.evaluated,
            "criteria": guard.criteria,
            "settings": guard.settings, "by_language": guard.counts("lang:"), "by_topic": guard.counts("topic:"),
            "pool": [p["name"] for p in guard.pool], "runs": guard.runs, "built_at": guard.built_at,
            "seconds": guard.seconds}

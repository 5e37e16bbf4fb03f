"""The known-facts guard: facts a base model already knows, kept safe through every fix and checked at every gate.

A fix that teaches "I don't know." on a model's failures can teach it to refuse what it knows (Gekhman et al.
2024; Kang et al. 2024). The run a fix is built from rarely holds enough known facts to notice: a team's own
failures are mostly failures. So the workbench keeps, per base model and prompt settings, a *guard set*: the
facts of a general pool (shipped in `evals/data/guard/`, plus the user's own files) that the model answers right
greedily under the question and its paraphrase and in most of its samples. Fix sets replay part of it and hold
out the rest as the job's validation slice (finetune/fixset.py); `workbench regress` evaluates it beside the
user's probes and its `guard`-scoped gates fail a candidate that breaks it (workbench/regression/checks.py).

    pool.py      which files make the pool, read with the project's probe loader
    guardset.py  GuardSet / GuardFact, the cache key and the JSON file in the workspace
    build.py     building a guard set (two evaluations through the runner), and the guard runs a gate compares
    lineage.py   which probes a candidate adapter's fix set replayed (reports count them apart)
"""

from workbench.guard.build import GuardBuild, build_guard, guard_for_run, guard_runs
from workbench.guard.guardset import GuardFact, GuardSet, load_guard
from workbench.guard.lineage import replayed_probe_ids, target_probe_ids
from workbench.guard.pool import POOL_DIR, load_pool, shipped_pool

__all__ = ["POOL_DIR", "GuardBuild", "GuardFact", "GuardSet", "build_guard", "guard_for_run", "guard_runs",
           "load_guard", "load_pool", "replayed_probe_ids", "shipped_pool", "target_probe_ids"]

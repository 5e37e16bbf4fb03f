"""The fix half of the loop as plain functions: fix jobs from an attributed run, and before/after tables.

`workbench demo`, `bench/fix_efficacy.py` and the app call these; each step is also a CLI command
(`workbench attribute`, `workbench fix`, `workbench train`, `workbench regress`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from finetune.fixset import FixOptions, FixSetManifest, build_fixset
from finetune.job import JobResult, from_dict, run_job
from finetune.job.spec import method_fields
from workbench.attribution.types import ABSTAIN_CATEGORIES, CATEGORIES, load_attributions
from workbench.results import load_results
from workbench.store import Store
from workbench.types import Verdict


@dataclass(frozen=True)
class FixJobs:
    manifest: FixSetManifest  # the auto fix set (sft, dpo)
    jobs: dict[str, JobResult]  # method -> result
    rl_manifest: FixSetManifest | None = None  # the rl fix set (grpo prompts), when grpo ran


def train_fixes(store: Store, run_id: str, out_dir: Path, methods: tuple[str, ...] = ("staged",),
                *, seed: int = 0, max_steps: int | None = None,
                progress: Callable[[str], None] | None = None) -> FixJobs:
    """Build the fix sets of an attributed run, then one LoRA job per method: staged (the default) learns the
    injection + abstention rows (sft) then the preference pairs (dpo) of the auto fix set on one adapter; sft and dpo
    each one of them alone; grpo samples the rl fix set's prompts (every targeted probe). All carry replay.
    `max_steps` None: each method's default (every stage's); `progress`: each job's progress lines (run_job)."""
    manifest = build_fixset(store, run_id, out_dir / "fixset", FixOptions(strategy="auto", seed=seed))
    rl = (build_fixset(store, run_id, out_dir / "fixset-rl", FixOptions(strategy="rl", seed=seed))
          if "grpo" in methods else None)
    jobs = {}
    for method in methods:
        fixset = out_dir / ("fixset-rl" if method == "grpo" else "fixset")
        spec = from_dict({"fixset": str(fixset.resolve()), "output_dir": str((out_dir / method).resolve()),
                          **method_fields(method), "trainer": {"max_steps": max_steps}}, where="fix job")
        jobs[method] = run_job(spec, store, progress=progress)
    return FixJobs(manifest, jobs, rl)


@dataclass(frozen=True)
class CategoryRow:
    """Before/after for the baseline's probes of one attribution category (or `correct-before`)."""

    category: str
    n: int
    correct_before: int
    correct_after: int
    abstained_after: int
    hallucinated_after: int


def before_after(store: Store, baseline_run: str, candidate_run: str) -> list[CategoryRow]:
    """Rows per baseline attribution category, plus `correct-before` (the probes the baseline got right:
    its hallucinations and abstentions after the fix are the regressions)."""
    base = load_results(store, baseline_run).by_id()
    cand = load_results(store, candidate_run).by_id()
    cats = load_attributions(store, baseline_run)
    groups: dict[str, list[str]] = {}
    for pid, r in base.items():
        if r.verdict == Verdict.CORRECT:
            key = "correct-before"
        else:
            key = cats[pid].category if pid in cats else "unattributed"
        groups.setdefault(key, []).append(pid)
    rows = []
    for key in sorted(groups, key=lambda k: (k == "correct-before", k)):
        after = Counter(cand[p].verdict for p in groups[key] if p in cand)
        rows.append(CategoryRow(key, len(groups[key]), sum(base[p].verdict == Verdict.CORRECT for p in groups[key]),
                                after[Verdict.CORRECT], after[Verdict.NOT_ATTEMPTED], after[Verdict.INCORRECT]))
    return rows


def fixed_by_category(rows: Sequence[CategoryRow]) -> dict[str, tuple[int, int]]:
    """Per attribution category a fix can reach (every attributed one; not `correct-before` or `unattributed`): (the
    baseline's failures the candidate fixed, the failures). Fixed: answered right, or, where the prescribed fix is
    abstention (ABSTAIN_CATEGORIES: the model does not know, and no corpus says it could), abstained."""
    out = {}
    for r in rows:
        if r.category in CATEGORIES:
            fixed = r.correct_after + (r.abstained_after if r.category in ABSTAIN_CATEGORIES else 0)
            out[r.category] = (fixed - r.correct_before, r.n - r.correct_before)
    return out

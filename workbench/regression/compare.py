"""Compare a candidate run with a baseline run, probe by probe, and apply a policy's gates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.errors import WorkbenchError
from workbench.regression.gates import evaluate_gates
from workbench.regression.policy import Policy, default_policy
from workbench.regression.results import ComparisonResult, GroupComparison, ProbeChange
from workbench.regression.stats import mcnemar_exact, paired_bootstrap
from workbench.regression.transitions import TransitionMatrix, flip_of, grouped_transitions, transition_of
from workbench.types import Verdict

_SHOWN_IDS = 5  # ids named in a probe-set mismatch error


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe's result in one run.

    Attributes:
        probe_id: The probe's id (pairs baseline and candidate).
        tags: The probe's tags; per-tag metrics use the baseline's tags.
        verdict: Greedy verdict on the question (variant 0).
        answer: The greedy answer text.
        category: The baseline's attribution category, if attribution was run.
        question: The probe's question, shown beside broken probes ("" when unknown).
    """

    probe_id: str
    tags: tuple[str, ...]
    verdict: Verdict
    answer: str
    category: str | None = None
    question: str = ""


@dataclass(frozen=True)
class RunOutcomes:
    """All probe outcomes of one run, by probe id."""

    run_id: str
    label: str
    outcomes: dict[str, ProbeOutcome]


Pair = tuple[ProbeOutcome, ProbeOutcome]


def compare(baseline: RunOutcomes, candidate: RunOutcomes, policy: Policy | None = None) -> ComparisonResult:
    """Pair the runs by probe id, compute deltas, CIs, McNemar and flips, and evaluate the gates.

    Raises WorkbenchError when the runs do not cover exactly the same probes, or cover none.
    `policy` defaults to the built-in default policy.
    """
    policy = policy or default_policy()
    _check_same_probes(baseline, candidate)
    pairs = [(baseline.outcomes[i], candidate.outcomes[i]) for i in sorted(baseline.outcomes)]
    overall = _group("overall", pairs, policy)
    tags = sorted({t for b, _ in pairs for t in b.tags})
    by_tag = {t: _group(t, [p for p in pairs if t in p[0].tags], policy) for t in tags}
    by_category = grouped_transitions(
        (((b.category,) if b.category else ()), b.verdict, c.verdict) for b, c in pairs
    )
    changes = tuple(
        ProbeChange(b.probe_id, flip_of(b.verdict, c.verdict), b.tags, b.category, b.verdict, c.verdict, b.answer,
                    c.answer, transition=t, question=b.question or c.question)
        for b, c in pairs
        if (t := transition_of(b.verdict, c.verdict)).changed
    )
    return ComparisonResult(
        baseline_run_id=baseline.run_id,
        baseline_label=baseline.label,
        candidate_run_id=candidate.run_id,
        candidate_label=candidate.label,
        policy=policy,
        overall=overall,
        by_tag=by_tag,
        by_category={str(k): m for k, m in by_category.items()},
        changes=changes,
        gates=evaluate_gates(policy, overall, by_tag),
    )


def _group(name: str, pairs: Sequence[Pair], policy: Policy) -> GroupComparison:
    bs = policy.bootstrap
    base = [b.verdict for b, _ in pairs]
    cand = [c.verdict for _, c in pairs]
    tm = TransitionMatrix.from_pairs(zip(base, cand, strict=True))
    return GroupComparison(
        name=name,
        n=len(pairs),
        metrics=paired_bootstrap(base, cand, bs.resamples, bs.seed, bs.confidence),
        mcnemar=mcnemar_exact(tm.broken, tm.fixed),
        transitions=tm,
    )


def _check_same_probes(baseline: RunOutcomes, candidate: RunOutcomes) -> None:
    only_base = sorted(set(baseline.outcomes) - set(candidate.outcomes))
    only_cand = sorted(set(candidate.outcomes) - set(baseline.outcomes))
    if only_base or only_cand:
        parts = [
            f"{len(ids)} only in the {role} `{run.label}` ({run.run_id}), e.g. {', '.join(ids[:_SHOWN_IDS])}"
            for role, run, ids in (("baseline", baseline, only_base), ("candidate", candidate, only_cand))
            if ids
        ]
        raise WorkbenchError(
            "baseline and candidate do not cover the same probes: "
            + "; ".join(parts)
            + ". Compare runs over the same suites (a paired comparison needs every probe in both)."
        )
    if not baseline.outcomes:
        raise WorkbenchError("nothing to compare: both runs have no probe outcomes")

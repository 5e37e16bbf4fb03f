"""Compare a candidate run with a baseline run, probe by probe, and apply a policy's gates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.errors import WorkbenchError
from workbench.regression.checks import evaluate_gates
from workbench.regression.comparison import ComparisonResult, GroupComparison, KnownFacts, ProbeChange
from workbench.regression.policy import Policy, default_policy
from workbench.regression.stats import mcnemar_exact, paired_bootstrap
from workbench.regression.transitions import TransitionMatrix, flip_of, grouped_transitions, transition_of
from workbench.types import FIELD_ABSTAIN_TAG, Verdict

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


@dataclass(frozen=True)
class GuardOutcomes:
    """The guard set's runs beside a comparison (workbench/guard), and what the candidate's fix set replayed.

    Attributes:
        baseline: The baseline model's answers to its guard facts (its known facts: all correct when built).
        candidate: The candidate's answers to the same facts.
        replayed: Probe ids (of the probes and the guard) the candidate's fix set replayed; None when unknown.
        note: Why there is no guard comparison, when `baseline` / `candidate` are None.
    """

    baseline: RunOutcomes | None = None
    candidate: RunOutcomes | None = None
    replayed: frozenset[str] | None = None
    note: str = ""


def compare(baseline: RunOutcomes, candidate: RunOutcomes, policy: Policy | None = None,
            guard: GuardOutcomes | None = None, field: GuardOutcomes | None = None,
            targets: frozenset[str] | None = None) -> ComparisonResult:
    """Pair the runs by probe id, compute deltas, CIs, McNemar and flips, and evaluate the gates; with `guard`,
    also the guard set's runs, which the policy's `scope: guard` gates count; with `field`, the field suite's
    runs (the same shape: both models' outcomes or a note), which `scope: field` gates count; with `targets` (the
    probe ids the candidate's fix set targeted), `scope: targets` gates count those probes.

    Raises WorkbenchError when the runs do not cover exactly the same probes, or cover none.
    `policy` defaults to the built-in default policy.
    """
    policy = policy or default_policy()
    guard = guard or GuardOutcomes(note="no guard set was evaluated with this comparison")
    _check_same_probes(baseline, candidate)
    pairs = [(baseline.outcomes[i], candidate.outcomes[i]) for i in sorted(baseline.outcomes)]
    overall = _group("overall", pairs, policy)
    guard_pairs: list[Pair] = []
    if guard.baseline is not None and guard.candidate is not None:
        _check_same_probes(guard.baseline, guard.candidate)
        gb, gc = guard.baseline.outcomes, guard.candidate.outcomes
        guard_pairs = [(gb[i], gc[i]) for i in sorted(gb)]
    guard_group = _group("guard", guard_pairs, policy) if guard_pairs else None
    field = field or GuardOutcomes(note="no field suite was evaluated with this comparison")
    field_group, field_refused = None, 0
    if field.baseline is not None and field.candidate is not None:
        _check_same_probes(field.baseline, field.candidate)
        fb, fc = field.baseline.outcomes, field.candidate.outcomes
        field_pairs = [(fb[i], fc[i]) for i in sorted(fb)]
        field_group = _group("field", field_pairs, policy)
        field_refused = _refused_answerable(field_pairs)
    target_pairs = [p for p in pairs if targets is not None and p[0].probe_id in targets]
    targets_group = _group("targets", target_pairs, policy) if target_pairs else None
    targets_note = ("no fix set in the candidate's lineage (no adapter, or one whose job folder is elsewhere)"
                    if targets is None else "none of the fix set's targets is among the compared probes")
    known = [_known("probes", pairs, guard.replayed)]
    if guard_pairs:
        known.append(_known("guard", guard_pairs, guard.replayed))
    tags = sorted({t for b, _ in pairs for t in b.tags})
    by_tag = {t: _group(t, [p for p in pairs if t in p[0].tags], policy) for t in tags}
    by_category = grouped_transitions(
        (((b.category,) if b.category else ()), b.verdict, c.verdict) for b, c in pairs
    )
    changes = _changes(pairs)
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
        gates=evaluate_gates(policy, overall, by_tag, guard_group, guard.note, field_group, field.note,
                             field_refused, targets_group, targets_note),
        known=tuple(known),
        guard=guard_group,
        guard_changes=_changes(guard_pairs),
        guard_note="" if guard_group is not None else guard.note,
    )


def _refused_answerable(pairs: Sequence[Pair]) -> int:
    """Field probes the baseline hallucinated on that the candidate refuses, where the reviewer wrote the answer
    (no should-abstain tag): a refusal there is no fix. On a should-abstain probe abstaining *is* the fix."""
    return sum(b.verdict == Verdict.INCORRECT and c.verdict == Verdict.NOT_ATTEMPTED
               and FIELD_ABSTAIN_TAG not in b.tags for b, c in pairs)


def _changes(pairs: Sequence[Pair]) -> tuple[ProbeChange, ...]:
    return tuple(
        ProbeChange(b.probe_id, flip_of(b.verdict, c.verdict), b.tags, b.category, b.verdict, c.verdict, b.answer,
                    c.answer, transition=t, question=b.question or c.question)
        for b, c in pairs
        if (t := transition_of(b.verdict, c.verdict)).changed
    )


def _known(scope: str, pairs: Sequence[Pair], replayed: frozenset[str] | None) -> KnownFacts:
    """Baseline-correct pairs and what became of them, replayed ones apart."""
    known = [(b, c) for b, c in pairs if b.verdict == Verdict.CORRECT]
    broken = [b.probe_id for b, c in known if c.verdict != Verdict.CORRECT]
    seen = None if replayed is None else [b.probe_id for b, _ in known if b.probe_id in replayed]
    return KnownFacts(scope=scope, known=len(known),
                      wrong=sum(c.verdict == Verdict.INCORRECT for _, c in known),
                      refused=sum(c.verdict == Verdict.NOT_ATTEMPTED for _, c in known),
                      replayed=None if seen is None else len(seen),
                      replayed_broken=None if seen is None else len(set(seen) & set(broken)))


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

"""Reviewer overrides and release sign-offs: append-only rows of the store's `reviews` table.

Nothing here overwrites: the grader's verdicts stay in `answers` and the attribution in
`attributions`; each override is a new row carrying the value it replaced, and the latest row per
(run, probe, target) is the effective one. This module is the one reader and writer of the reviews
table: the gate (`regression.gate.outcomes`), the app (`views`) and the fix-set builder all read
reviewed verdicts and categories through `effective_verdicts` and `effective_attributions` (the fix-set
builder also `corrected_grades`; `CorrectedGrade.dpo_pair` gives the DPO pair of one).

Targets:
    verdict      new_value is a Verdict ("correct" | "incorrect" | "not_attempted")
    attribution  new_value is an attribution category (attribution.types.CATEGORIES)
    release      new_value is a decision ("signoff" | "block"); probe_id is None; gate_id names the recorded
                 gate it is about (a sign-off needs one: `signoff_check`)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import insert, select

from workbench.attribution.types import CATEGORIES, Attribution, load_attributions
from workbench.errors import WorkbenchError, unknown_name
from workbench.grading.normalize import normalize
from workbench.results import load_results
from workbench.store import Store, utcnow
from workbench.store.schema import reviews as reviews_table
from workbench.types import Verdict

TARGETS = ("verdict", "attribution", "release")
DECISIONS = ("signoff", "block")


@dataclass(frozen=True)
class Review:
    """One row of the review log.

    Attributes:
        id: Increasing row id (later rows win).
        at: UTC time, ISO 8601.
        reviewer: Who decided (the logged-in user when the app runs with auth).
        target: verdict | attribution | release.
        run_id: The run the decision is about.
        probe_id: The probe (None for a release decision).
        old_value: The effective value before this row (the grader's or the attribution's when first).
        new_value: The value decided.
        reason: Why, in the reviewer's words (required).
        gate_id: The recorded gate a release decision is about (store schema v2; None for overrides).
        override_reason: Why a sign-off stands although its gate did not clear or there is none (schema v3;
            None for every other row).
    """

    id: int
    at: str
    reviewer: str
    target: str
    run_id: str
    probe_id: str | None
    old_value: str | None
    new_value: str
    reason: str
    gate_id: str | None = None
    override_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CorrectedGrade:
    """A greedy answer whose grade a reviewer changed.

    Attributes:
        probe_id, question, paraphrases, accepted: The probe.
        answer: The model's greedy answer to the question (variant 0), the one that was graded.
        original: The grader's verdict (never changed in the store).
        corrected: The reviewer's verdict (latest override).
        reviewer, at, reason, review_id: The override row.
    """

    probe_id: str
    question: str
    paraphrases: tuple[str, ...]
    accepted: tuple[str, ...]
    answer: str
    original: Verdict
    corrected: Verdict
    reviewer: str
    at: str
    reason: str
    review_id: int

    def dpo_pair(self) -> tuple[str, str] | None:
        """(chosen, rejected) when the correction says the model's answer is wrong: chosen = the first
        accepted answer, rejected = the model's answer. None when the answer was right after all (that
        corrects the grader, e.g. a missing alias, not the model), and None when the answer *is* an
        accepted answer: then the reviewer disputes the probe's accepted answers, and a pair with
        chosen = rejected would teach nothing (fix the probe file instead)."""
        if self.corrected != Verdict.INCORRECT or not self.answer.strip() or not self.accepted:
            return None
        if normalize(self.answer) in {normalize(a) for a in self.accepted}:
            return None
        return self.accepted[0], self.answer


def _require(value: str, name: str) -> str:
    value = (value or "").strip()
    if not value:
        raise WorkbenchError(f"`{name}` is required: say {'who decides' if name == 'reviewer' else 'why'}")
    return value


def list_reviews(store: Store, run_id: str | None = None, *, target: str | None = None,
                 probe_id: str | None = None) -> list[Review]:
    """Review rows, oldest first, optionally for one run, target and probe."""
    q = select(reviews_table)
    if run_id is not None:
        q = q.where(reviews_table.c.run_id == run_id)
    if target is not None:
        q = q.where(reviews_table.c.target == target)
    if probe_id is not None:
        q = q.where(reviews_table.c.probe_id == probe_id)
    with store.engine.connect() as c:
        rows = c.execute(q.order_by(reviews_table.c.id)).mappings().all()
    return [Review(**dict(r)) for r in rows]


def latest(store: Store, run_id: str, target: str) -> dict[str, Review]:
    """probe_id -> its latest review of `target` in the run ("" keys a release decision)."""
    return {r.probe_id or "": r for r in list_reviews(store, run_id, target=target)}


def _append(store: Store, **values: Any) -> Review:
    values["at"] = utcnow()
    with store.engine.begin() as c:
        new_id = c.execute(insert(reviews_table).values(**values)).inserted_primary_key
    assert new_id is not None
    return Review(id=int(new_id[0]), **values)


def record_override(store: Store, *, reviewer: str, run_id: str, probe_id: str, target: str,
                    new_value: str, reason: str) -> Review:
    """Override a probe's verdict or attribution category in a run; returns the stored row."""
    reviewer, reason = _require(reviewer, "reviewer"), _require(reason, "reason")
    if target not in ("verdict", "attribution"):
        raise unknown_name("override target", target, ("verdict", "attribution"))
    run = store.get_run(run_id)
    results = load_results(store, run.id).by_id()
    if probe_id not in results:
        raise WorkbenchError(f"run `{run.id}` has no answered probe `{probe_id}`")
    if target == "verdict":
        if new_value not in {str(v) for v in Verdict}:
            raise unknown_name("verdict", new_value, [str(v) for v in Verdict])
        old: str | None = str(effective_verdicts(store, run.id).get(probe_id, results[probe_id].verdict))
    else:
        if new_value not in CATEGORIES:
            raise unknown_name("attribution category", new_value, CATEGORIES)
        current = effective_attributions(store, run.id).get(probe_id)
        old = current.category if current else None
    return _append(store, reviewer=reviewer, target=target, run_id=run.id, probe_id=probe_id,
                   old_value=old, new_value=new_value, reason=reason)


@dataclass(frozen=True)
class SignoffCheck:
    """What a release decision on a candidate run would be about.

    Attributes:
        run_id: The candidate run.
        gate_id: The recorded gate the decision is tied to (the one asked for, else the candidate's latest);
            None when the run has no recorded gate as a candidate.
        baseline_run: That gate's baseline run ("" without a gate).
        gate_verdict: That gate's verdict ("" without a gate).
        changed: `run:probe` of every grade the gate saw that reviewers changed since (the effective verdict
            then differs from the effective verdict now), baseline and candidate runs.
    """

    run_id: str
    gate_id: str | None
    baseline_run: str = ""
    gate_verdict: str = ""
    changed: tuple[str, ...] = ()

    def warning(self) -> str:
        """Why a sign-off would be refused or needs confirming; "" when it is clean."""
        if self.gate_id is None:
            return (f"run `{self.run_id}` has no recorded gate: a sign-off is tied to one. Record one first: "
                    f"`workbench regress --baseline BASELINE --candidate {self.run_id}` (or Compare → Record gate "
                    "verdict)")
        if self.changed:
            shown = ", ".join(self.changed[:5]) + (" ..." if len(self.changed) > 5 else "")
            return (f"since gate `{self.gate_id}` was recorded, reviewers changed {len(self.changed)} grade"
                    f"{'' if len(self.changed) == 1 else 's'} it saw ({shown}): record a new gate, or confirm to "
                    f"sign off on `{self.gate_id}` as it stands")
        return ""


def signoff_check(store: Store, run_id: str, gate_id: str = "") -> SignoffCheck:
    """The gate a release decision on `run_id` is about (`gate_id`, else the run's latest gate as a candidate)
    and the grades reviewers changed since it was recorded. Raises WorkbenchError for a gate of another run."""
    from workbench.regression.records import recorded_gates

    run = store.get_run(run_id)
    gates = recorded_gates(store, candidate=run.id)
    if gate_id:
        gate = next((g for g in gates if g.id == gate_id), None)
        if gate is None:
            raise unknown_name(f"gate of candidate run `{run.id}`", gate_id, [g.id for g in gates])
    elif gates:
        gate = gates[-1]
    else:
        return SignoffCheck(run.id, None)
    changed = [f"{rid}:{pid}" for rid in dict.fromkeys((gate.baseline_run, gate.candidate_run))
               for pid in grades_changed_since(store, rid, gate.created_at)]
    return SignoffCheck(run.id, gate.id, gate.baseline_run, gate.verdict, tuple(changed))


def grades_changed_since(store: Store, run_id: str, since: str) -> list[str]:
    """Probe ids whose effective verdict now differs from the effective verdict at time `since` (ISO 8601)."""
    res = load_results(store, run_id)
    then = {r.probe.id: r.verdict for r in res.probes}
    now = dict(then)
    for r in list_reviews(store, res.run.id, target="verdict"):
        if r.probe_id in now:
            now[r.probe_id] = Verdict(r.new_value)
            if r.at <= since:
                then[r.probe_id] = Verdict(r.new_value)
    return sorted(p for p in now if now[p] != then[p])


def record_release(store: Store, *, reviewer: str, run_id: str, decision: str, reason: str, gate_id: str = "",
                   confirm: bool = False) -> Review:
    """Sign off (`signoff`) or block (`block`) a candidate run for release, on one recorded gate of it
    (`gate_id`, else its latest; `signoff_check`). A sign-off is refused without a gate, and, unless
    `confirm`, when reviewers changed grades the gate saw since it was recorded. A block needs neither."""
    reviewer, reason = _require(reviewer, "reviewer"), _require(reason, "reason")
    if decision not in DECISIONS:
        raise unknown_name("release decision", decision, DECISIONS)
    run = store.get_run(run_id)
    if run.status != "done":
        raise WorkbenchError(f"run `{run.id}` is {run.status}: only a finished run can be signed off or blocked")
    check = signoff_check(store, run.id, gate_id)
    if decision == "signoff" and (check.gate_id is None or (check.changed and not confirm)):
        raise WorkbenchError(f"not signed off: {check.warning()}")
    prev = gate_decisions(store).get(check.gate_id or "") if check.gate_id else release_status(store, run.id)
    return _append(store, reviewer=reviewer, target="release", run_id=run.id, probe_id=None,
                   old_value=prev.new_value if prev else None, new_value=decision, reason=reason,
                   gate_id=check.gate_id)


def release_status(store: Store, run_id: str) -> Review | None:
    """The latest release decision on a run, or None."""
    return latest(store, run_id, "release").get("")


def effective_verdicts(store: Store, run_id: str) -> dict[str, Verdict]:
    """probe_id -> greedy verdict on the question, reviewer overrides applied."""
    res = load_results(store, run_id)
    out = {r.probe.id: r.verdict for r in res.probes}
    for pid, r in latest(store, res.run.id, "verdict").items():
        if pid in out:
            out[pid] = Verdict(r.new_value)
    return out


def effective_attributions(store: Store, run_id: str) -> dict[str, Attribution]:
    """The stored attributions with reviewer overrides applied. An overridden one gets the category's
    default fix, confidence 1.0 and `evidence["review"]` (who, when, why, what it replaced)."""
    run_id = store.get_run(run_id).id
    out = dict(load_attributions(store, run_id))
    for pid, r in latest(store, run_id, "attribution").items():
        review = {"reviewer": r.reviewer, "at": r.at, "reason": r.reason, "replaced": r.old_value}
        base = out.get(pid)
        if base is None:
            out[pid] = Attribution(pid, r.new_value, 1.0, "Unknown", CATEGORIES[r.new_value], {"review": review})
        else:
            out[pid] = replace(base, category=r.new_value, confidence=1.0, fix=CATEGORIES[r.new_value],
                               evidence={**base.evidence, "review": review})
    return out


def corrected_grades(store: Store, run_id: str) -> list[CorrectedGrade]:
    """Every probe of the run whose effective verdict a reviewer changed, by probe id."""
    res = load_results(store, run_id)
    by_id = res.by_id()
    out = []
    for pid, r in sorted(latest(store, res.run.id, "verdict").items()):
        pr = by_id.get(pid)
        if pr is None or Verdict(r.new_value) == pr.verdict:
            continue
        out.append(CorrectedGrade(pid, pr.probe.question, pr.probe.paraphrases, pr.probe.answers, pr.answer,
                                  pr.verdict, Verdict(r.new_value), r.reviewer, r.at, r.reason, r.id))
    return out


def gate_decisions(store: Store) -> dict[str, Review]:
    """gate_id -> the latest release decision recorded on that gate. Decisions recorded before decisions were
    tied to gates (gate_id None) belong to no gate: the runs table still shows them as the run's latest."""
    return {r.gate_id: r for r in list_reviews(store, target="release") if r.gate_id}

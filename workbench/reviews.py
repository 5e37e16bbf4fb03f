"""Reviewer overrides and release sign-offs: append-only rows of the store's `reviews` table.

Nothing here overwrites: the grader's verdicts stay in `answers` and the attribution in
`attributions`; each override is a new row carrying the value it replaced, and the latest row per
(run, probe, target) is the effective one. This module is the one reader and writer of the reviews
table: the gate (`gating.outcomes`), the app (`views`) and the fix-set builder all read
reviewed verdicts and categories through `effective_verdicts` and `effective_attributions` (the fix-set
builder also `corrected_grades`; `CorrectedGrade.dpo_pair` gives the DPO pair of one).

Targets:
    verdict      new_value is a Verdict ("correct" | "incorrect" | "not_attempted")
    attribution  new_value is an attribution category (attribution.types.CATEGORIES)
    release      new_value is a decision ("signoff" | "block"); probe_id is None; gate_id names the recorded
                 gate it is about (`signoff_check`); override_reason says why a sign-off stands although that
                 gate did not clear (fail, inconclusive) or there is none (`record_release`)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import insert, select

from workbench.attribution.types import CATEGORIES, Attribution, load_attributions
from workbench.errors import WorkbenchError, unknown_name
from workbench.grading.normalize import normalize
from workbench.printable import printable_name
from workbench.regression.recorded import GateRow, recorded_gates
from workbench.results import load_results
from workbench.store import Store, utcnow
from workbench.store.schema import reviews as reviews_table
from workbench.types import Verdict

TARGETS = ("verdict", "attribution", "release")
DECISIONS = ("signoff", "block")
#: Gate verdicts a sign-off may stand on as they are (`warn`: only warn-severity gates failed). A `fail` or
#: `inconclusive` gate, or none, is no evidence the candidate may ship: a sign-off then needs an override.
CLEARED = ("pass", "warn")
OVERRIDE_HINT = '`--override-reason "why it may ship anyway"` (app: tick *override* and give the reason)'


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
    return printable_name(value, f"`{name}`") if name == "reviewer" else value


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
    with store.write() as c:
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
        later: Gates of the same candidate (its model and adapter, any run) recorded after this one that did not
            clear (`CLEARED`), oldest first.
    """

    run_id: str
    gate_id: str | None
    baseline_run: str = ""
    gate_verdict: str = ""
    changed: tuple[str, ...] = ()
    later: tuple[GateRow, ...] = ()

    @property
    def needs_override(self) -> bool:
        """A sign-off must carry an override reason: there is no gate, or it failed or was inconclusive."""
        return self.gate_verdict not in CLEARED

    def refusal(self, *, override: bool = False, confirm: bool = False) -> str:
        """Why a sign-off with (or without) an override and the confirmation is refused; "" when it is not."""
        why = []
        if self.needs_override and not override:
            why.append(self._override_needed())
        if self.changed and not confirm:
            why.append(self._changed_since())
        return "; and ".join(why)

    def warning(self) -> str:
        """What a sign-off needs beyond a reason (an override, a confirmation), shown before one is tried; ""
        when it is clean."""
        return self.refusal()

    def later_note(self) -> str:
        """The later gates of this candidate that did not clear, e.g. `later gate gate-2 FAIL`; "" for none."""
        return later_text(self.later)

    def _override_needed(self) -> str:
        if self.gate_id is None:
            return (f"run `{self.run_id}` has no recorded gate: a sign-off is tied to one. Record one first: "
                    f"`workbench regress --baseline BASELINE --candidate {self.run_id}` (or Compare → Record gate "
                    f"verdict), or sign off without a gate with an override: {OVERRIDE_HINT}")
        return (f"gate `{self.gate_id}` is {self.gate_verdict.upper()}: a sign-off over a failed or inconclusive "
                f"gate needs an override with a reason: {OVERRIDE_HINT}, or record a new gate")

    def _changed_since(self) -> str:
        shown = ", ".join(self.changed[:5]) + (" ..." if len(self.changed) > 5 else "")
        return (f"since gate `{self.gate_id}` was recorded, reviewers changed {len(self.changed)} grade"
                f"{'' if len(self.changed) == 1 else 's'} it saw ({shown}): record a new gate, or confirm "
                f"(`--confirm`; app: tick *confirm*) to sign off on `{self.gate_id}` as it stands")


def later_text(gates: tuple[GateRow, ...]) -> str:
    """`later gate G2 FAIL, gate G3 INCONCLUSIVE`; "" for none."""
    return "later " + ", ".join(f"gate {g.id} {g.verdict.upper()}" for g in gates) if gates else ""


def signoff_check(store: Store, run_id: str, gate_id: str = "") -> SignoffCheck:
    """The gate a release decision on `run_id` is about (`gate_id`, else the run's latest gate as a candidate),
    the grades reviewers changed since it was recorded, and the later gates of the same candidate that did not
    clear. Raises WorkbenchError for a gate of another run."""
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
    later = _uncleared_after(recorded_gates(store), _candidates(store), run.id, gate.created_at)
    return SignoffCheck(run.id, gate.id, gate.baseline_run, gate.verdict, tuple(changed), later)


def _candidates(store: Store) -> dict[str, tuple[str, str | None]]:
    """run id -> (model, adapter): what a gate's candidate is, whichever run of it was gated."""
    return {r.id: (r.model, r.adapter) for r in store.list_runs()}


def _uncleared_after(gates: list[GateRow], candidates: dict[str, tuple[str, str | None]], run_id: str,
                     since: str) -> tuple[GateRow, ...]:
    """Gates recorded after `since` that did not clear, of any run of `run_id`'s model and adapter."""
    same = candidates.get(run_id)
    return tuple(g for g in gates
                 if g.created_at > since and g.verdict not in CLEARED and candidates.get(g.candidate_run) == same)


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
                   confirm: bool = False, override_reason: str | None = None) -> Review:
    """Sign off (`signoff`) or block (`block`) a candidate run for release, on one recorded gate of it
    (`gate_id`, else its latest; `signoff_check`). The CLI (`workbench review --target release`) and the app
    both record decisions here.

    A sign-off is refused when its gate failed or was inconclusive, or when the run has no gate, unless
    `override_reason` says why it may ship anyway (stored with the row; a blank one is refused, and so is one
    on a gate that cleared: it would record an override of nothing). Unless `confirm`, a sign-off is also
    refused when reviewers changed grades the gate saw since it was recorded. A block needs none of these."""
    reviewer, reason = _require(reviewer, "reviewer"), _require(reason, "reason")
    if decision not in DECISIONS:
        raise unknown_name("release decision", decision, DECISIONS)
    override = _override_reason(override_reason, decision)
    run = store.get_run(run_id)
    if run.status != "done":
        raise WorkbenchError(f"run `{run.id}` is {run.status}: only a finished run can be signed off or blocked")
    check = signoff_check(store, run.id, gate_id)
    if decision == "signoff":
        _refuse_signoff(check, override, confirm)
    prev = gate_decisions(store).get(check.gate_id or "") if check.gate_id else release_status(store, run.id)
    row = _append(store, reviewer=reviewer, target="release", run_id=run.id, probe_id=None,
                  old_value=prev.new_value if prev else None, new_value=decision, reason=reason,
                  gate_id=check.gate_id, override_reason=override)
    from workbench.cards import refresh_for_run

    refresh_for_run(store, run.id)  # a job's adapter card says the decision on its latest gate
    return row


def _override_reason(text: str | None, decision: str) -> str | None:
    """The override reason, stripped; None for no override. Blank, or given with a block: WorkbenchError."""
    if text is None:
        return None
    if decision != "signoff":
        raise WorkbenchError("`--override-reason` is for a sign-off over a gate that did not clear; a block needs "
                             "none: drop it")
    if not text.strip():
        raise WorkbenchError("`--override-reason` is empty: an override needs a reason; say why the candidate may "
                             "ship over its gate (app: the *override reason* box)")
    return text.strip()


def _refuse_signoff(check: SignoffCheck, override: str | None, confirm: bool) -> None:
    refused = check.refusal(override=override is not None, confirm=confirm)
    if refused:
        raise WorkbenchError(f"not signed off: {refused}")
    if override is not None and not check.needs_override:
        raise WorkbenchError(f"not signed off: gate `{check.gate_id}` is {check.gate_verdict.upper()}, there is "
                             "nothing to override: drop `--override-reason` (app: untick *override*)")


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


@dataclass(frozen=True)
class Standing:
    """A release decision and what it stands on (`standings`).

    Attributes:
        decision: The latest release row on its gate (or on its run, outside any gate).
        gate: The recorded gate it covers; None outside any gate (an override without a gate, or a decision
            from before decisions were tied to gates).
        later: For a sign-off, the gates of the same candidate (model and adapter, any run) recorded after its
            gate (after the decision, without one) that did not clear, oldest first; () for a block.
    """

    decision: Review
    gate: GateRow | None
    later: tuple[GateRow, ...] = ()

    def text(self, *, reason: bool = False) -> str:
        """`signoff by ann on gate G1 (PASS)`, with `: REASON` when asked, `; override: WHY` for an override
        and `; later gate G2 FAIL` when a later gate of the candidate did not clear."""
        d = self.decision
        on = f"gate {self.gate.id} ({self.gate.verdict.upper()})" if self.gate else "no gate"
        out = f"{d.new_value} by {d.reviewer} on {on}" + (f": {d.reason}" if reason else "")
        if d.override_reason:
            out += f"; override: {d.override_reason}"
        return out + (f"; {later_text(self.later)}" if self.later else "")

    def to_dict(self) -> dict[str, Any]:
        """The `signoff` of a `workbench history --json` row."""
        d = self.decision
        return {"decision": d.new_value, "reviewer": d.reviewer, "at": d.at, "reason": d.reason,
                "gate_verdict": self.gate.verdict if self.gate else None, "override_reason": d.override_reason,
                "later_gates": [{"gate_id": g.id, "verdict": g.verdict, "candidate_run": g.candidate_run,
                                 "created_at": g.created_at} for g in self.later],
                "text": self.text()}


def standings(store: Store) -> list[Standing]:
    """The latest release decision on each recorded gate and, per run, the latest one outside any gate, in the
    order they were recorded; each sign-off with the later gates of its candidate that did not clear."""
    gates = recorded_gates(store)
    by_id = {g.id: g for g in gates}
    candidates = _candidates(store)
    latest_each: dict[str, Review] = {}
    for r in list_reviews(store, target="release"):  # oldest first: the later row on a key wins
        latest_each[r.gate_id if r.gate_id and r.gate_id in by_id else f"run {r.run_id}"] = r
    out = []
    for r in sorted(latest_each.values(), key=lambda r: r.id):
        gate = by_id.get(r.gate_id or "")
        later = _uncleared_after(gates, candidates, gate.candidate_run if gate else r.run_id,
                                 gate.created_at if gate else r.at) if r.new_value == "signoff" else ()
        out.append(Standing(r, gate, later))
    return out

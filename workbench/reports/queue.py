"""The review queue of field reports: the `field_reports` and `report_decisions` tables (their one owner).

A report is *new* until a reviewer decides it, *decided* once a decision stands, *promoted* once `reports export`
has written its decision into a field suite (deciding it again makes it *decided* until the next export).
Decisions are appended, never overwritten; the latest per report wins, as reviews of runs do.

A report may also carry a risk (`reports score`, workbench/reports/scoring.py): the estimated probability that its
logged answer is made up, with the evidence (`RiskEvidence`); scoring again replaces both.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select, update

from workbench.errors import WorkbenchError, did_you_mean
from workbench.printable import printable_name
from workbench.reports.read import Report
from workbench.store import Store, utcnow
from workbench.store import schema as t

#: What a reviewer may decide, and whether the decision makes a probe of the field suite.
DECISIONS = {
    "hallucinated": "the answer was wrong: a probe with the reference answer (or one that should abstain)",
    "correct": "the answer was right after all: a probe with the reference answer, kept against regressions",
    "should-refuse": "the model should have declined: a probe that expects abstention",
    "not-factual": "not a factual question (advice, chit-chat, a bug report): no probe",
}
STATUSES = ("new", "decided", "promoted")
#: How the queue may be ordered: as reported (oldest first), or riskiest first (unscored reports last).
SORTS = ("reported", "risk")
#: How a refused decision names the fields it is about: the CLI's flags, or (`views.APP_WORDS`) the app's boxes.
CLI_WORDS = {"answer": "--answer, repeatable for aliases", "abstain": "--abstain", "reviewer": "--reviewer",
             "answer_short": "--answer"}


@dataclass(frozen=True)
class Decision:
    id: int
    report_id: str
    at: str
    reviewer: str
    decision: str
    answers: tuple[str, ...]
    abstain: bool
    note: str


@dataclass(frozen=True)
class RiskEvidence:
    """Why a report's answer has its risk: what the model under review said when asked again.

    Attributes:
        run_id: The run that asked it again (its samples and greedy answer are stored there).
        risk_model: What the risk model was fitted on (`RiskModel.fitted_on`).
        scored: "logged": the answer the user saw was scored; "greedy": the export held no answer, so the model's
            own greedy answer was (with its mean log-prob).
        features: `workbench.risk.features.Features.to_dict()` of the scored answer.
        samples: How many samples were drawn.
        agreeing: How many of them mean what the scored answer says.
        disagreeing: Up to five (`scoring.SHOWN_SAMPLES`) distinct samples that say something else, most frequent first.
        greedy: The model's greedy answer to the same prompt.
        model: The model under review (with its adapter, when one was given).
        scored_at: When.
    """

    run_id: str
    risk_model: str
    scored: str
    features: dict[str, Any]
    samples: int
    agreeing: int
    disagreeing: tuple[str, ...]
    greedy: str
    model: str
    scored_at: str

    @classmethod
    def from_json(cls, text: str) -> RiskEvidence:
        d = json.loads(text)
        return cls(**{**d, "disagreeing": tuple(d["disagreeing"])})

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


@dataclass(frozen=True)
class QueuedReport:
    """A stored report with its latest decision and its queue status."""

    id: str
    imported_at: str
    source: str
    line: int
    original: dict[str, Any]
    messages: list[dict[str, str]]
    question: str
    question_key: str
    answer: str | None
    comment: str | None
    feedback: dict[str, Any]
    reported_at: str
    promoted_at: str | None
    promoted_to: str | None
    decision: Decision | None
    group_size: int  # reports asking the same (normalised) question, this one included
    risk: float | None = None  # estimated probability the logged answer is made up (None: not scored)
    evidence: RiskEvidence | None = None  # why (`reports score`)

    @property
    def status(self) -> str:
        if self.decision is None:
            return "new"
        return "promoted" if self.promoted_at and self.promoted_at >= self.decision.at else "decided"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status
        return out


def add_reports(store: Store, reports: Sequence[Report], *, imported_at: str) -> tuple[int, int]:
    """Store the reports not stored yet (same id: same file name, line and content). Returns (added, already)."""
    ids = [r.id for r in reports]
    with store.write() as c:
        known: set[str] = set()
        for i in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            known.update(x for (x,) in c.execute(select(t.field_reports.c.id).where(
                t.field_reports.c.id.in_(ids[i : i + 500]))))
        fresh = {r.id: r for r in reports if r.id not in known}
        rows = [{
            "id": r.id, "imported_at": imported_at, "source": r.source, "line": r.line,
            "original_json": json.dumps(r.original, ensure_ascii=False, sort_keys=True),
            "messages_json": json.dumps(list(r.messages), ensure_ascii=False), "question": r.question,
            "question_key": r.question_key, "answer": r.answer, "comment": r.comment,
            "feedback_json": json.dumps(dict(r.feedback), ensure_ascii=False, sort_keys=True),
            "reported_at": r.reported_at or imported_at,
        } for r in fresh.values()]
        if rows:
            c.execute(insert(t.field_reports), rows)
    return len(rows), len(reports) - len(rows)


def list_reports(store: Store, *, status: str | None = None, source: str | None = None, since: str | None = None,
                 until: str | None = None, min_risk: float | None = None, sort: str = "reported",
                 ) -> list[QueuedReport]:
    """Reports in the order they were reported (`sort="risk"`: riskiest first, unscored last), filtered: status,
    a substring of the source file, `since` <= reported_at < `until` (ISO dates or stamps, UTC), and
    risk >= `min_risk` (which leaves unscored reports out)."""
    if sort not in SORTS:
        raise WorkbenchError(f"unknown sort `{sort}`.{did_you_mean(sort, SORTS)} Known: {', '.join(SORTS)}")
    with store.engine.connect() as c:
        q = select(t.field_reports).order_by(t.field_reports.c.reported_at, t.field_reports.c.id)
        if source:
            q = q.where(t.field_reports.c.source.contains(source, autoescape=True))
        if since:
            q = q.where(t.field_reports.c.reported_at >= since)
        if until:
            q = q.where(t.field_reports.c.reported_at < until)
        if min_risk is not None:
            q = q.where(t.field_reports.c.risk >= min_risk)
        rows = c.execute(q).mappings().all()
        groups = Counter(k for (k,) in c.execute(select(t.field_reports.c.question_key)))
        latest = _latest_decisions(c)
    out = [_queued(r, latest.get(r["id"]), groups[r["question_key"]]) for r in rows]
    if sort == "risk":  # stable: equal risks keep the reported order
        out.sort(key=lambda r: (r.risk is None, -(r.risk or 0.0)))
    return [r for r in out if status is None or r.status == status]


def save_risks(store: Store, scored: Sequence[tuple[str, float, RiskEvidence]]) -> None:
    """Store each (report id, risk, evidence), replacing the report's earlier score (one transaction)."""
    with store.write() as c:
        for rid, risk, evidence in scored:
            c.execute(update(t.field_reports).where(t.field_reports.c.id == rid)
                      .values(risk=risk, risk_json=evidence.to_json()))


def utc_stamp(value: str, what: str) -> str:
    """A date or time a user typed (ISO 8601; UTC when it names no offset) as the stored stamps spell them, so
    that filters compare as text."""
    try:
        stamp = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise WorkbenchError(f"{what}: `{value}` is not an ISO date (e.g. 2026-11-02 or 2026-11-02T10:00)") from None
    stamp = stamp.replace(tzinfo=dt.UTC) if stamp.tzinfo is None else stamp.astimezone(dt.UTC)
    return stamp.isoformat(timespec="microseconds")


def queue_counts(reports: Iterable[QueuedReport]) -> dict[str, int]:
    counts = Counter(r.status for r in reports)
    return {s: counts.get(s, 0) for s in STATUSES}


def get_report(store: Store, ref: str) -> QueuedReport:
    """A report by id or a unique prefix of it."""
    with store.engine.connect() as c:
        ids = [x for (x,) in c.execute(select(t.field_reports.c.id))]
    matches = [i for i in ids if i == ref] or sorted(i for i in ids if ref and i.startswith(ref))
    if len(matches) > 1:
        raise WorkbenchError(f"report prefix `{ref}` matches {len(matches)} reports: {', '.join(matches[:5])}; "
                             "give more of the id")
    if not matches:
        raise WorkbenchError(f"no report `{ref}` in {store.workspace}.{did_you_mean(ref, ids)}"
                             + ("" if ids else " Import some with `workbench reports import FILE`."))
    found = [r for r in list_reports(store) if r.id == matches[0]]
    return found[0]


def decide(store: Store, ref: str, *, decision: str, answers: Sequence[str] = (), abstain: bool = False,
           reviewer: str, note: str = "", whole_group: bool = True, words: dict[str, str] | None = None,
           ) -> list[Decision]:
    """Record a decision on a report and, with `whole_group`, on every report asking the same question that
    no reviewer decided yet (one decision per question, however many users reported it). A refusal names the
    fields in `words` (default CLI_WORDS: the flags)."""
    w = words or CLI_WORDS
    if decision not in DECISIONS:
        raise WorkbenchError(f"unknown decision `{decision}`.{did_you_mean(decision, DECISIONS)} "
                             f"Known: {', '.join(DECISIONS)}")
    answers = tuple(dict.fromkeys(a.strip() for a in answers if a.strip()))
    if not reviewer.strip():
        raise WorkbenchError(f"a decision needs a reviewer name ({w['reviewer']})")
    reviewer = printable_name(reviewer, f"reviewer ({w['reviewer']})")
    if decision == "should-refuse":
        abstain = True
    if decision in ("hallucinated", "correct") and not answers and not abstain:
        raise WorkbenchError(f"`{decision}` needs the reference answer ({w['answer']})"
                             + (f" or {w['abstain']} (the model should have said it does not know)"
                                if decision == "hallucinated" else ""))
    if abstain and answers:
        raise WorkbenchError(f"{w['abstain']} and {w['answer_short']} together: a probe either expects an answer or "
                             "an abstention")
    if decision == "correct" and abstain:
        raise WorkbenchError(f"`correct` with {w['abstain']}: a right answer is not an abstention; decide "
                             "`should-refuse` instead")
    if decision == "not-factual" and (answers or abstain):
        raise WorkbenchError(f"`not-factual` makes no probe: leave out {w['answer_short']} and {w['abstain']}")
    report = get_report(store, ref)
    targets = [report.id]
    if whole_group:
        targets += [r.id for r in list_reports(store, status="new")
                    if r.question_key == report.question_key and r.id != report.id]
    now = utcnow()
    with store.write() as c:
        for rid in targets:
            c.execute(insert(t.report_decisions).values(
                report_id=rid, at=now, reviewer=reviewer.strip(), decision=decision,
                answers_json=json.dumps(list(answers), ensure_ascii=False), abstain=int(abstain), note=note))
        latest = _latest_decisions(c)
    return [latest[rid] for rid in targets]


def field_suite_path(store: Store) -> Path | None:
    """The field suite of this workspace: `suite.yaml` of the folder the latest export wrote, while it exists
    (None before any export). `workbench regress` evaluates it beside the probes by default."""
    with store.engine.connect() as c:
        row = c.execute(select(t.field_reports.c.promoted_to).where(t.field_reports.c.promoted_to.is_not(None))
                        .order_by(t.field_reports.c.promoted_at.desc()).limit(1)).first()
    if row is None:
        return None
    path = Path(row[0]) / "suite.yaml"
    return path if path.is_file() else None


def mark_promoted(store: Store, ids: Sequence[str], *, at: str, where: str) -> None:
    with store.write() as c:
        for i in range(0, len(ids), 500):
            c.execute(update(t.field_reports).where(t.field_reports.c.id.in_(ids[i : i + 500]))
                      .values(promoted_at=at, promoted_to=where))


def _latest_decisions(c: Any) -> dict[str, Decision]:
    """Each report's latest decision. Only those rows are read (the newest id per report, in SQL): decisions pile up
    as reviewers change their minds, and every listing and every decision in the app asks for these."""
    d = t.report_decisions.c
    newest = select(func.max(d.id)).group_by(d.report_id)
    latest: dict[str, Decision] = {}
    for r in c.execute(select(t.report_decisions).where(d.id.in_(newest))).mappings():
        latest[r["report_id"]] = Decision(
            id=r["id"], report_id=r["report_id"], at=r["at"], reviewer=r["reviewer"], decision=r["decision"],
            answers=tuple(json.loads(r["answers_json"])), abstain=bool(r["abstain"]), note=r["note"])
    return latest


def _queued(r: Any, decision: Decision | None, group_size: int) -> QueuedReport:
    return QueuedReport(
        id=r["id"], imported_at=r["imported_at"], source=r["source"], line=r["line"],
        original=json.loads(r["original_json"]), messages=json.loads(r["messages_json"]), question=r["question"],
        question_key=r["question_key"], answer=r["answer"], comment=r["comment"],
        feedback=json.loads(r["feedback_json"]), reported_at=r["reported_at"], promoted_at=r["promoted_at"],
        promoted_to=r["promoted_to"], decision=decision, group_size=group_size, risk=r["risk"],
        evidence=RiskEvidence.from_json(r["risk_json"]) if r["risk_json"] else None)

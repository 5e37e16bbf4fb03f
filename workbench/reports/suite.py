"""A field suite from decided reports: `suite.yaml` + `probes.jsonl`, the project's ordinary suite format.

One probe per question (reports grouped by normalised question), carrying its provenance: the report ids, the
reviewer, the decision and its time, the source files and lines. The conversation's context turns are kept in the
probe's question (a probe has one question, the chat template renders it as the user turn); a system prompt shared
by every probe becomes the suite's `system_prompt`, any other is kept in the question with the context.

`field_origins` maps a field probe's id back to its reports and reviewer, for the reasons a fix set gives.

A probe that should abstain accepts only the abstention phrase, so abstaining grades NOT_ATTEMPTED and any answer
INCORRECT (a hallucination): the gate counts a fixed complaint coming back as a new hallucination.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import WorkbenchError
from workbench.reports.queue import QueuedReport, list_reports, mark_promoted
from workbench.store import Store, utcnow
from workbench.types import FIELD_ABSTAIN_TAG

SUITE_FILE = "suite.yaml"
PROBES_FILE = "probes.jsonl"
#: What a should-abstain probe accepts: the first of the suites' default abstention phrases.
ABSTAIN_ANSWER = "I don't know"
FIELD_TAG = "field"
#: The tag of a field probe that should abstain (a reviewer's "should abstain", or a should-refuse decision).
ABSTAIN_TAG = FIELD_ABSTAIN_TAG


@dataclass(frozen=True)
class FieldOrigin:
    """Where a field probe came from, as the workspace's decisions say now: its reports and the latest decision."""

    probe_id: str
    reports: tuple[str, ...]
    decision: str
    reviewer: str
    decided_at: str

    def describe(self) -> str:
        """For a fix's reason: `report rep-1a2b (+2 more), decided hallucinated by ann`."""
        more = f" (+{len(self.reports) - 1} more)" if len(self.reports) > 1 else ""
        by = f" by {self.reviewer}" if self.reviewer else ""
        return f"report {self.reports[0]}{more}, decided {self.decision}{by}"


@dataclass(frozen=True)
class Exported:
    suite_path: Path
    probes: int
    reports: int
    not_factual: int  # decided reports that make no probe
    undecided: int


def export_suite(store: Store, out: Path, *, name: str = "field", judge: dict[str, Any] | None = None) -> Exported:
    """Write every decided factual report into the field suite at `out` (rewritten whole, so it always holds
    every decision), and mark them promoted. `judge`: the judge grader's options (`model`, `backend`, ...); the
    suite then grades with `match-judge`, for answers longer than a phrase."""
    reports = list_reports(store)
    decided = [r for r in reports if r.decision is not None]
    factual = [r for r in decided if r.decision is not None and r.decision.decision != "not-factual"]
    if not factual:
        raise WorkbenchError(f"no decided factual report to export ({len(reports)} report(s), "
                             f"{len(reports) - len(decided)} undecided); decide some with `workbench reports decide`")
    groups: dict[str, list[QueuedReport]] = {}
    for r in factual:
        groups.setdefault(r.question_key, []).append(r)
    shared = shared_system(factual)
    rows = [_probe_row(g, shared) for g in groups.values()]
    out.mkdir(parents=True, exist_ok=True)
    suite: dict[str, Any] = {"name": name, "data": PROBES_FILE, "template": "chat", "tags": [FIELD_TAG]}
    if shared:
        suite["system_prompt"] = shared
    if judge:
        suite.update(grader="match-judge", grader_options=dict(judge))
    _atomic_write(out / PROBES_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    _atomic_write(out / SUITE_FILE, "# Field probes from reviewed user reports (`workbench reports export`).\n"
                  + yaml.safe_dump(suite, allow_unicode=True, sort_keys=False))
    mark_promoted(store, [r.id for r in factual], at=utcnow(), where=str(out))
    return Exported(out / SUITE_FILE, len(rows), len(factual), len(decided) - len(factual),
                    len(reports) - len(decided))


def field_probe_id(question_key: str) -> str:
    """A field probe's id: from its normalised question, so a re-export keeps it and a fix set can find its reports."""
    return "field-" + hashlib.sha256(question_key.encode()).hexdigest()[:10]


def field_origins(store: Store) -> dict[str, FieldOrigin]:
    """Field probe id -> its reports and the decision an export writes for them (the latest of the group)."""
    groups: dict[str, list[QueuedReport]] = {}
    for r in list_reports(store):
        if r.decision is not None and r.decision.decision != "not-factual":
            groups.setdefault(r.question_key, []).append(r)
    out: dict[str, FieldOrigin] = {}
    for key, group in groups.items():
        d = _lead(group).decision
        assert d is not None
        pid = field_probe_id(key)
        out[pid] = FieldOrigin(pid, tuple(sorted(r.id for r in group)), d.decision, d.reviewer, d.at)
    return out


def _lead(group: list[QueuedReport]) -> QueuedReport:
    # The latest decision of the group speaks for it (a reviewer may re-decide one report of a group).
    return max(group, key=lambda r: (r.decision.at if r.decision else "", r.decision.id if r.decision else 0))


def shared_system(reports: Sequence[QueuedReport]) -> str | None:
    """The system prompt every report has (None when they differ or have none): it becomes the suite's."""
    systems = {_system(r) for r in reports}
    return systems.pop() if len(systems) == 1 else None


def prompt_question(r: QueuedReport, shared: str | None) -> str:
    """The report's prompt as one probe question: earlier turns the question depends on ("and its capital?") kept
    before it as the prompt gave them, a system prompt other than the suite's (`shared`) among them."""
    turns = [m for m in r.messages[:-1] if not (m["role"] == "system" and m["content"] == shared)]
    if not turns:
        return r.question
    context = "\n".join(f"{m['role']}: {m['content']}" for m in turns)
    return f"{context}\nuser: {r.question}"


def _system(r: QueuedReport) -> str | None:
    first = r.messages[0] if r.messages else None
    return first["content"] if first and first["role"] == "system" and first["content"].strip() else None


def _probe_row(group: list[QueuedReport], shared: str | None) -> dict[str, Any]:
    lead = _lead(group)
    d = lead.decision
    assert d is not None
    abstain = d.abstain or d.decision == "should-refuse"
    question = prompt_question(lead, shared)
    tags = [FIELD_TAG, f"field:{d.decision}"] + ([ABSTAIN_TAG] if abstain else [])
    return {
        "id": field_probe_id(lead.question_key),
        "question": question,
        "answers": [ABSTAIN_ANSWER] if abstain else list(d.answers),
        "tags": tags,
        "provenance": {
            "reports": sorted(r.id for r in group),
            "decision": d.decision,
            "reviewer": d.reviewer,
            "decided_at": d.at,
            "note": d.note,
            "sources": sorted({f"{Path(r.source).name}:{r.line}" for r in group}),
            "reported_answers": [a for a, _ in Counter(r.answer for r in group if r.answer).most_common(3)],
        },
    }


def _atomic_write(path: Path, text: str) -> None:
    """Written beside, then renamed: a reader (an eval started meanwhile) sees the old suite or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

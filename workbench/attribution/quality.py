"""The data-quality report: training rows that contradict accepted answers, the data that makes the
model worse. A row is listed when it pairs a probe's subject with a wrong answer the model actually
gives (greedy or sampled), under the data axis's checks (same relation, above-chance co-occurrence).
Grouped by subject; exported as JSONL, one row per offending document, ready for removal."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from workbench.attribution.data_axis import AnswerSpace, find_conflict
from workbench.attribution.engine import CorpusEngine
from workbench.results import ProbeResult

ROWS_PER_PAIR = 100  # documents listed per (subject, wrong value); the count covers all of them


@dataclass(frozen=True)
class BadRow:
    doc_id: str
    snippet: str
    subject: str
    probe_id: str
    wrong_value: str
    accepted: tuple[str, ...]


@dataclass(frozen=True)
class SubjectReport:
    subject: str
    rows: tuple[BadRow, ...]
    total: int  # documents that contradict, including any beyond the listed ones


def contradicting_rows(index: CorpusEngine, results: Sequence[ProbeResult], *,
                       limit: int = ROWS_PER_PAIR) -> list[SubjectReport]:
    """Offending rows of every probe (passed or failed: a model can be right despite bad rows)."""
    space, n_docs = AnswerSpace(results), int(index.stats()["rows"])  # type: ignore[call-overload]
    by_subject: dict[str, list[BadRow]] = {}
    totals: dict[str, int] = {}
    for r in results:
        c = find_conflict(index, r, space, n_docs, limit=limit)
        if c is None:
            continue
        subject = r.probe.subject or ""
        by_subject.setdefault(subject, []).extend(
            BadRow(row.doc_id, row.snippet, subject, r.probe.id, c.value, r.probe.answers) for row in c.found.rows)
        totals[subject] = totals.get(subject, 0) + c.found.count
    return [SubjectReport(s, tuple(rows), totals[s])
            for s, rows in sorted(by_subject.items(), key=lambda kv: -totals[kv[0]])]


def export_jsonl(reports: Sequence[SubjectReport], path: str | Path) -> int:
    """Write one JSON line per offending document (deduplicated by doc id); returns the count."""
    seen: set[str] = set()
    lines = []
    for rep in reports:
        for row in rep.rows:
            if row.doc_id not in seen:
                seen.add(row.doc_id)
                lines.append(json.dumps({**asdict(row), "accepted": list(row.accepted)}, ensure_ascii=False))
    Path(path).write_text("".join(line + "\n" for line in lines))
    return len(lines)

"""The app's Reports tab as plain functions (no gradio): the queue table, one report, a decision, an export. Each
returns what the tab shows and the equivalent `workbench reports` command, so the app and the CLI make the same
calls and a reviewer can copy the command."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from workbench.html import macro
from workbench.reports.queue import (
    DECISIONS,
    STATUSES,
    decide,
    get_report,
    list_reports,
    queue_counts,
    utc_stamp,
)
from workbench.reports.suite import export_suite
from workbench.safepath import resolve_inside
from workbench.store import Store
from workbench.store.db import shown_time

QUEUE_COLUMNS = ["report", "status", "reported", "source", "question", "same", "decision"]
#: The default folder of the field suite, inside the workspace (the app writes nowhere else).
DEFAULT_SUITE_DIR = "suites/field"


@dataclass(frozen=True)
class QueueView:
    rows: list[list[Any]]  # QUEUE_COLUMNS
    counts: str  # markdown: new, decided, promoted
    ids: list[str]
    cli: str


def queue_view(store: Store, status: str = "", source: str = "", since: str = "", until: str = "") -> QueueView:
    """The queue as the tab's table, filtered as `workbench reports list` filters it."""
    status = status if status in STATUSES else ""
    since_s = utc_stamp(since, "since") if since.strip() else None
    until_s = utc_stamp(until, "until") if until.strip() else None
    shown = list_reports(store, status=status or None, source=source.strip() or None, since=since_s, until=until_s)
    counts = queue_counts(list_reports(store, source=source.strip() or None, since=since_s, until=until_s))
    rows = [[r.id, r.status, shown_time(r.reported_at), f"{r.source.rsplit('/', 1)[-1]}:{r.line}", r.question,
             r.group_size - 1, r.decision.decision if r.decision else ""] for r in shown]
    args = ["list"] + (["--status", status] if status else []) + (["--source", source.strip()] if source.strip()
                                                                    else [])
    args += (["--since", since.strip()] if since_s else []) + (["--until", until.strip()] if until_s else [])
    text = "**queue**: " + ", ".join(f"{v} {k}" for k, v in counts.items())
    return QueueView(rows, text, [r.id for r in shown], _cli(store, *args))


def report_view(store: Store, report_id: str) -> tuple[str, str]:
    """One report as markdown (`templates/reports.md`: every user text escaped, its Markdown marks defused), and
    its `reports show` command."""
    r = get_report(store, report_id.strip())
    d = r.decision
    what = ("abstain" if d.abstain else "; ".join(d.answers) or "no probe") if d else ""
    text = macro("reports.md", "report", r, shown_time(r.reported_at), what, shown_time(d.at) if d else "")
    return text, _cli(store, "show", r.id)


def decide_view(store: Store, report_id: str, decision: str, answers: str, abstain: bool, reviewer: str,
                note: str = "") -> tuple[str, str]:
    """Record the decision as `workbench reports decide` does; answers are separated by `;` or new lines."""
    if decision not in DECISIONS:
        raise ValueError(f"pick a decision: {', '.join(DECISIONS)}")
    refs = [a.strip() for a in re.split(r"[;\n]", answers or "") if a.strip()]
    made = decide(store, (report_id or "").strip(), decision=decision, answers=refs, abstain=abstain,
                  reviewer=reviewer or "", note=note or "")
    d = made[0]
    what = "abstain" if d.abstain else "; ".join(d.answers) or "no probe"
    others = f" and {len(made) - 1} other report(s) asking the same" if len(made) > 1 else ""
    args = ["decide", d.report_id, "--decision", decision, *[x for a in refs for x in ("--answer", a)]]
    args += (["--abstain"] if abstain else []) + (["--note", note] if note else []) + ["--reviewer", d.reviewer]
    return macro("reports.md", "decided", d, others, what), _cli(store, *args)


def export_view(store: Store, folder: str = "") -> tuple[str, str]:
    """Write the field suite under the workspace (default `suites/field`), as `workbench reports export`."""
    rel = folder.strip() or DEFAULT_SUITE_DIR
    e = export_suite(store, resolve_inside(store.workspace, rel))
    return (f"**{rel}/suite.yaml**: {e.probes} probe(s) from {e.reports} report(s); {e.not_factual} not factual, "
            f"{e.undecided} undecided left out"), _cli(store, "export", "--suite", str(store.workspace / rel))


def _cli(store: Store, *args: str) -> str:
    return shlex.join(["workbench", "reports", *args, "--workspace", str(store.workspace)])

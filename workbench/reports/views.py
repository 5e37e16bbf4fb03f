"""The app's Reports tab as plain functions (no gradio): the queue table, one report, a decision, an export. Each
returns what the tab shows and the equivalent `workbench reports` command, so the app and the CLI make the same
calls and a reviewer can copy the command."""

from __future__ import annotations

import html
import re
import shlex
from dataclasses import dataclass
from typing import Any

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
    """One report as markdown (every user text escaped), and its `reports show` command."""
    r = get_report(store, report_id.strip())
    lines = [f"**{r.id}** · {r.status} · `{html.escape(r.source.rsplit('/', 1)[-1])}` line {r.line} · reported "
             f"{shown_time(r.reported_at)}" + (f" · {r.group_size - 1} other report(s) ask the same"
                                              if r.group_size > 1 else ""), ""]
    for m in r.messages:
        lines.append(f"- **{m['role']}**: {_text(m['content'])}")
    lines += ["", f"**model answered**: {_text(r.answer) if r.answer is not None else '(not in the export)'}", "",
              f"**user's complaint**: {_text(r.comment) if r.comment else '(none)'}", ""]
    if r.feedback:
        lines += ["**feedback**: " + ", ".join(f"{html.escape(str(k))} = {_text(str(v))}"
                                               for k, v in r.feedback.items()), ""]
    if r.decision:
        d = r.decision
        what = "abstain" if d.abstain else "; ".join(d.answers) or "no probe"
        lines.append(f"**decision**: {d.decision} ({_text(what)}) by {_text(d.reviewer)} at {shown_time(d.at)}")
    return "\n".join(lines).rstrip(), _cli(store, "show", r.id)


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
    return f"decided **{d.report_id}**{others}: {d.decision} ({_text(what)}) by {_text(d.reviewer)}", \
        _cli(store, *args)


def export_view(store: Store, folder: str = "") -> tuple[str, str]:
    """Write the field suite under the workspace (default `suites/field`), as `workbench reports export`."""
    rel = folder.strip() or DEFAULT_SUITE_DIR
    e = export_suite(store, resolve_inside(store.workspace, rel))
    return (f"**{rel}/suite.yaml**: {e.probes} probe(s) from {e.reports} report(s); {e.not_factual} not factual, "
            f"{e.undecided} undecided left out"), _cli(store, "export", "--suite", str(store.workspace / rel))


def _text(s: str) -> str:
    # A user's words in Markdown: escaped as HTML, and Markdown's own marks defused, so a report cannot restyle
    # or script the reviewer's page.
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", html.escape(s, quote=False).replace("\n", " "))


def _cli(store: Store, *args: str) -> str:
    return shlex.join(["workbench", "reports", *args, "--workspace", str(store.workspace)])

"""The app's Reports tab as plain functions (no gradio): the queue table, one report, a decision, an export. Each
returns what the tab shows and the equivalent `workbench reports` command, so the app and the CLI make the same
calls and a reviewer can copy the command."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError
from workbench.html import environment, macro
from workbench.reports.queue import (
    DECISIONS,
    SORTS,
    STATUSES,
    Decision,
    QueuedReport,
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

QUEUE_COLUMNS = ["report", "status", "reported", "source", "question", "asked again", "decision", "risk"]
#: How a refused decision in the app names its fields (the CLI names its flags: `queue.CLI_WORDS`).
APP_WORDS = {"answer": "type it in *reference answer*, aliases separated by ;", "abstain": "tick *should abstain*",
             "reviewer": "the *reviewer* box", "answer_short": "a reference answer"}
#: The decision form of a report nobody decided yet.
BLANK_FORM = ("hallucinated", "", False, "")
#: The default folder of the field suite, inside the workspace (the app writes nowhere else).
DEFAULT_SUITE_DIR = "suites/field"


@dataclass(frozen=True)
class QueueView:
    rows: list[list[Any]]  # QUEUE_COLUMNS
    counts: str  # markdown: new, decided, promoted
    ids: list[str]
    cli: str


def queue_view(store: Store, status: str = "", source: str = "", since: str = "", until: str = "",
               sort: str = "reported", min_risk: float | str | None = None) -> QueueView:
    """The queue as the tab's table, filtered and ordered as `workbench reports list` does (`sort` "risk":
    riskiest first, unscored last; `min_risk`: only reports scored at least that, blank for all)."""
    status = status if status in STATUSES else ""
    sort = sort if sort in SORTS else "reported"
    since_s = utc_stamp(since, "since") if since.strip() else None
    until_s = utc_stamp(until, "until") if until.strip() else None
    floor = risk_floor(min_risk)
    shown = list_reports(store, status=status or None, source=source.strip() or None, since=since_s, until=until_s,
                         min_risk=floor, sort=sort)
    counts = queue_counts(list_reports(store, source=source.strip() or None, since=since_s, until=until_s))
    rows = [[r.id, r.status, shown_time(r.reported_at), f"{r.source.rsplit('/', 1)[-1]}:{r.line}", r.question,
             f"by {r.group_size - 1} more" if r.group_size > 1 else "", decision_text(r.decision), risk_text(r)]
            for r in shown]
    args = ["list"] + (["--status", status] if status else []) + (["--source", source.strip()] if source.strip()
                                                                    else [])
    args += (["--since", since.strip()] if since_s else []) + (["--until", until.strip()] if until_s else [])
    args += (["--sort", sort] if sort != "reported" else []) + (["--min-risk", f"{floor:g}"] if floor is not None
                                                                  else [])
    text = "**queue**: " + ", ".join(f"{v} {k}" for k, v in counts.items())
    return QueueView(rows, text, [r.id for r in shown], _cli(store, *args))


def risk_floor(value: float | str | None) -> float | None:
    """The app's *min risk* box as `--min-risk` reads it: blank is none, else a number from 0 to 1."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        x = float(value)
    except ValueError:
        raise WorkbenchError(f"min risk: `{value}` is not a number (0 to 1, e.g. 0.5)") from None
    if not 0 <= x <= 1:
        raise WorkbenchError(f"min risk: must be between 0 and 1, got {x:g}")
    return x


def risk_text(r: QueuedReport) -> str:
    """A report's risk as the queue shows it: `0.83`, "" when not scored."""
    return "" if r.risk is None else f"{r.risk:.2f}"


def decision_text(d: Decision | None) -> str:
    """A decision as the queue shows it, the reference answer apart from an abstention: `hallucinated → answer:
    Canberra`, `hallucinated → should abstain`, `not-factual`; "" undecided."""
    if d is None:
        return ""
    if d.abstain:
        return f"{d.decision} → should abstain"
    return f"{d.decision} → answer: {'; '.join(d.answers)}" if d.answers else d.decision


def next_new(v: QueueView, current: str) -> str:
    """The next report nobody decided after `current` in the listed order (wrapping round), "" when none is left."""
    new = [row[0] for row in v.rows if row[1] == "new" and row[0] != current]
    if current in v.ids:
        after = v.ids[v.ids.index(current) + 1:]
        new = [i for i in after if i in new] + [i for i in new if i not in after]
    return new[0] if new else ""


def form_values(store: Store, report_id: str) -> tuple[str, str, bool, str]:
    """(decision, reference answers, should abstain, note) the decision form shows for a report: its latest
    decision's, or a blank form (`BLANK_FORM`) when nobody decided it; nothing carries over from another report."""
    d = get_report(store, report_id.strip()).decision if report_id.strip() else None
    if d is None:
        return BLANK_FORM
    return d.decision, "; ".join(d.answers), d.abstain, d.note


def report_view(store: Store, report_id: str) -> tuple[str, str]:
    """One report as markdown (`templates/reports.md`: every user text escaped, its Markdown marks defused), and
    its `reports show` command."""
    r = get_report(store, report_id.strip())
    d = r.decision
    text = macro("reports.md", "report", r, shown_time(r.reported_at), _what(d) if d else "",
                 shown_time(d.at) if d else "")
    return text + "\n\n" + risk_view(r), _cli(store, "show", r.id)


#: Why a report is risky, in the report's Markdown (escaped and defused as templates/reports.md does it).
_RISK_MD = """\
{% if r.evidence is none or r.risk is none %}
**risk**: not scored (`workbench reports score --model MODEL`)
{% else %}
{% set e = r.evidence %}
**risk**: {{ r.risk|fmt('.2f') }} that {{ "the logged answer" if e.scored == "logged" else "the model's own answer \
(the export held none)" }} is made up · asked {{ e.model|md }} again (run `{{ e.run_id }}`), risk model: \
{{ e.risk_model|md }}

{{ e.agreeing }} of {{ e.samples }} samples say the same; the model's greedy answer now: {{ e.greedy|md }}
{% if e.disagreeing %}

samples that say something else:
{% for s in e.disagreeing %}
- {{ s|md }}
{% endfor %}
{% endif %}
{% endif %}"""


def risk_view(r: QueuedReport) -> str:
    """A report's risk and why (the samples that disagree with its answer) as Markdown; "not scored" without one."""
    return str(environment().from_string(_RISK_MD).render(r=r)).strip()


def _what(d: Decision) -> str:
    return "should abstain" if d.abstain else ("answer: " + "; ".join(d.answers) if d.answers else "no probe")


def decide_view(store: Store, report_id: str, decision: str, answers: str, abstain: bool, reviewer: str,
                note: str = "") -> tuple[str, str]:
    """Record the decision as `workbench reports decide` does; answers are separated by `;` or new lines. A refusal
    (WorkbenchError) names the app's boxes, not the CLI's flags (`APP_WORDS`)."""
    if not (report_id or "").strip():
        raise WorkbenchError("pick a report first (click one in the queue)")
    if decision not in DECISIONS:
        raise WorkbenchError(f"pick a decision: {', '.join(DECISIONS)}")
    refs = [a.strip() for a in re.split(r"[;\n]", answers or "") if a.strip()]
    made = decide(store, (report_id or "").strip(), decision=decision, answers=refs, abstain=abstain,
                  reviewer=reviewer or "", note=note or "", words=APP_WORDS)
    d = made[0]
    what = _what(d)
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

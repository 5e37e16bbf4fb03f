"""The Reports tab: users' flagged conversations, reviewed and promoted into the field suite.

Every handler calls one plain function of `workbench.reports.views`, which returns what the tab shows and the
equivalent `workbench reports` command.
"""

# No `from __future__ import annotations`: gradio reads the handlers' annotations (gr.Request, gr.SelectData).

from dataclasses import dataclass
from typing import Any

import gradio as gr
import pandas as pd

from apptabs.common import Context, Shared, Updates, reviewer_box, ui_errors
from workbench import views
from workbench.errors import WorkbenchError
from workbench.reports import DECISIONS, STATUSES
from workbench.reports import views as rv


def _table(rows: list[list[Any]]) -> Any:
    return pd.DataFrame(rows, columns=rv.QUEUE_COLUMNS)


@dataclass(frozen=True)
class ReportsTab:
    ctx: Context
    status: gr.Dropdown
    source: gr.Textbox
    since: gr.Textbox
    until: gr.Textbox
    sort: gr.Dropdown
    min_risk: gr.Textbox
    refresh_btn: gr.Button
    counts: gr.Markdown
    queue: gr.Dataframe
    picked: gr.Dropdown
    reviewer: gr.Textbox
    detail: gr.Markdown
    decision: gr.Radio
    answers: gr.Textbox
    abstain: gr.Checkbox
    note: gr.Textbox
    decide_btn: gr.Button
    decided: gr.Markdown
    folder: gr.Textbox
    export_btn: gr.Button
    exported: gr.Markdown
    cli: gr.Textbox

    @ui_errors
    def refresh(self, status: str, source: str, since: str, until: str, sort: str = "reported",
                min_risk: str = "") -> Updates:
        v = rv.queue_view(self.ctx.store, status, source, since, until, sort, min_risk)
        return {self.queue: _table(v.rows), self.counts: v.counts, self.picked: gr.Dropdown(choices=v.ids),
                self.cli: v.cli}

    def first_load(self, request: gr.Request) -> Updates:
        """Signed in, the reviewer is the signed-in user (read-only)."""
        return {self.reviewer: reviewer_box(request)}

    @ui_errors
    def show(self, report_id: str) -> Updates:
        """One report, and the decision form as that report stands (its decision, or blank): nothing carries over
        from the report shown before."""
        detail, cli = rv.report_view(self.ctx.store, report_id) if report_id else ("", "")
        decision, answers, abstain, note = rv.form_values(self.ctx.store, report_id or "")
        return {self.detail: detail, self.cli: cli, self.decision: decision, self.answers: answers,
                self.abstain: abstain, self.note: note, self.decided: ""}

    def pick(self, evt: gr.SelectData) -> Updates:
        row = evt.row_value or []
        report_id = str(row[0]) if row else ""
        return {self.picked: report_id, **self.show(report_id)}

    def record(self, report_id: str, decision: str, answers: str, abstain: bool, reviewer: str, note: str,
               status: str, source: str, since: str, until: str, sort: str, min_risk: str,
               request: gr.Request) -> Updates:
        """Record the decision, then open the next report nobody decided (the form as it stands); a refusal is a
        message beside the form, in the app's words."""
        store = self.ctx.store
        try:
            message, cli = rv.decide_view(store, report_id, decision, answers, abstain,
                                          self.ctx.who(reviewer, request), note)
            v = rv.queue_view(store, status, source, since, until, sort, min_risk)
        except (WorkbenchError, ValueError, KeyError) as e:
            return {self.decided: views.refusal(e)}
        nxt = rv.next_new(v, report_id)
        shown = self.show(nxt) if nxt else {self.detail: rv.report_view(store, report_id)[0]}
        message += f"\n\nnext undecided: **{nxt}**" if nxt else "\n\nno undecided report left in this list"
        return {**shown, self.decided: message, self.cli: cli, self.queue: _table(v.rows), self.counts: v.counts,
                self.picked: gr.Dropdown(choices=v.ids, value=nxt or report_id)}

    @ui_errors
    def export(self, folder: str, status: str, source: str, since: str, until: str, sort: str,
               min_risk: str) -> Updates:
        message, cli = rv.export_view(self.ctx.store, folder)
        listed = self.refresh(status, source, since, until, sort, min_risk)
        return {self.exported: message, self.cli: cli, self.queue: listed[self.queue],
                self.counts: listed[self.counts]}


def _layout(ctx: Context) -> ReportsTab:
    c: dict[str, object] = {}  # the tab's components by field name, in the page's order
    with gr.Row():
        c["status"] = gr.Dropdown(label="status", choices=["", *STATUSES], value="", elem_id="reports-status")
        c["source"] = gr.Textbox(label="source file contains", elem_id="reports-source")
        c["since"] = gr.Textbox(label="since (ISO date, UTC)", elem_id="reports-since")
        c["until"] = gr.Textbox(label="until (ISO date, UTC)", elem_id="reports-until")
        c["sort"] = gr.Dropdown(label="order", choices=[("as reported", "reported"), ("riskiest first", "risk")],
                                value="reported", elem_id="reports-sort")
        c["min_risk"] = gr.Textbox(label="min risk (0-1)", elem_id="reports-min-risk")
        c["refresh_btn"] = gr.Button("Refresh", variant="primary", elem_id="reports-refresh")
    c["counts"] = gr.Markdown(elem_id="reports-counts")
    c["queue"] = gr.Dataframe(_table([]), label="reports (click one)", interactive=False, wrap=True, max_height=360,
                              elem_id="reports-table",
                              column_widths=["12%", "7%", "11%", "11%", "29%", "8%", "16%", "6%"])
    with gr.Row():
        c["picked"] = gr.Dropdown(label="report", choices=[], allow_custom_value=True, elem_id="reports-pick",
                                  scale=2)
        c["reviewer"] = gr.Textbox(label="reviewer", elem_id="reports-reviewer")
    c["detail"] = gr.Markdown(elem_id="reports-detail")
    with gr.Row():
        c["decision"] = gr.Radio(label="decision", choices=list(DECISIONS), value="hallucinated",
                                 elem_id="reports-decision")
        c["answers"] = gr.Textbox(label="reference answer (aliases separated by ;)", elem_id="reports-answers",
                                  scale=2)
        c["abstain"] = gr.Checkbox(label="should abstain", elem_id="reports-abstain")
    with gr.Row():
        c["note"] = gr.Textbox(label="note", elem_id="reports-note", scale=2)
        c["decide_btn"] = gr.Button("Record decision", variant="primary", elem_id="reports-decide")
    c["decided"] = gr.Markdown(elem_id="reports-msg")
    with gr.Row():
        c["folder"] = gr.Textbox(label="field suite folder (in the workspace)", value=rv.DEFAULT_SUITE_DIR,
                                 elem_id="reports-suite", scale=2)
        c["export_btn"] = gr.Button("Export field suite", elem_id="reports-export")
    c["exported"] = gr.Markdown(elem_id="reports-exported")
    c["cli"] = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"], elem_id="reports-cli")
    return ReportsTab(ctx, **c)  # type: ignore[arg-type]


def reports_tab(ctx: Context, shared: Shared) -> ReportsTab:
    """The tab, laid out and wired inside the caller's `gr.Tabs`. The queue arrives when the tab is opened (after
    login), never in the page's layout."""
    with gr.Tab("Reports", id="reports") as tab:
        t = _layout(ctx)
    filters = [t.status, t.source, t.since, t.until, t.sort, t.min_risk]
    listed = [t.queue, t.counts, t.picked, t.cli]
    tab.select(t.refresh, filters, listed, api_name="reports_on_open", api_visibility="private")
    t.refresh_btn.click(t.refresh, filters, listed, api_name="reports")
    gr.on([t.status.change, t.sort.change], t.refresh, filters, listed, api_name="reports_by_status",
          api_visibility="private")
    gr.on([t.source.submit, t.since.submit, t.until.submit, t.min_risk.submit], t.refresh, filters, listed,
          api_name="reports_filter", api_visibility="private")
    form = [t.decision, t.answers, t.abstain, t.note, t.decided]
    shared.page.load(t.first_load, None, t.reviewer, api_name="reports_first_load", api_visibility="private")
    t.queue.select(t.pick, None, [t.picked, t.detail, t.cli, *form], api_name="reports_pick",
                   api_visibility="private")
    t.picked.input(t.show, t.picked, [t.detail, t.cli, *form], api_name="reports_show", api_visibility="private")
    # The public /decide_report keeps its first five outputs (message, CLI, queue, counts, detail).
    t.decide_btn.click(t.record, [t.picked, t.decision, t.answers, t.abstain, t.reviewer, t.note, *filters],
                       [t.decided, t.cli, t.queue, t.counts, t.detail, t.picked, t.decision, t.answers, t.abstain,
                        t.note], api_name="decide_report")
    t.export_btn.click(t.export, [t.folder, *filters], [t.exported, t.cli, t.queue, t.counts],
                       api_name="export_reports")
    return t

"""The app's Reports tab: users' flagged conversations, reviewed and promoted into the field suite.

Widgets and wiring only, as in app.py: every handler calls one plain function of `workbench.reports.views`, which
returns what the tab shows and the equivalent `workbench reports` command. `build_app` calls `reports_tab` inside
its `gr.Tabs`; gradio is imported inside the function so that importing this module stays light.
"""

# No `from __future__ import annotations`: gradio reads the handlers' annotations (gr.Request, gr.SelectData).

from collections.abc import Callable
from typing import Any


def reports_tab(store: Any, *, who: Callable[[str, Any], str], errors: Callable[[Any], Any]) -> None:
    """The tab, laid out and wired inside the caller's `gr.Tabs`. `who(reviewer, request)`: the name a decision is
    recorded under (the logged-in user when there is one); `errors`: the app's wrapper that shows a handler's
    user-facing error in the page. Handlers carry a `reports_` prefix: gradio names an event after its function, and a
    private `refresh` here would take the app's public `/refresh` endpoint."""
    import gradio as gr
    import pandas as pd

    from workbench.reports import DECISIONS, STATUSES
    from workbench.reports import views as rv

    def table(rows: list[list[Any]]) -> Any:
        return pd.DataFrame(rows, columns=rv.QUEUE_COLUMNS)

    @errors
    def reports_refresh(status: str, source: str, since: str, until: str) -> tuple[Any, ...]:
        v = rv.queue_view(store, status, source, since, until)
        return table(v.rows), v.counts, gr.Dropdown(choices=v.ids), v.cli

    @errors
    def reports_show(report_id: str) -> tuple[str, str]:
        return rv.report_view(store, report_id) if report_id else ("", "")

    def reports_pick(evt: gr.SelectData) -> tuple[Any, ...]:
        row = evt.row_value or []
        report_id = str(row[0]) if row else ""
        return (report_id, *reports_show(report_id))

    @errors
    def reports_record(report_id: str, decision: str, answers: str, abstain: bool, reviewer: str, note: str,
                       status: str, source: str, since: str, until: str, request: gr.Request) -> tuple[Any, ...]:
        message, cli = rv.decide_view(store, report_id, decision, answers, abstain, who(reviewer, request), note)
        v = rv.queue_view(store, status, source, since, until)
        return message, cli, table(v.rows), v.counts, rv.report_view(store, report_id)[0]

    @errors
    def reports_export(folder: str, status: str, source: str, since: str, until: str) -> tuple[Any, ...]:
        message, cli = rv.export_view(store, folder)
        v = rv.queue_view(store, status, source, since, until)
        return message, cli, table(v.rows), v.counts

    with gr.Tab("Reports", id="reports") as tab:
        with gr.Row():
            status = gr.Dropdown(label="status", choices=["", *STATUSES], value="", elem_id="reports-status")
            source = gr.Textbox(label="source file contains", elem_id="reports-source")
            since = gr.Textbox(label="since (ISO date, UTC)", elem_id="reports-since")
            until = gr.Textbox(label="until (ISO date, UTC)", elem_id="reports-until")
            refresh_btn = gr.Button("Refresh", variant="primary", elem_id="reports-refresh")
        counts = gr.Markdown(elem_id="reports-counts")
        queue = gr.Dataframe(table([]), label="reports (click one)", interactive=False, wrap=True, max_height=360,
                             elem_id="reports-table", column_widths=["14%", "8%", "13%", "13%", "38%", "5%", "9%"])
        with gr.Row():
            picked = gr.Dropdown(label="report", choices=[], allow_custom_value=True, elem_id="reports-pick", scale=2)
            reviewer = gr.Textbox(label="reviewer", elem_id="reports-reviewer")
        detail = gr.Markdown(elem_id="reports-detail")
        with gr.Row():
            decision = gr.Radio(label="decision", choices=list(DECISIONS), value="hallucinated",
                                elem_id="reports-decision")
            answers = gr.Textbox(label="reference answer (aliases separated by ;)", elem_id="reports-answers",
                                 scale=2)
            abstain = gr.Checkbox(label="should abstain", elem_id="reports-abstain")
        with gr.Row():
            note = gr.Textbox(label="note", elem_id="reports-note", scale=2)
            decide_btn = gr.Button("Record decision", variant="primary", elem_id="reports-decide")
        decided = gr.Markdown(elem_id="reports-msg")
        with gr.Row():
            folder = gr.Textbox(label="field suite folder (in the workspace)", value=rv.DEFAULT_SUITE_DIR,
                                elem_id="reports-suite", scale=2)
            export_btn = gr.Button("Export field suite", elem_id="reports-export")
        exported = gr.Markdown(elem_id="reports-exported")
        cli = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"], elem_id="reports-cli")

    filters = [status, source, since, until]
    refresh_outputs = [queue, counts, picked, cli]
    # The queue arrives when the tab is opened (after login), never in the page's layout.
    tab.select(reports_refresh, filters, refresh_outputs, api_visibility="private")
    refresh_btn.click(reports_refresh, filters, refresh_outputs, api_name="reports")
    status.change(reports_refresh, filters, refresh_outputs, api_visibility="private")
    gr.on([source.submit, since.submit, until.submit], reports_refresh, filters, refresh_outputs,
          api_visibility="private")
    queue.select(reports_pick, None, [picked, detail, cli], api_visibility="private")
    picked.input(reports_show, picked, [detail, cli], api_visibility="private")
    decide_btn.click(reports_record, [picked, decision, answers, abstain, reviewer, note, *filters],
                     [decided, cli, queue, counts, detail], api_name="decide_report")
    export_btn.click(reports_export, [folder, *filters], [exported, cli, queue, counts], api_name="export_reports")

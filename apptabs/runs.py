"""The Runs tab: every run with its filters, the shares plot, per-tag charts, a workspace file and the glossary."""

# No `from __future__ import annotations`: gradio reads the handlers' annotations at wiring time.

from dataclasses import dataclass
from typing import Any

import gradio as gr

from apptabs.common import Context, Shared, Updates, place, ui_errors
from workbench import glossary, views
from workbench.html import plots
from workbench.regression.stats import METRICS
from workbench.safepath import read_text_inside


@dataclass(frozen=True)
class RunsTab:
    ctx: Context
    text: gr.Textbox
    status: gr.Dropdown
    suite: gr.Dropdown
    table: gr.Dataframe
    note: gr.Markdown
    unfinished: gr.Checkbox
    shares: gr.HTML
    plot_runs: gr.Dropdown
    metric: gr.Dropdown
    chart: gr.HTML
    cli: gr.Textbox
    file_path: gr.Textbox
    file_btn: gr.Button
    file_text: gr.Code
    file_md: gr.Markdown

    @ui_errors
    def refresh(self, text: str, status: str, suite: str) -> Updates:
        store = self.ctx.store
        filt = views.run_filters(store)
        return {self.table: self.runs(text, status, suite), self.status: gr.Dropdown(choices=["", *filt["status"]]),
                self.suite: gr.Dropdown(choices=["", *filt["suite"]]), self.plot_runs: self.ctx.run_picker(),
                self.cli: views.cli_runs(self.ctx.ws), self.note: views.interrupted_note(store)}

    @ui_errors
    def first_load(self, text: str, status: str, suite: str) -> Updates:
        """The tab's first content (after login): the runs, the newest finished ones plotted, the shares."""
        plotted = gr.Dropdown(choices=views.run_choices(self.ctx.store), value=views.finished_runs(self.ctx.store)[:4])
        return {**self.refresh(text, status, suite), self.plot_runs: plotted, self.shares: self.shares_chart(False)}

    @ui_errors
    def runs(self, text: str, status: str, suite: str) -> Any:
        return views.runs_table(self.ctx.store, text=text or "", status=status or "", suite=suite or "")

    @ui_errors
    def tag_chart(self, run_ids: list[str] | None, metric: str) -> str:
        return plots.tag_metrics_chart(self.ctx.store, run_ids or [], metric)

    @ui_errors
    def shares_chart(self, unfinished: bool) -> str:
        return plots.shares_plot_html(plots.run_shares(self.ctx.store, include_unfinished=bool(unfinished)))

    @ui_errors
    def workspace_file(self, path: str) -> Updates:
        """A Markdown file (a gate's report.md) is rendered, any other text file shown as code."""
        text = read_text_inside(self.ctx.ws, path or "")
        md = (path or "").strip().lower().endswith(".md")
        return {self.file_text: "" if md else text, self.file_md: text if md else ""}


def _layout(ctx: Context, shared: Shared) -> RunsTab:
    with gr.Row():
        text = gr.Textbox(label="filter (run id, candidate name, model, adapter)", scale=3)
        status = gr.Dropdown(label="status", choices=[""], value="", allow_custom_value=True, scale=1)
        suite = gr.Dropdown(label="suite", choices=[""], value="", allow_custom_value=True, scale=1)
        place(shared.refresh)
    table = gr.Dataframe(views.empty(views.RUN_COLUMNS), label="runs", interactive=False, elem_id="runs-table",
                         wrap=True, max_height=420, column_widths=["15%", "10%", "5%", "24%", "6%", "4%", "6%",
                                                                   "7%", "6%", "4%", "13%"])
    note = gr.Markdown(elem_id="runs-note")
    with gr.Row():
        unfinished = gr.Checkbox(label="include unfinished runs in the shares plot", value=False,
                                 elem_id="shares-unfinished")
    shares = gr.HTML(elem_id="shares-plot")
    with gr.Row():
        plot_runs = gr.Dropdown(label="runs to plot", multiselect=True, choices=[], allow_custom_value=True, scale=3)
        metric = gr.Dropdown(label="metric", choices=list(METRICS), value="incorrect", scale=1)
    chart = gr.HTML(elem_id="tag-chart")
    cli = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"])
    with gr.Accordion("workspace file", open=False):
        file_path = gr.Textbox(label="path inside the workspace (e.g. reports/GATE/report.md)")
        file_btn = gr.Button("Open")
        file_text = gr.Code(label="content", interactive=False)
        file_md = gr.Markdown(elem_id="file-md")
    with gr.Accordion("glossary: categories, transitions, gates, measures", open=False):
        gr.Markdown(glossary.glossary_markdown(), elem_id="glossary")
    return RunsTab(ctx, text, status, suite, table, note, unfinished, shares, plot_runs, metric, chart, cli,
                   file_path, file_btn, file_text, file_md)


def runs_tab(ctx: Context, shared: Shared) -> RunsTab:
    """The tab, laid out and wired inside the caller's `gr.Tabs`."""
    with gr.Tab("Runs", id="runs"):
        t = _layout(ctx, shared)
    filters = [t.text, t.status, t.suite]
    # The public /refresh keeps its first output (the table) and its last (the note on interrupted runs).
    refreshed = [t.table, t.status, t.suite, t.plot_runs, t.cli, t.note]
    shared.refresh.click(t.refresh, filters, refreshed, api_name="refresh")
    shared.page.load(t.first_load, filters, [*refreshed, t.shares], api_name="runs_first_load",
                     api_visibility="private")
    t.unfinished.change(t.shares_chart, t.unfinished, t.shares, api_name="run_shares")
    t.text.submit(t.runs, filters, t.table, api_name="runs")
    t.status.change(t.runs, filters, t.table, api_name="runs_by_status", api_visibility="private")
    t.suite.change(t.runs, filters, t.table, api_name="runs_by_suite", api_visibility="private")
    t.plot_runs.change(t.tag_chart, [t.plot_runs, t.metric], t.chart, api_name="tag_metrics")
    t.metric.change(t.tag_chart, [t.plot_runs, t.metric], t.chart, api_name="tag_metrics_by_metric",
                    api_visibility="private")
    t.file_btn.click(t.workspace_file, t.file_path, [t.file_text, t.file_md], api_name="workspace_file")
    return t

"""The Compare tab: a baseline and a candidate run side by side, their broken probes, and the gate recorded."""

# No `from __future__ import annotations`: gradio reads the handlers' annotations (gr.SelectData) at wiring time.

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from apptabs.common import Context, Shared, Updates, place, ui_errors
from workbench import views
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class CompareTab:
    ctx: Context
    shared: Shared
    tag: gr.Dropdown
    transition: gr.Dropdown
    category: gr.Dropdown
    compare_btn: gr.Button
    summary: gr.HTML
    delta_plot: gr.HTML
    metrics: gr.Dataframe
    transitions: gr.Dataframe
    search: gr.Textbox
    size: gr.Dropdown
    prev: gr.Button
    page: gr.Number
    next: gr.Button
    page_label: gr.Markdown
    all_probes: gr.State  # the pair's filtered probe list; search and paging read it
    probes: gr.Dataframe
    gate_btn: gr.Button
    gate_msg: gr.Markdown
    gate_report: gr.Markdown
    cli: gr.Textbox

    def default_pair(self) -> Updates:
        """The latest gated pair of finished runs (`views.default_pair`), picked on the page's first load."""
        base, cand = views.default_pair(self.ctx.store)
        return {self.shared.baseline: self.ctx.run_picker(base, pick=True),
                self.shared.candidate: self.ctx.run_picker(cand, pick=True)}

    @ui_errors
    def pickers(self) -> Updates:
        return {self.shared.baseline: self.ctx.run_picker(), self.shared.candidate: self.ctx.run_picker()}

    def compare(self, baseline: str, candidate: str, tag: str, transition: str, category: str, query: str,
                size: float) -> Updates:
        # A refusal comes back as the summary (views.compare_or_refusal): every output is replaced, so no
        # earlier pair's verdict or recorded-gate line stays beside it, and no modal covers the page.
        store = self.ctx.store
        v = views.compare_or_refusal(store, baseline or "", candidate or "", tag=tag or "",
                                     transition=transition or views.ANY_CHANGE, category=category or "")
        f = views.compare_filters(store, baseline, candidate) if v.verdict else {"tag": [], "category": []}
        pg = views.page_probes(v.probes, query=query or "", page=1, size=int(size or 50))
        return {self.summary: v.summary_html, self.metrics: v.metrics,
                self.transitions: views.transition_heatmap(v.transitions), self.probes: views.styled_probes(pg.table),
                self.cli: v.cli, self.tag: gr.Dropdown(choices=["", *f["tag"]]),
                self.category: gr.Dropdown(choices=["", *f["category"]]),
                self.shared.probe: gr.Dropdown(choices=pg.matching_ids), self.gate_msg: "",
                self.shared.listed: pg.matching_ids, self.delta_plot: v.delta_plot, self.all_probes: v.probes,
                self.page: pg.page, self.page_label: pg.label, self.gate_report: ""}

    def compare_preselected(self, baseline: str, candidate: str, tag: str, transition: str, category: str,
                            query: str, size: float) -> Any:
        """The pair picked on load, compared: the tab shows it without a click. No pair (a workspace without two
        finished runs): the tab is left as it is, not given a refusal nobody asked for."""
        if not baseline or not candidate:
            return gr.skip()
        return self.compare(baseline, candidate, tag, transition, category, query, size)

    @ui_errors
    def probe_page(self, table: Any, query: str, page: float, size: float, by: int = 0) -> Updates:
        """Search / page through the pair's probe list (views.page_probes) without comparing again."""
        df = table if table is not None else views.empty(views.PROBE_COLUMNS)
        pg = views.page_probes(df, query=query or "", page=int(page or 1) + by, size=int(size or 50))
        return {self.probes: views.styled_probes(pg.table), self.page: pg.page, self.page_label: pg.label,
                self.shared.listed: pg.matching_ids, self.shared.probe: gr.Dropdown(choices=pg.matching_ids)}

    def record_gate(self, baseline: str, candidate: str) -> Updates:
        """Record the pair's gate as `workbench regress` does (the verdict block then shows it: `verdict_block`)."""
        from workbench.gating import gate_as_regress

        store, ws = self.ctx.store, self.ctx.ws
        try:
            if not baseline or not candidate:
                raise WorkbenchError("pick a baseline and a candidate run")
            # as `workbench regress` does (the CLI line shown beside it): the guard set and the field suite beside
            rec = gate_as_regress(store, baseline, candidate)
        except (WorkbenchError, ValueError, KeyError) as e:
            return {self.gate_msg: views.refusal(e), self.cli: "", self.gate_report: ""}
        report = Path(rec.reports["html"]).resolve().relative_to(ws.resolve())
        return {self.gate_msg: f"recorded gate `{rec.id}`: **{rec.result.verdict}**; report `{report}`",
                self.cli: views.cli_regress(ws, baseline, candidate),
                self.gate_report: Path(rec.reports["markdown"]).read_text(), self.shared.gate: rec.id}

    def verdict_block(self, baseline: str, candidate: str, tag: str, transition: str, category: str) -> Any:
        """The verdict block again, after a gate was recorded: it now reads the recorded gate."""
        if not baseline or not candidate:
            return gr.skip()
        return views.compare_or_refusal(self.ctx.store, baseline, candidate, tag=tag or "",
                                        transition=transition or views.ANY_CHANGE, category=category or "").summary_html

    def pick_probe(self, evt: gr.SelectData) -> Updates:
        """A click on a probe's row opens it in Probe detail."""
        row = evt.row_value or []
        return {self.shared.probe: str(row[0]) if row else "", self.shared.tabs: gr.Tabs(selected="detail")}


def _layout(ctx: Context, shared: Shared) -> CompareTab:
    with gr.Row():
        place(shared.baseline)
        place(shared.candidate)
    with gr.Row():
        tag = gr.Dropdown(label="tag", choices=[""], value="", allow_custom_value=True)
        transition = gr.Dropdown(label="grade transition", choices=list(views.TRANSITION_FILTERS),
                                 value=views.ANY_CHANGE, elem_id="transition")
        category = gr.Dropdown(label="attribution category", choices=[""], value="", allow_custom_value=True)
        compare_btn = gr.Button("Compare", variant="primary", elem_id="compare-btn")
    summary = gr.HTML(elem_id="compare-summary")
    delta_plot = gr.HTML(elem_id="delta-plot")
    with gr.Row():
        metrics = gr.Dataframe(views.empty(views.METRIC_COLUMNS), interactive=False, wrap=True,
                               column_widths=["30%", "14%", "14%", "14%", "14%", "14%"],
                               label="metric deltas (points, paired bootstrap CI)")
        transitions = gr.Dataframe(views.empty(views.TRANSITION_COLUMNS), interactive=False,
                                   label="transition matrix (rows: baseline; red worse, green fixed, amber now "
                                         "abstains)", elem_id="transitions")
    with gr.Row(equal_height=True):
        search = gr.Textbox(label="search the listed probes (any column)", elem_id="probe-search", scale=3)
        size = gr.Dropdown(label="rows per page", choices=list(views.PAGE_SIZES), value=50, elem_id="page-size",
                           scale=1)
        prev = gr.Button("◀ page", elem_id="page-prev", scale=1)
        page = gr.Number(label="page", value=1, precision=0, minimum=1, elem_id="page-number", scale=1)
        nxt = gr.Button("page ▶", elem_id="page-next", scale=1)
        page_label = gr.Markdown(elem_id="page-label")
    all_probes = gr.State(None)
    place(shared.listed)
    place(shared.gate)
    place(shared.show_pair)
    probes = gr.Dataframe(views.empty(views.PROBE_COLUMNS), interactive=False, elem_id="probes-table",
                          label="probes: broken first, then by id (click a row for its detail)", wrap=True,
                          column_widths=["7%", "13%", "8%", "11%", "9%", "14%", "9%", "14%", "7%", "8%"],
                          pinned_columns=1, max_height=900)
    with gr.Row():
        gate_btn = gr.Button("Record gate verdict")
        gate_msg = gr.Markdown(elem_id="gate-msg")
    with gr.Accordion("recorded gate report", open=False):
        gate_report = gr.Markdown(elem_id="gate-report")
    cli = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"])
    return CompareTab(ctx, shared, tag, transition, category, compare_btn, summary, delta_plot, metrics, transitions,
                      search, size, prev, page, nxt, page_label, all_probes, probes, gate_btn, gate_msg, gate_report,
                      cli)


def compare_tab(ctx: Context, shared: Shared) -> CompareTab:
    """The tab, laid out and wired inside the caller's `gr.Tabs`."""
    with gr.Tab("Compare", id="compare"):
        t = _layout(ctx, shared)
    s = shared
    # The public /compare keeps its outputs in this order (API clients read them by position).
    outputs = [t.summary, t.metrics, t.transitions, t.probes, t.cli, t.tag, t.category, s.probe, t.gate_msg, s.listed,
               t.delta_plot, t.all_probes, t.page, t.page_label, t.gate_report]
    inputs = [s.baseline, s.candidate, t.tag, t.transition, t.category, t.search, t.size]
    # One queue for every compare: a click (or a filter) made while the on-load compare runs comes after it, so
    # the on-load result never lands over the user's.
    s.page.load(t.default_pair, None, [s.baseline, s.candidate], api_name="compare_default_pair",
                api_visibility="private").then(t.compare_preselected, inputs, outputs, api_name="compare_on_load",
                                               api_visibility="private", concurrency_id="compare")
    s.show_pair.change(t.compare_preselected, inputs, outputs, api_name="compare_opened_gate", api_visibility="private",
                       concurrency_id="compare")  # a gate opened from the Decisions tab: its pair, compared
    s.refresh.click(t.pickers, None, [s.baseline, s.candidate], api_name="compare_pickers", api_visibility="private")
    t.compare_btn.click(t.compare, inputs, outputs, api_name="compare", concurrency_id="compare")
    for dd, name in ((t.tag, "tag"), (t.transition, "transition"), (t.category, "category")):
        dd.input(t.compare, inputs, outputs, api_name=f"compare_by_{name}", api_visibility="private",
                 concurrency_id="compare")
    paging = [t.all_probes, t.search, t.page, t.size]
    paged = [t.probes, t.page, t.page_label, s.listed, s.probe]
    t.search.change(t.probe_page, paging, paged, api_name="probes_search", api_visibility="private")
    t.size.input(t.probe_page, paging, paged, api_name="probes_page_size", api_visibility="private")
    t.page.submit(t.probe_page, paging, paged, api_name="probes_page", api_visibility="private")
    for btn, by, name in ((t.prev, -1, "probes_page_prev"), (t.next, 1, "probes_page_next")):
        btn.click(functools.partial(t.probe_page, by=by), paging, paged, api_name=name, api_visibility="private")
    t.gate_btn.click(t.record_gate, [s.baseline, s.candidate], [t.gate_msg, t.cli, t.gate_report, s.gate],
                     api_name="gate").then(t.verdict_block, inputs[:5], t.summary, api_name="gate_verdict_block",
                                           api_visibility="private", concurrency_id="compare")
    t.probes.select(t.pick_probe, None, [s.probe, s.tabs], api_name="probes_pick", api_visibility="private")
    return t

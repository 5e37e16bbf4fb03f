"""The Probe detail tab: one probe across the selected pair, stepped through in the order Compare lists them."""

# No `from __future__ import annotations`: gradio reads the handlers' annotations at wiring time.

import functools
from dataclasses import dataclass

import gradio as gr

from apptabs.common import Context, Shared, Updates, place, ui_errors
from workbench import views
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class DetailTab:
    ctx: Context
    shared: Shared
    show: gr.Button
    prev: gr.Button
    next: gr.Button
    pair: gr.Markdown
    html: gr.HTML

    @ui_errors
    def detail(self, probe_id: str, baseline: str, candidate: str) -> str:
        return views.probe_detail(self.ctx.store, probe_id or "", [baseline, candidate])

    def pair_changed(self, probe_id: str, baseline: str, candidate: str) -> str:
        """The pair changed under the probe shown: shown again for the new pair, or cleared where the new pair
        cannot show it (no modal over the Compare tab the user is working in)."""
        try:
            return views.probe_detail(self.ctx.store, probe_id, [baseline, candidate]) if probe_id else ""
        except (WorkbenchError, ValueError, KeyError):
            return ""

    @ui_errors
    def opened(self, probe_id: str, baseline: str, candidate: str, listed: list[str]) -> Updates:
        """The tab opened: every probe of the pair on offer (Compare's listed ones first), the pair named, and, when
        no probe is shown yet, the first one shown: never a dead end with nothing to pick."""
        choices = views.detail_choices(self.ctx.store, baseline or "", candidate or "", listed or [])
        if not choices:
            return {self.pair: "pick a baseline and a candidate run in **Compare** (or open a gate from "
                               "**Decisions**): the detail shows one probe across that pair",
                    self.shared.probe: gr.Dropdown(choices=[])}
        pair = (f"baseline `{baseline}` · candidate `{candidate}` · {len(choices)} probes "
                f"({len(listed or [])} listed in Compare first); the pair is picked in Compare")
        return {self.pair: pair, self.shared.probe: gr.Dropdown(choices=choices, value=probe_id or choices[0])}

    @ui_errors
    def step(self, ids: list[str], current: str, by: int) -> Updates:
        """The next (or previous) listed probe; showing it is the probe picker's change event."""
        return {self.shared.probe: views.step_probe(ids or [], current or "", by)}


def detail_tab(ctx: Context, shared: Shared) -> DetailTab:
    """The tab, laid out and wired inside the caller's `gr.Tabs`."""
    with gr.Tab("Probe detail", id="detail") as tab:
        with gr.Row():
            place(shared.probe)
            show = gr.Button("Show")
            prev = gr.Button("◀ previous (k, ←)", elem_id="probe-prev")
            nxt = gr.Button("next (j, →) ▶", elem_id="probe-next")
        pair_line = gr.Markdown(elem_id="detail-pair")
        html = gr.HTML(elem_id="probe-detail")
    t = DetailTab(ctx, shared, show, prev, nxt, pair_line, html)
    tab.select(t.opened, [shared.probe, shared.baseline, shared.candidate, shared.listed], [t.pair, shared.probe],
               api_name="probe_detail_opened", api_visibility="private")
    pair = [shared.probe, shared.baseline, shared.candidate]
    t.show.click(t.detail, pair, t.html, api_name="probe_detail")
    # A click in Compare, a step or a typed id changes the picked probe, and that shows it.
    shared.probe.change(t.detail, pair, t.html, api_name="probe_detail_on_pick", api_visibility="private")
    gr.on([shared.baseline.change, shared.candidate.change], t.pair_changed, pair, t.html,
          api_name="probe_detail_on_pair", api_visibility="private")
    for btn, by, name in ((t.prev, -1, "probe_prev"), (t.next, 1, "probe_next")):
        btn.click(functools.partial(t.step, by=by), [shared.listed, shared.probe], shared.probe, api_name=name,
                  api_visibility="private")
    return t

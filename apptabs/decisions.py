"""The Decisions tab, the app's first screen: the gates awaiting a release decision (newest first) with their
recorded verdicts, named candidates and trade-offs; one click shows a gate's evidence, one more signs it off or
blocks it; decided gates below, with who, when and any override. Its handlers call `workbench.decisions`."""

# No `from __future__ import annotations`: gradio reads the handlers' annotations (gr.Request) at wiring time.

from dataclasses import dataclass
from typing import Any

import gradio as gr

from apptabs.common import Context, Shared, Updates, reviewer_box, ui_errors
from workbench import decisions, views
from workbench.errors import WorkbenchError
from workbench.html import signoff


@dataclass(frozen=True)
class DecisionsTab:
    ctx: Context
    shared: Shared
    summary: gr.Markdown
    awaiting: gr.Dataframe
    gate: gr.Dropdown
    refresh_btn: gr.Button
    compare_btn: gr.Button
    evidence: gr.HTML
    note: gr.Markdown
    reviewer: gr.Textbox
    reason: gr.Textbox
    override: gr.Checkbox
    override_reason: gr.Textbox
    confirm: gr.Checkbox
    signoff_btn: gr.Button
    block_btn: gr.Button
    msg: gr.Markdown
    decided: gr.Dataframe
    cli: gr.Textbox

    def listed(self, gate_id: str | None = None) -> Updates:
        """The queue's tables and the gate picker (on `gate_id`, else the newest awaiting gate), that gate's evidence
        and a clean decision form."""
        q = decisions.decision_queue(self.ctx.store)
        gate = gate_id if gate_id is not None else q.first()
        return {self.summary: decisions.queue_summary(q), self.awaiting: decisions.awaiting_table(q),
                self.decided: decisions.decided_table(q),
                self.gate: gr.Dropdown(choices=decisions.gate_choices(q), value=gate or None), **self.show(gate)}

    @ui_errors
    def first_load(self, request: gr.Request) -> Updates:
        return {**self.listed(), self.reviewer: reviewer_box(request)}

    def show(self, gate_id: str) -> Updates:
        """One gate's evidence and what a sign-off on it needs; the form is cleared (nothing carries over from the
        gate shown before)."""
        try:
            html = decisions.evidence_html(self.ctx.store, gate_id or "")
            c = decisions.card(self.ctx.store, gate_id) if gate_id else None
            note = signoff.signoff_note(self.ctx.store, c.gate.row.candidate_run, gate_id) if c else ""
        except (WorkbenchError, ValueError, KeyError) as e:
            html, note = "", views.refusal(e)
        return {self.evidence: html, self.note: note, self.reason: "", self.override: False,
                self.override_reason: "", self.confirm: False, self.msg: ""}

    def pick_row(self, evt: gr.SelectData) -> Updates:
        """A click on a gate's row shows it."""
        row = evt.row_value or []
        gate = str(row[0]) if row else ""
        return {self.gate: gate, **self.show(gate)}

    def decide(self, gate_id: str, decision: str, reviewer: str, reason: str, override: bool, override_reason: str,
               confirm: bool, request: gr.Request) -> Updates:
        try:  # unticked, the override text is no override: the library then refuses a FAIL gate by name
            done = decisions.decide(self.ctx.store, gate_id or "", decision=decision,
                                    reviewer=self.ctx.who(reviewer, request), reason=reason or "",
                                    override_reason=(override_reason or "") if override and decision == "signoff"
                                    else None,
                                    confirm=bool(confirm))
        except (WorkbenchError, ValueError, KeyError) as e:  # a message beside the form; the queue stays
            return {self.msg: views.refusal(e)}
        # the next gate awaiting a decision is shown at once; the line says what was recorded on the last one
        return {**self.listed(done.next_gate or gate_id), self.msg: done.message, self.cli: done.cli}

    def signoff(self, gate_id: str, reviewer: str, reason: str, override: bool, override_reason: str,
                confirm: bool, request: gr.Request) -> Updates:
        return self.decide(gate_id, "signoff", reviewer, reason, override, override_reason, confirm, request)

    def block(self, gate_id: str, reviewer: str, reason: str, override: bool, override_reason: str, confirm: bool,
              request: gr.Request) -> Updates:
        return self.decide(gate_id, "block", reviewer, reason, override, override_reason, confirm, request)

    @ui_errors
    def open_in_compare(self, gate_id: str) -> Updates:
        """The gate's pair in the Compare tab, compared (per-probe evidence, filters, probe detail)."""
        g = decisions.card(self.ctx.store, gate_id or "").gate.row
        return {self.shared.baseline: self.ctx.run_picker(g.baseline_run, pick=True),
                self.shared.candidate: self.ctx.run_picker(g.candidate_run, pick=True),
                self.shared.show_pair: g.id, self.shared.tabs: gr.Tabs(selected="compare")}


def _layout(ctx: Context, shared: Shared) -> DecisionsTab:
    c: dict[str, object] = {}  # the tab's components by field name, in the page's order
    c["summary"] = gr.Markdown(elem_id="queue-summary")
    c["awaiting"] = gr.Dataframe(decisions.awaiting_table(decisions.DecisionQueue([], [])), interactive=False,
                                 wrap=True, elem_id="queue-awaiting", max_height=330,
                                 label="awaiting a decision (click a gate)",
                                 column_widths=["17%", "11%", "7%", "25%", "9%", "9%", "13%", "9%"])
    with gr.Row():
        with gr.Column(scale=3):  # the gate's evidence beside the form that decides it: both on the first screen
            with gr.Row(equal_height=True):
                c["gate"] = gr.Dropdown(label="gate", choices=[], allow_custom_value=True, elem_id="queue-gate",
                                        scale=4, elem_classes=["wb-run-pick"])
                c["refresh_btn"] = gr.Button("Refresh", scale=1, elem_id="queue-refresh")
            c["evidence"] = gr.HTML(elem_id="queue-evidence")
            c["compare_btn"] = gr.Button("Open its probes in Compare", elem_id="queue-compare", size="sm")
        with gr.Column(scale=2):
            with gr.Row():
                c["signoff_btn"] = gr.Button("Sign off", variant="primary", elem_id="queue-signoff")
                c["block_btn"] = gr.Button("Block", variant="stop", elem_id="queue-block")
            c["msg"] = gr.Markdown(elem_id="queue-msg")
            c["reviewer"] = gr.Textbox(label="reviewer", elem_id="queue-reviewer")
            c["reason"] = gr.Textbox(label="reason (recorded with the decision)", elem_id="queue-reason", lines=2)
            c["note"] = gr.Markdown(elem_id="queue-note")
            c["override"] = gr.Checkbox(label="override: sign off although this gate is FAIL or INCONCLUSIVE",
                                        elem_id="queue-override")
            c["override_reason"] = gr.Textbox(label="override reason (required with override; recorded)",
                                              elem_id="queue-override-reason")
            c["confirm"] = gr.Checkbox(label="confirm: grades changed since this gate", elem_id="queue-confirm")
    c["decided"] = gr.Dataframe(decisions.decided_table(decisions.DecisionQueue([], [])), interactive=False,
                                wrap=True, elem_id="queue-decided", max_height=330,
                                label="decided (latest first; click one for its evidence)",
                                column_widths=["18%", "7%", "27%", "8%", "9%", "13%", "18%"])
    c["cli"] = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"], elem_id="queue-cli")
    return DecisionsTab(ctx, shared, **c)  # type: ignore[arg-type]


def decisions_tab(ctx: Context, shared: Shared) -> DecisionsTab:
    """The tab, laid out and wired inside the caller's `gr.Tabs`; first, so the page opens on it."""
    with gr.Tab("Decisions", id="decisions"):
        t = _layout(ctx, shared)
    private: dict[str, Any] = {"api_visibility": "private"}
    shown = [t.evidence, t.note, t.reason, t.override, t.override_reason, t.confirm, t.msg]
    listed = [t.summary, t.awaiting, t.decided, t.gate, *shown]
    shared.page.load(t.first_load, None, [*listed, t.reviewer], api_name="decisions_first_load", **private)
    t.refresh_btn.click(lambda g: t.listed(g or None), t.gate, listed, api_name="decisions", **private)
    t.gate.input(t.show, t.gate, shown, api_name="decision_evidence", **private)
    for table, name in ((t.awaiting, "decision_pick_awaiting"), (t.decided, "decision_pick_decided")):
        table.select(t.pick_row, None, [t.gate, *shown], api_name=name, **private)
    form = [t.gate, t.reviewer, t.reason, t.override, t.override_reason, t.confirm]
    t.signoff_btn.click(t.signoff, form, [*listed, t.cli], api_name="decide_signoff")
    t.block_btn.click(t.block, form, [*listed, t.cli], api_name="decide_block")
    t.compare_btn.click(t.open_in_compare, t.gate, [shared.baseline, shared.candidate, shared.show_pair, shared.tabs],
                        api_name="decision_to_compare", **private)
    return t

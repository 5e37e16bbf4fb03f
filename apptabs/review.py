"""The Review tab: a reviewer's overrides of a grade or an attribution, the release decision on a recorded gate,
and the append-only log of both."""

# No `from __future__ import annotations`: gradio reads the handlers' annotations (gr.Request) at wiring time.

from dataclasses import dataclass
from typing import Any

import gradio as gr

from apptabs.common import Context, Shared, Updates, reviewer_box, ui_errors
from workbench import reviews, views
from workbench.attribution.types import CATEGORIES
from workbench.errors import WorkbenchError
from workbench.html import signoff
from workbench.types import Verdict

VERDICTS = [str(v) for v in Verdict]


@dataclass(frozen=True)
class ReviewTab:
    ctx: Context
    reviewer: gr.Textbox
    run: gr.Dropdown
    probe: gr.Textbox
    target: gr.Radio
    value: gr.Dropdown
    reason: gr.Textbox
    override_btn: gr.Button
    override_msg: gr.Markdown
    release_run: gr.Dropdown
    gate: gr.Dropdown
    decision: gr.Radio
    release_reason: gr.Textbox
    confirm: gr.Checkbox
    override: gr.Checkbox
    override_reason: gr.Textbox
    release_btn: gr.Button
    note: gr.Markdown
    release_msg: gr.Markdown
    refresh_btn: gr.Button
    log: gr.Dataframe
    gates: gr.Dataframe
    cli: gr.Textbox

    @ui_errors
    def first_load(self, request: gr.Request) -> Updates:
        """The latest gated candidate picked, the log, and the signed-in user as the reviewer (after login)."""
        cand = views.default_pair(self.ctx.store)[1]
        return {self.run: self.ctx.run_picker(cand, pick=True), **self.review_log(),
                self.reviewer: reviewer_box(request)}

    @ui_errors
    def review_log(self) -> Updates:
        return {self.log: views.reviews_table(self.ctx.store), self.gates: views.gate_history_table(self.ctx.store)}

    def value_choices(self, target: str) -> Any:
        opts = VERDICTS if target == "verdict" else list(CATEGORIES)
        return gr.Dropdown(choices=opts, value=opts[0])

    def record_override(self, reviewer: str, run_id: str, probe_id: str, target: str, value: str, reason: str,
                        request: gr.Request) -> Updates:
        store = self.ctx.store
        try:
            name = self.ctx.who(reviewer, request)
            r = reviews.record_override(store, reviewer=name, run_id=run_id or "", probe_id=(probe_id or "").strip(),
                                        target=target, new_value=value or "", reason=reason)
        except (WorkbenchError, ValueError, KeyError) as e:  # a message beside the form; the log stays
            return {self.override_msg: views.refusal(e)}
        msg = f"recorded #{r.id}: {r.target} of `{r.probe_id}` in `{r.run_id}`: {r.old_value} → {r.new_value}"
        return {self.override_msg: msg, self.log: views.reviews_table(store),
                self.cli: views.cli_review(self.ctx.ws, r.run_id, target=target, value=r.new_value, reason=r.reason,
                                           probe_id=r.probe_id, reviewer=name)}

    def record_release(self, reviewer: str, run_id: str, gate_id: str, decision: str, reason: str, confirm: bool,
                       override: bool, override_reason: str, request: gr.Request) -> Updates:
        store = self.ctx.store
        try:  # unticked, the override text is no override: the library then refuses a FAIL gate by name
            name = self.ctx.who(reviewer, request)
            r = reviews.record_release(store, reviewer=name, run_id=run_id or "", decision=decision, reason=reason,
                                       gate_id=gate_id or "", confirm=bool(confirm),
                                       override_reason=(override_reason or "") if override else None)
        except (WorkbenchError, ValueError, KeyError) as e:
            return {self.release_msg: views.refusal(e)}
        return {self.release_msg: signoff.recorded_line(r), **self.review_log(),
                self.cli: views.cli_review(self.ctx.ws, r.run_id, target="release", value=decision, reason=r.reason,
                                           reviewer=name, gate_id=r.gate_id, confirm=bool(confirm),
                                           override_reason=r.override_reason)}

    def signoff_form(self, run_id: str) -> Updates:
        """The candidate's recorded gates (latest preselected) and what a sign-off on it would be about."""
        try:
            choices = signoff.gate_choices(self.ctx.store, run_id or "")
            gate = choices[0][1] if choices else ""
            return {self.gate: gr.Dropdown(choices=choices, value=gate or None),
                    self.note: signoff.signoff_note(self.ctx.store, run_id or "", gate)}
        except (WorkbenchError, ValueError, KeyError) as e:
            return {self.gate: gr.Dropdown(choices=[], value=None), self.note: views.refusal(e)}

    def signoff_note(self, run_id: str, gate_id: str) -> str:
        try:
            return signoff.signoff_note(self.ctx.store, run_id or "", gate_id or "")
        except (WorkbenchError, ValueError, KeyError) as e:
            return views.refusal(e)


def _layout(ctx: Context) -> ReviewTab:
    c: dict[str, object] = {}  # the tab's components by field name, in the page's order
    with gr.Row():
        c["reviewer"] = gr.Textbox(label="reviewer", elem_id="reviewer")
        c["run"] = gr.Dropdown(elem_classes=["wb-run-pick"], label="run", choices=[], allow_custom_value=True,
                               elem_id="review-run")
        c["probe"] = gr.Textbox(label="probe id", elem_id="review-probe")
    with gr.Row():
        c["target"] = gr.Radio(label="override", choices=["verdict", "attribution"], value="verdict")
        c["value"] = gr.Dropdown(label="new value", choices=VERDICTS, value=VERDICTS[1], elem_id="review-value")
        c["reason"] = gr.Textbox(label="reason", elem_id="review-reason", scale=2)
        c["override_btn"] = gr.Button("Record override", variant="primary", elem_id="review-btn")
    c["override_msg"] = gr.Markdown(elem_id="review-msg")
    with gr.Row():
        c["release_run"] = gr.Dropdown(elem_classes=["wb-run-pick"], label="candidate run", choices=[],
                                       allow_custom_value=True)
        c["gate"] = gr.Dropdown(elem_classes=["wb-run-pick"], label="on recorded gate", choices=[],
                                allow_custom_value=True, elem_id="release-gate", scale=2)
        c["decision"] = gr.Radio(label="release", choices=list(reviews.DECISIONS), value="signoff",
                                 elem_id="release-decision")
    with gr.Row():
        c["release_reason"] = gr.Textbox(label="reason", scale=2, elem_id="release-reason")
        c["confirm"] = gr.Checkbox(label="confirm: sign off although grades changed since this gate",
                                   elem_id="release-confirm")
    with gr.Row():
        c["override"] = gr.Checkbox(label="override: sign off although this gate is FAIL or INCONCLUSIVE (or there "
                                    "is none)", elem_id="release-override")
        c["override_reason"] = gr.Textbox(label="override reason (required with override; recorded)", scale=2,
                                          elem_id="release-override-reason")
        c["release_btn"] = gr.Button("Record decision", elem_id="release-btn")
    c["note"] = gr.Markdown(elem_id="release-note")
    c["release_msg"] = gr.Markdown(elem_id="release-msg")
    c["refresh_btn"] = gr.Button("Refresh log")
    c["log"] = gr.Dataframe(views.empty(views.REVIEW_COLUMNS), label="review log (append-only)", interactive=False,
                            wrap=True, elem_id="review-log",
                            column_widths=["4%", "12%", "7%", "7%", "17%", "12%", "9%", "9%", "23%"])
    c["gates"] = gr.Dataframe(views.empty(views.GATE_COLUMNS), label="gate history (a sign-off shows on its gate)",
                              interactive=False, wrap=True, elem_id="gate-history",
                              column_widths=["17%", "12%", "17%", "17%", "10%", "7%", "20%"])
    c["cli"] = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"])
    return ReviewTab(ctx, **c)  # type: ignore[arg-type]


def review_tab(ctx: Context, shared: Shared) -> ReviewTab:
    """The tab, laid out and wired inside the caller's `gr.Tabs`. It follows the pair's candidate and the probe
    picked in Probe detail, and offers the gate Compare just recorded for sign-off."""
    with gr.Tab("Review", id="review"):
        t = _layout(ctx)
    private: dict[str, Any] = {"api_visibility": "private"}
    shared.page.load(t.first_load, None, [t.run, t.log, t.gates, t.reviewer], api_name="review_first_load", **private)
    shared.refresh.click(lambda: {t.run: ctx.run_picker()}, None, t.run, api_name="review_pickers", **private)
    t.run.change(lambda r: gr.Dropdown(value=r), t.run, t.release_run, api_name="release_run_follows", **private)
    shared.candidate.change(lambda r: {t.run: r, t.release_run: r}, shared.candidate, [t.run, t.release_run],
                            api_name="review_follows_candidate", **private)
    shared.probe.change(lambda p: p, shared.probe, t.probe, api_name="review_follows_probe", **private)
    shared.gate.change(t.signoff_form, t.release_run, [t.gate, t.note], api_name="signoff_on_new_gate", **private)
    t.target.change(t.value_choices, t.target, t.value, api_name="override_values", **private)
    t.override_btn.click(t.record_override, [t.reviewer, t.run, t.probe, t.target, t.value, t.reason],
                         [t.override_msg, t.log, t.cli], api_name="override").then(
        t.signoff_note, [t.release_run, t.gate], t.note, api_name="signoff_after_override", **private)  # may stale it
    t.release_btn.click(t.record_release, [t.reviewer, t.release_run, t.gate, t.decision, t.release_reason, t.confirm,
                                           t.override, t.override_reason], [t.release_msg, t.log, t.gates, t.cli],
                        api_name="release")
    t.release_run.change(t.signoff_form, t.release_run, [t.gate, t.note], api_name="signoff_form", **private)
    t.gate.input(t.signoff_note, [t.release_run, t.gate], t.note, api_name="signoff_note", **private)
    t.refresh_btn.click(t.review_log, None, [t.log, t.gates], api_name="reviews")
    return t

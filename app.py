"""The Hallucination Workbench app: `python app.py [--workspace DIR] [--host 127.0.0.1] [--port N] [--auth-file FILE]`.

Widgets and wiring only. Every handler is a plain function in `workbench.views`, `workbench.reviews`
or `finetune.ui`, tested without gradio; each action shows its equivalent CLI command.

Security: binds 127.0.0.1 by default; any other host needs `--auth-file` (hashed passwords, see
`workbench.auth`) or the app refuses to start; never `share=True`; serves no file outside the
workspace (gradio's cache lives in it, user paths go through `workbench.safepath`, which also refuses the
store's own files); runs no shell. The page layout holds nothing from the workspace (run ids arrive with
the first load, after login), and before login the page carries no API description either.
"""

# No `from __future__ import annotations`: gradio reads the handlers' annotations (gr.Request,
# gr.SelectData) at wiring time, and gradio is imported inside build_app so `workbench --help` stays light.

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Keyboard steps through the listed probes on the Probe detail tab (j / → next, k / ← previous), as inspect's log
# viewer and promptfoo's result view do; keys typed into a field are left alone.
KEYS_JS = """() => { document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (t && t.closest && (t.closest('input, textarea, select') || t.isContentEditable)) return;
  if (!document.querySelector('#probe-detail')?.offsetParent) return;
  const id = {j: 'probe-next', ArrowRight: 'probe-next', k: 'probe-prev', ArrowLeft: 'probe-prev'}[e.key];
  if (id) { document.getElementById(id)?.click(); e.preventDefault(); }
}); }"""
# Run pickers end their text with an ellipsis before the dropdown's arrow instead of running under it; a
# table's cells wrap (long answers stay readable without horizontal scrolling at 1400x1000).
CSS = """
.wb-run-pick input { text-overflow: ellipsis; padding-right: 2.2em !important; }
.wb-run-pick .wrap-inner { overflow: hidden; }
#runs-table td, #probes-table td, #review-log td, #gate-history td, #job-events td {
  white-space: normal; overflow-wrap: anywhere; }
"""
F = TypeVar("F", bound=Callable[..., Any])


def _ui_errors(fn: F) -> F:
    """Show user-facing errors in the UI (and to API clients) instead of a generic failure."""
    import gradio as gr

    from workbench.errors import WorkbenchError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (WorkbenchError, ValueError, KeyError) as e:
            raise gr.Error(str(e).strip("'\"")) from e

    return wrapper  # type: ignore[return-value]


def build_app(workspace: str | Path) -> Any:
    """The gr.Blocks of the app over one workspace (opened once; SQLite WAL lets the CLI write meanwhile)."""
    import gradio as gr

    from app_reports import reports_tab
    from finetune import ui as fix
    from finetune.fixset import STRATEGIES
    from finetune.job import METHODS as JOB_METHODS
    from finetune.preflight import METHODS as PREFLIGHT_METHODS
    from workbench import glossary, plots, reviews, signoff_views, views
    from workbench.attribution.types import CATEGORIES
    from workbench.errors import WorkbenchError
    from workbench.regression.stats import METRICS
    from workbench.safepath import read_text_inside
    from workbench.store import Store
    from workbench.types import Verdict

    store = Store.open(workspace)
    ws = store.workspace
    verdicts = [str(v) for v in Verdict]

    def who(reviewer: str, request: gr.Request | None) -> str:
        """The logged-in user when auth is on (a reviewer cannot sign as someone else), else the field."""
        user = getattr(request, "username", None) if request is not None else None
        return str(user) if user else reviewer

    # -- handlers (thin: each calls one plain function) ----------------------------------------------------
    @_ui_errors
    def refresh_runs(text: str, status: str, suite: str) -> tuple[Any, ...]:
        choices = views.run_choices(store)
        filt = views.run_filters(store)
        return (views.runs_table(store, text=text, status=status or "", suite=suite or ""),
                gr.Dropdown(choices=["", *filt["status"]]), gr.Dropdown(choices=["", *filt["suite"]]),
                gr.Dropdown(choices=choices), gr.Dropdown(choices=choices), gr.Dropdown(choices=choices),
                gr.Dropdown(choices=choices), gr.Dropdown(choices=choices, value=views.finished_runs(store)[:4]),
                views.cli_runs(ws), views.interrupted_note(store))

    @_ui_errors
    def first_load(text: str, status: str, suite: str) -> tuple[Any, ...]:
        """The page's first content (after login): runs, and the latest gated pair of finished runs picked
        (`views.default_pair`) in Compare, Fix and Review."""
        out = refresh_runs(text, status, suite)
        choices = views.run_choices(store)
        base, cand = views.default_pair(store)
        picks = [gr.Dropdown(choices=choices, value=v or None) for v in (base, cand, cand, cand)]
        return (*out[:3], *picks, *out[7:], f"## Hallucination Workbench · workspace `{ws}`", shares_chart(False),
                gr.Dropdown(choices=fix.list_jobs(store)))

    @_ui_errors
    def runs_table(text: str, status: str, suite: str) -> Any:
        return views.runs_table(store, text=text, status=status or "", suite=suite or "")

    @_ui_errors
    def tag_chart(run_ids: list[str] | None, metric: str) -> str:
        return plots.tag_metrics_chart(store, run_ids or [], metric)

    @_ui_errors
    def shares_chart(unfinished: bool) -> str:
        return plots.shares_plot_html(plots.run_shares(store, include_unfinished=bool(unfinished)))

    def compare(baseline: str, candidate: str, tag: str, transition: str, category: str, query: str,
                size: float) -> tuple[Any, ...]:
        # A refusal comes back as the summary (views.compare_or_refusal): every output is replaced, so no
        # earlier pair's verdict or recorded-gate line stays beside it, and no modal covers the page.
        v = views.compare_or_refusal(store, baseline or "", candidate or "", tag=tag or "",
                                     transition=transition or views.ANY_CHANGE, category=category or "")
        f = views.compare_filters(store, baseline, candidate) if v.verdict else {"tag": [], "category": []}
        pg = views.page_probes(v.probes, query=query or "", page=1, size=int(size or 50))
        return (v.summary_html, v.metrics, views.transition_heatmap(v.transitions), views.styled_probes(pg.table),
                v.cli,
                gr.Dropdown(choices=["", *f["tag"]]), gr.Dropdown(choices=["", *f["category"]]),
                gr.Dropdown(choices=pg.matching_ids), "", pg.matching_ids, v.delta_plot, v.probes, pg.page, pg.label,
                "")

    def compare_preselected(baseline: str, candidate: str, tag: str, transition: str, category: str, query: str,
                            size: float) -> Any:
        """The pair first_load preselected, compared on load: the tab shows it without a click. No pair (a
        workspace without two finished runs): the tab is left as it is, not given a refusal nobody asked for."""
        if not baseline or not candidate:
            return gr.skip()
        return compare(baseline, candidate, tag, transition, category, query, size)

    @_ui_errors
    def probe_page(table: Any, query: str, page: float, size: float, by: int = 0) -> tuple[Any, ...]:
        """Search / page through the pair's probe list (views.page_probes) without comparing again."""
        df = table if table is not None else views.empty(views.PROBE_COLUMNS)
        pg = views.page_probes(df, query=query or "", page=int(page or 1) + by, size=int(size or 50))
        return views.styled_probes(pg.table), pg.page, pg.label, pg.matching_ids, gr.Dropdown(choices=pg.matching_ids)

    def record_gate(baseline: str, candidate: str) -> tuple[str, str, str]:
        from workbench.regression.gate import gate_runs, guard_outcomes

        try:
            if not baseline or not candidate:
                raise WorkbenchError("pick a baseline and a candidate run")
            # as `workbench regress` does (the CLI line shown beside it): the guard set evaluated beside the probes
            rec = gate_runs(store, baseline, candidate, guard=guard_outcomes(store, baseline, candidate))
        except (WorkbenchError, ValueError, KeyError) as e:
            return views.refusal(e), "", ""
        report = Path(rec.reports["html"]).resolve().relative_to(ws.resolve())
        return (f"recorded gate `{rec.id}`: **{rec.result.verdict}**; report `{report}`",
                views.cli_regress(ws, baseline, candidate), Path(rec.reports["markdown"]).read_text())

    @_ui_errors
    def detail(probe_id: str, baseline: str, candidate: str) -> str:
        return views.probe_detail(store, probe_id or "", [baseline, candidate])

    @_ui_errors
    def step(ids: list[str], current: str, baseline: str, candidate: str, by: int) -> tuple[Any, ...]:
        pid = views.step_probe(ids or [], current or "", by)
        return pid, views.probe_detail(store, pid, [baseline, candidate]), pid

    def pick_probe(baseline: str, candidate: str, evt: gr.SelectData) -> tuple[Any, ...]:
        row = evt.row_value or []
        probe_id = str(row[0]) if row else ""
        html = views.probe_detail(store, probe_id, [baseline, candidate]) if probe_id else ""
        return probe_id, html, gr.Tabs(selected="detail"), probe_id, candidate

    def override(reviewer: str, run_id: str, probe_id: str, target: str, value: str, reason: str,
                 request: gr.Request) -> tuple[Any, ...]:
        name = who(reviewer, request)
        try:
            r = reviews.record_override(store, reviewer=name, run_id=run_id or "",
                                        probe_id=(probe_id or "").strip(), target=target, new_value=value or "",
                                        reason=reason)
        except (WorkbenchError, ValueError, KeyError) as e:  # a message beside the form; the log stays
            return views.refusal(e), gr.skip(), gr.skip()
        msg = f"recorded #{r.id}: {r.target} of `{r.probe_id}` in `{r.run_id}`: {r.old_value} → {r.new_value}"
        return msg, views.reviews_table(store), views.cli_review(ws, r.run_id, target=target, value=r.new_value,
                                                                  reason=r.reason, probe_id=r.probe_id,
                                                                  reviewer=name)

    def release(reviewer: str, run_id: str, gate_id: str, decision: str, reason: str, confirm: bool,
                override: bool, override_reason: str, request: gr.Request) -> tuple[Any, ...]:
        name = who(reviewer, request)
        try:  # unticked, the override text is no override: the library then refuses a FAIL gate by name
            r = reviews.record_release(store, reviewer=name, run_id=run_id or "", decision=decision, reason=reason,
                                       gate_id=gate_id or "", confirm=bool(confirm),
                                       override_reason=(override_reason or "") if override else None)
        except (WorkbenchError, ValueError, KeyError) as e:
            return views.refusal(e), gr.skip(), gr.skip(), gr.skip()
        return (signoff_views.recorded_line(r), views.reviews_table(store), views.gate_history_table(store),
                views.cli_review(ws, r.run_id, target="release", value=decision, reason=r.reason, reviewer=name,
                                 gate_id=r.gate_id, confirm=bool(confirm), override_reason=r.override_reason))

    def signoff_form(run_id: str) -> tuple[Any, str]:
        """The candidate's recorded gates (latest preselected) and what a sign-off on it would be about."""
        try:
            choices = signoff_views.gate_choices(store, run_id or "")
            return (gr.Dropdown(choices=choices, value=choices[0][1] if choices else None),
                    signoff_views.signoff_note(store, run_id or "", choices[0][1] if choices else ""))
        except (WorkbenchError, ValueError, KeyError) as e:
            return gr.Dropdown(choices=[], value=None), views.refusal(e)

    def signoff_note(run_id: str, gate_id: str) -> str:
        try:
            return signoff_views.signoff_note(store, run_id or "", gate_id or "")
        except (WorkbenchError, ValueError, KeyError) as e:
            return views.refusal(e)

    @_ui_errors
    def review_log() -> tuple[Any, Any]:
        return views.reviews_table(store), views.gate_history_table(store)

    def value_choices(target: str) -> Any:
        opts = verdicts if target == "verdict" else list(CATEGORIES)
        return gr.Dropdown(choices=opts, value=opts[0])

    @_ui_errors
    def workspace_file(path: str) -> tuple[str, str]:
        """(as code, as Markdown): a Markdown file (a gate's report.md) is rendered, any other text file shown as
        code."""
        text = read_text_inside(ws, path or "")
        md = (path or "").strip().lower().endswith(".md")
        return ("", text) if md else (text, "")

    @_ui_errors
    def build_fixset(run_id: str, out: str, strategy: str) -> tuple[str, str, str]:
        v = fix.build_fix(store, run_id or "", out or "", strategy)
        return v.summary, v.cli, v.path

    @_ui_errors
    def run_preflight(model: str, gpu: float, method: str, precision: str, micro_batch: float, seq_len: float,
                      rank: float, ckpt: bool) -> tuple[Any, ...]:
        v = fix.preflight(model, gpu, method=method, precision=precision, micro_batch=int(micro_batch),
                          seq_len=int(seq_len), lora_rank=int(rank), gradient_checkpointing=ckpt, workspace=ws)
        return v.verdict, v.chart_html, v.recommendations, v.cli

    @_ui_errors
    def launch(fixset: str, method: str, steps: float | None, name: str) -> tuple[Any, ...]:
        v = fix.launch_job(store, fixset or "", method=method, max_steps=None if steps is None else int(steps),
                           name=name or "")
        return v.output_dir, f"started pid {v.pid}: `{v.job_yaml}`", v.cli, gr.Timer(active=True)

    @_ui_errors
    def follow(output_dir: str) -> tuple[Any, ...]:
        if not output_dir:
            return "no job", None, None, gr.Timer(active=False)
        v = fix.follow_job(store, output_dir)
        return v.status, v.loss, v.events, gr.Timer(active=v.running)

    @_ui_errors
    def jobs_list() -> Any:
        return gr.Dropdown(choices=fix.list_jobs(store))

    @_ui_errors
    def open_job(output_dir: str) -> tuple[Any, ...]:
        if not (output_dir or "").strip():
            return "pick a job dir", "", None, None, gr.Timer(active=False), ""
        d = fix.open_job(store, output_dir)
        return d.summary, d.config, d.view.loss, d.view.events, gr.Timer(active=d.view.running), d.cli

    @_ui_errors
    def stop(output_dir: str, request: gr.Request) -> str:
        return fix.stop_job(store, output_dir or "", who=who("app", request))

    # Nothing from the workspace goes into the layout: gradio embeds the layout's values in the page's API
    # description, which it serves before login. Run ids arrive with the first load (first_load).
    initial: list[tuple[str, str]] = []

    # -- layout -------------------------------------------------------------------------------------------
    with gr.Blocks(title="Hallucination Workbench", analytics_enabled=False) as demo:
        header = gr.Markdown("## Hallucination Workbench")
        with gr.Tabs() as tabs:
            with gr.Tab("Runs", id="runs"):
                with gr.Row():
                    f_text = gr.Textbox(label="filter (run id, model, adapter)", scale=3)
                    f_status = gr.Dropdown(label="status", choices=[""], value="", allow_custom_value=True, scale=1)
                    f_suite = gr.Dropdown(label="suite", choices=[""], value="", allow_custom_value=True, scale=1)
                    refresh_btn = gr.Button("Refresh", variant="primary", scale=1, elem_id="runs-refresh")
                runs_df = gr.Dataframe(views.empty(views.RUN_COLUMNS), label="runs", interactive=False,
                                       elem_id="runs-table", wrap=True, max_height=420,
                                       column_widths=["16%", "11%", "6%", "13%", "12%", "7%", "4%", "6%", "7%",
                                                      "6%", "4%", "8%"])
                runs_note = gr.Markdown(elem_id="runs-note")
                with gr.Row():
                    shares_unfinished = gr.Checkbox(label="include unfinished runs in the shares plot", value=False,
                                                    elem_id="shares-unfinished")
                shares = gr.HTML(elem_id="shares-plot")
                with gr.Row():
                    plot_runs = gr.Dropdown(label="runs to plot", multiselect=True, choices=initial,
                                            allow_custom_value=True, scale=3)
                    plot_metric = gr.Dropdown(label="metric", choices=list(METRICS), value="incorrect", scale=1)
                chart = gr.HTML(elem_id="tag-chart")
                runs_cli = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"])
                with gr.Accordion("workspace file", open=False):
                    file_path = gr.Textbox(label="path inside the workspace (e.g. reports/GATE/report.md)")
                    file_btn = gr.Button("Open")
                    file_text = gr.Code(label="content", interactive=False)
                    file_md = gr.Markdown(elem_id="file-md")
                with gr.Accordion("glossary: categories, transitions, gates, measures", open=False):
                    gr.Markdown(glossary.glossary_markdown(), elem_id="glossary")

            with gr.Tab("Compare", id="compare"):
                with gr.Row():
                    baseline = gr.Dropdown(
                        elem_classes=["wb-run-pick"], label="baseline run", choices=initial, allow_custom_value=True,
                                           elem_id="baseline")
                    candidate = gr.Dropdown(
                        elem_classes=["wb-run-pick"], label="candidate run", choices=initial, allow_custom_value=True,
                                            elem_id="candidate")
                with gr.Row():
                    c_tag = gr.Dropdown(label="tag", choices=[""], value="", allow_custom_value=True)
                    c_trans = gr.Dropdown(label="grade transition", choices=list(views.TRANSITION_FILTERS),
                                          value=views.ANY_CHANGE, elem_id="transition")
                    c_cat = gr.Dropdown(label="attribution category", choices=[""], value="", allow_custom_value=True)
                    compare_btn = gr.Button("Compare", variant="primary", elem_id="compare-btn")
                summary = gr.HTML(elem_id="compare-summary")
                delta_plot = gr.HTML(elem_id="delta-plot")
                with gr.Row():
                    metrics_df = gr.Dataframe(views.empty(views.METRIC_COLUMNS), interactive=False, wrap=True,
                                              column_widths=["30%", "14%", "14%", "14%", "14%", "14%"],
                                              label="metric deltas (points, paired bootstrap CI)")
                    trans_df = gr.Dataframe(views.empty(views.TRANSITION_COLUMNS), interactive=False,
                                            label="transition matrix (rows: baseline; red worse, green fixed, "
                                                  "amber now abstains)", elem_id="transitions")
                with gr.Row(equal_height=True):
                    p_search = gr.Textbox(label="search the listed probes (any column)", elem_id="probe-search",
                                          scale=3)
                    p_size = gr.Dropdown(label="rows per page", choices=list(views.PAGE_SIZES), value=50,
                                         elem_id="page-size", scale=1)
                    p_prev = gr.Button("◀ page", elem_id="page-prev", scale=1)
                    p_page = gr.Number(label="page", value=1, precision=0, minimum=1, elem_id="page-number", scale=1)
                    p_next = gr.Button("page ▶", elem_id="page-next", scale=1)
                    p_label = gr.Markdown(elem_id="page-label")
                all_probes = gr.State(None)  # the pair's filtered probe list; search and paging read it
                probes_df = gr.Dataframe(views.empty(views.PROBE_COLUMNS), interactive=False, elem_id="probes-table",
                                         label="probes: broken first, then by id (click a row for its detail)",
                                         wrap=True, column_widths=["7%", "13%", "8%", "11%", "9%", "14%", "9%", "14%",
                                                                   "7%", "8%"],
                                         pinned_columns=1, max_height=900)
                with gr.Row():
                    gate_btn = gr.Button("Record gate verdict")
                    gate_msg = gr.Markdown(elem_id="gate-msg")
                with gr.Accordion("recorded gate report", open=False):
                    gate_report = gr.Markdown(elem_id="gate-report")
                compare_cli = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"])

            with gr.Tab("Probe detail", id="detail"):
                with gr.Row():
                    probe_pick = gr.Dropdown(label="probe", choices=[], allow_custom_value=True, elem_id="probe-pick")
                    detail_btn = gr.Button("Show")
                    prev_btn = gr.Button("◀ previous (k, ←)", elem_id="probe-prev")
                    next_btn = gr.Button("next (j, →) ▶", elem_id="probe-next")
                listed = gr.State([])  # the probe ids the Compare tab lists, in its order
                detail_html = gr.HTML(elem_id="probe-detail")

            with gr.Tab("Fix", id="fix"):
                gr.Markdown("Build a fix set from a run's attributions, check memory, then train a LoRA.")
                with gr.Row():
                    fx_run = gr.Dropdown(
                        elem_classes=["wb-run-pick"], label="run", choices=initial, allow_custom_value=True)
                    fx_out = gr.Textbox(label="fix set dir (in the workspace)", placeholder="fixsets/<run id>")
                    fx_strategy = gr.Dropdown(label="strategy", choices=list(STRATEGIES),
                                              value="auto")
                    fx_build = gr.Button("Build fix set")
                fx_summary = gr.Markdown()
                with gr.Accordion("memory pre-flight", open=True):
                    with gr.Row():
                        pf_model = gr.Textbox(label="model (directory or cached hub id)", elem_id="pf-model")
                        pf_gpu = gr.Number(label="GPU memory GiB", value=80)
                        pf_method = gr.Dropdown(label="method", value="lora",
                                                choices=list(PREFLIGHT_METHODS))
                        pf_prec = gr.Dropdown(label="precision", choices=["bf16", "fp16", "fp32"], value="bf16")
                    with gr.Row():
                        pf_mb = gr.Number(label="micro batch", value=1, precision=0)
                        pf_seq = gr.Number(label="sequence length", value=2048, precision=0)
                        pf_rank = gr.Number(label="LoRA rank", value=16, precision=0)
                        pf_ckpt = gr.Checkbox(label="gradient checkpointing")
                        pf_btn = gr.Button("Pre-flight", elem_id="pf-btn")
                    pf_verdict = gr.Markdown()
                    pf_chart = gr.HTML(elem_id="pf-chart")
                    pf_recs = gr.Dataframe(views.empty(fix.RECOMMENDATION_COLUMNS), label="what to change",
                                           interactive=False, elem_id="pf-recs")
                with gr.Row():
                    jb_fixset = gr.Textbox(label="fix set dir")
                    jb_method = gr.Dropdown(label="method", choices=list(JOB_METHODS), value="sft")
                    jb_steps = gr.Number(label="max steps (empty: epochs over the fix set)", value=None, precision=0)
                    jb_name = gr.Textbox(label="job name (optional)")
                    jb_launch = gr.Button("Launch job", variant="primary")
                    jb_stop = gr.Button("Stop job", variant="stop")
                with gr.Row():
                    jb_pick = gr.Dropdown(label="open an existing job (newest first)", choices=initial,
                                          allow_custom_value=True, elem_id="job-pick", scale=3)
                    jb_list = gr.Button("Refresh jobs", scale=1)
                    jb_dir = gr.Textbox(label="job dir (in the workspace)", elem_id="job-dir", scale=2)
                    jb_open = gr.Button("Open job", elem_id="job-open", scale=1)
                jb_msg = gr.Markdown()
                jb_status = gr.Markdown(elem_id="job-status")
                with gr.Accordion("job config (job.yaml)", open=False):
                    jb_config = gr.Code(language="yaml", interactive=False, elem_id="job-config")
                jb_loss = gr.LinePlot(x="step", y="value", color="name", elem_id="job-loss",
                                      label="training curves (loss; grpo: reward, abstention)")
                jb_events = gr.Dataframe(views.empty(fix.EVENT_COLUMNS), label="events", interactive=False, wrap=True,
                                         elem_id="job-events")
                fix_cli = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"])
                timer = gr.Timer(2.0, active=False)

            with gr.Tab("Review", id="review"):
                with gr.Row():
                    rv_name = gr.Textbox(label="reviewer", elem_id="reviewer")
                    rv_run = gr.Dropdown(
                        elem_classes=["wb-run-pick"], label="run", choices=initial, allow_custom_value=True,
                        elem_id="review-run")
                    rv_probe = gr.Textbox(label="probe id", elem_id="review-probe")
                with gr.Row():
                    rv_target = gr.Radio(label="override", choices=["verdict", "attribution"], value="verdict")
                    rv_value = gr.Dropdown(label="new value", choices=verdicts, value=verdicts[1],
                                           elem_id="review-value")
                    rv_reason = gr.Textbox(label="reason", elem_id="review-reason", scale=2)
                    rv_btn = gr.Button("Record override", variant="primary", elem_id="review-btn")
                rv_msg = gr.Markdown(elem_id="review-msg")
                with gr.Row():
                    rl_run = gr.Dropdown(
                        elem_classes=["wb-run-pick"], label="candidate run", choices=initial, allow_custom_value=True)
                    rl_gate = gr.Dropdown(elem_classes=["wb-run-pick"], label="on recorded gate", choices=[],
                                          allow_custom_value=True,
                                          elem_id="release-gate", scale=2)
                    rl_decision = gr.Radio(label="release", choices=list(reviews.DECISIONS), value="signoff",
                                           elem_id="release-decision")
                with gr.Row():
                    rl_reason = gr.Textbox(label="reason", scale=2, elem_id="release-reason")
                    rl_confirm = gr.Checkbox(label="confirm: sign off although grades changed since this gate",
                                             elem_id="release-confirm")
                with gr.Row():
                    rl_override = gr.Checkbox(label="override: sign off although this gate is FAIL or INCONCLUSIVE "
                                              "(or there is none)", elem_id="release-override")
                    rl_override_reason = gr.Textbox(label="override reason (required with override; recorded)",
                                                    scale=2, elem_id="release-override-reason")
                    rl_btn = gr.Button("Record decision", elem_id="release-btn")
                rl_note = gr.Markdown(elem_id="release-note")
                rl_msg = gr.Markdown(elem_id="release-msg")
                rv_refresh = gr.Button("Refresh log")
                rv_log = gr.Dataframe(views.empty(views.REVIEW_COLUMNS), label="review log (append-only)",
                                      interactive=False, wrap=True, elem_id="review-log",
                                      column_widths=["4%", "12%", "7%", "7%", "17%", "12%", "9%", "9%", "23%"])
                rv_gates = gr.Dataframe(views.empty(views.GATE_COLUMNS), label="gate history (a sign-off shows on "
                                        "its gate)", interactive=False, wrap=True, elem_id="gate-history",
                                        column_widths=["17%", "12%", "17%", "17%", "10%", "7%", "20%"])
                review_cli = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"])

            reports_tab(store, who=who, errors=_ui_errors)  # its own module: app_reports.py

        # -- wiring -------------------------------------------------------------------------------------
        run_inputs = [f_text, f_status, f_suite]
        refresh_outputs = [runs_df, f_status, f_suite, baseline, candidate, fx_run, rv_run, plot_runs, runs_cli,
                           runs_note]
        refresh_btn.click(refresh_runs, run_inputs, refresh_outputs, api_name="refresh")
        loaded = demo.load(first_load, run_inputs, [*refresh_outputs, header, shares, jb_pick],
                           api_visibility="private")
        shares_unfinished.change(shares_chart, shares_unfinished, shares, api_name="run_shares")
        demo.load(review_log, None, [rv_log, rv_gates], api_visibility="private")
        f_text.submit(runs_table, run_inputs, runs_df, api_name="runs")
        f_status.change(runs_table, run_inputs, runs_df, api_visibility="private")
        f_suite.change(runs_table, run_inputs, runs_df, api_visibility="private")
        plot_runs.change(tag_chart, [plot_runs, plot_metric], chart, api_name="tag_metrics")
        plot_metric.change(tag_chart, [plot_runs, plot_metric], chart, api_visibility="private")
        file_btn.click(workspace_file, file_path, [file_text, file_md], api_name="workspace_file")
        rv_run.change(lambda r: gr.Dropdown(value=r), rv_run, rl_run, api_visibility="private")
        candidate.change(lambda r: (r, r), candidate, [rv_run, rl_run], api_visibility="private")

        compare_outputs = [summary, metrics_df, trans_df, probes_df, compare_cli, c_tag, c_cat, probe_pick, gate_msg,
                           listed, delta_plot, all_probes, p_page, p_label, gate_report]
        compare_inputs = [baseline, candidate, c_tag, c_trans, c_cat, p_search, p_size]
        # One queue for every compare: a click (or a filter) made while the on-load compare runs comes after it, so
        # the on-load result never lands over the user's.
        loaded.then(compare_preselected, compare_inputs, compare_outputs, api_visibility="private",
                    concurrency_id="compare")
        compare_btn.click(compare, compare_inputs, compare_outputs, api_name="compare", concurrency_id="compare")
        for dd in (c_tag, c_trans, c_cat):
            dd.input(compare, compare_inputs, compare_outputs, api_visibility="private", concurrency_id="compare")
        page_outputs = [probes_df, p_page, p_label, listed, probe_pick]
        p_search.change(probe_page, [all_probes, p_search, p_page, p_size], page_outputs, api_visibility="private")
        for trig in (p_size.input, p_page.submit):
            trig(probe_page, [all_probes, p_search, p_page, p_size], page_outputs, api_visibility="private")
        for btn, by in ((p_prev, -1), (p_next, 1)):
            btn.click(functools.partial(probe_page, by=by), [all_probes, p_search, p_page, p_size], page_outputs,
                      api_visibility="private")
        gate_btn.click(record_gate, [baseline, candidate], [gate_msg, compare_cli, gate_report], api_name="gate").then(
            signoff_form, rl_run, [rl_gate, rl_note], api_visibility="private")
        probes_df.select(pick_probe, [baseline, candidate], [probe_pick, detail_html, tabs, rv_probe, rv_run],
                         api_visibility="private")
        detail_btn.click(detail, [probe_pick, baseline, candidate], detail_html, api_name="probe_detail")
        probe_pick.input(detail, [probe_pick, baseline, candidate], detail_html, api_visibility="private")
        for btn, by in ((prev_btn, -1), (next_btn, 1)):
            btn.click(functools.partial(step, by=by), [listed, probe_pick, baseline, candidate],
                      [probe_pick, detail_html, rv_probe], api_visibility="private")

        rv_target.change(value_choices, rv_target, rv_value, api_visibility="private")
        rv_btn.click(override, [rv_name, rv_run, rv_probe, rv_target, rv_value, rv_reason],
                     [rv_msg, rv_log, review_cli], api_name="override").then(
            signoff_note, [rl_run, rl_gate], rl_note, api_visibility="private")  # an override may stale the gate
        rl_btn.click(release, [rv_name, rl_run, rl_gate, rl_decision, rl_reason, rl_confirm, rl_override,
                               rl_override_reason], [rl_msg, rv_log, rv_gates, review_cli], api_name="release")
        rl_run.change(signoff_form, rl_run, [rl_gate, rl_note], api_visibility="private")
        rl_gate.input(signoff_note, [rl_run, rl_gate], rl_note, api_visibility="private")
        rv_refresh.click(review_log, None, [rv_log, rv_gates], api_name="reviews")

        fx_build.click(build_fixset, [fx_run, fx_out, fx_strategy], [fx_summary, fix_cli, jb_fixset],
                       api_name="build_fixset")
        pf_btn.click(run_preflight, [pf_model, pf_gpu, pf_method, pf_prec, pf_mb, pf_seq, pf_rank, pf_ckpt],
                     [pf_verdict, pf_chart, pf_recs, fix_cli], api_name="preflight")
        job_outputs = [jb_status, jb_config, jb_loss, jb_events, timer, fix_cli]
        jb_launch.click(launch, [jb_fixset, jb_method, jb_steps, jb_name], [jb_dir, jb_msg, fix_cli, timer],
                        api_name="launch_job").then(open_job, jb_dir, job_outputs, api_visibility="private")
        timer.tick(follow, jb_dir, [jb_status, jb_loss, jb_events, timer], api_visibility="private")
        jb_list.click(jobs_list, None, jb_pick, api_visibility="private")
        jb_pick.input(lambda d: (d, *open_job(d)), jb_pick, [jb_dir, *job_outputs], api_visibility="private")
        jb_dir.submit(open_job, jb_dir, job_outputs, api_visibility="private")
        jb_open.click(open_job, jb_dir, job_outputs, api_name="open_job")
        jb_stop.click(stop, jb_dir, jb_msg, api_name="stop_job")
    return demo


def check_bind(host: str, auth_file: str | None) -> None:
    """Refuse to bind beyond loopback without a users file (WorkbenchError)."""
    from workbench.errors import WorkbenchError

    if host not in LOOPBACK and not auth_file:
        raise WorkbenchError(f"refusing to bind {host}: beyond loopback the app needs --auth-file FILE "
                             "(add a user with `workbench app --add-user NAME --auth-file FILE`)")


#: The app takes no file from its users (every input is typed): gradio's upload route is capped all the same, as
#: its advisories on file routes advise (unlimited by default: 200 MB went through).
MAX_UPLOAD = "1mb"


def launch(workspace: str | Path, *, host: str = "127.0.0.1", port: int | None = None,
           auth_file: str | None = None, prevent_thread_lock: bool = False, quiet: bool = False) -> tuple[Any, str]:
    """Build and launch the app; returns (blocks, local url). Raises WorkbenchError on an unsafe bind."""
    check_bind(host, auth_file)
    ws = Path(workspace).resolve()
    ws.mkdir(parents=True, exist_ok=True)
    # gradio's upload/output cache inside the workspace, so even its own files are served from there.
    os.environ.setdefault("GRADIO_TEMP_DIR", str(ws / ".gradio"))
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    auth = None
    if auth_file:
        from workbench.auth import authenticator

        auth = authenticator(auth_file)
    demo = build_app(ws)
    from starlette.middleware import Middleware

    from workbench.appguard import LoginOnlyRoutes, LoginThrottle, NoApiInfoBeforeLogin

    # No FastAPI schema (/openapi.json lists every route, unauthenticated), no API description and no heartbeat
    # stream before login; failed sign-ins slow the next ones down, per user and per client address.
    app_kwargs = {"openapi_url": None, "middleware": [Middleware(NoApiInfoBeforeLogin), Middleware(LoginOnlyRoutes),
                                                      Middleware(LoginThrottle)]}
    _, url, _ = demo.launch(server_name=host, server_port=port, share=False, auth=auth, allowed_paths=[],
                            prevent_thread_lock=prevent_thread_lock, quiet=quiet, show_error=True,
                            ssr_mode=False, mcp_server=False, max_file_size=MAX_UPLOAD, js=KEYS_JS, css=CSS,
                            footer_links=["api"],
                            app_kwargs=app_kwargs,
                            auth_message="Hallucination Workbench: sign in" if auth else None)
    return demo, str(url)


def add_arguments(p: argparse.ArgumentParser, *, workspace: bool = True) -> None:
    if workspace:
        p.add_argument("--workspace", default=os.environ.get("WORKBENCH_WORKSPACE", ".workbench"),
                       help="workspace directory holding the store (default: $WORKBENCH_WORKSPACE or ./.workbench)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --auth-file)")
    from workbench.cli import bounded

    p.add_argument("--port", type=bounded(1, 65_535), default=None,
                   help="port, 1-65535 (default: gradio's, 7860 or the next free one)")
    p.add_argument("--auth-file", help="users file (`username:pbkdf2_sha256$...` lines); required beyond loopback")
    p.add_argument("--add-user", metavar="NAME", help="add NAME to --auth-file (password from "
                   "$WORKBENCH_PASSWORD or a prompt) and exit")


def run(args: argparse.Namespace) -> int:
    """Shared by `python app.py` and `workbench app`. 0 ok, 2 refused or bad input."""
    from workbench.errors import WorkbenchError

    try:
        if args.add_user is not None:
            if not args.auth_file:
                raise WorkbenchError("--add-user needs --auth-file FILE")
            from workbench.auth import add_user

            password = os.environ.get("WORKBENCH_PASSWORD")
            if password is None:
                if not sys.stdin.isatty():
                    raise WorkbenchError("--add-user needs a password: set $WORKBENCH_PASSWORD, or run it in a "
                                         "terminal to be prompted")
                import getpass

                try:
                    password = getpass.getpass(f"password for {args.add_user}: ")
                except EOFError:
                    raise WorkbenchError("no password given (end of input)") from None
            add_user(args.auth_file, args.add_user, password)
            print(f"added {args.add_user} to {args.auth_file}")
            return 0
        # Quiet: gradio's banner also tells the user to set `share=True`, which would publish the workspace on a
        # public tunnel (this app never does); the local URL, the one line worth printing, is printed here.
        demo, url = launch(args.workspace, host=args.host, port=args.port, auth_file=args.auth_file,
                           prevent_thread_lock=True, quiet=True)
        print(f"* Running on local URL:  {url}", flush=True)
        demo.block_thread()
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from workbench.quiet import quiet_known_noise

    quiet_known_noise()  # `python app.py` is an entry point of its own (before gradio is imported)
    p = argparse.ArgumentParser(prog="python app.py", description="The Hallucination Workbench web app.")
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

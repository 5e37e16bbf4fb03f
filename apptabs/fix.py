"""The Fix tab: build a fix set from a run's attributions, check memory, then train a LoRA and follow the job."""

# No `from __future__ import annotations`: gradio reads the handlers' annotations (gr.Request) at wiring time.

from dataclasses import dataclass

import gradio as gr

from apptabs.common import Context, Shared, Updates, ui_errors
from finetune import ui as fix
from finetune.fixset import STRATEGIES
from finetune.job import METHODS as JOB_METHODS
from finetune.preflight import METHODS as PREFLIGHT_METHODS
from workbench import views


@dataclass(frozen=True)
class FixTab:
    ctx: Context
    run: gr.Dropdown
    out: gr.Textbox
    strategy: gr.Dropdown
    build: gr.Button
    summary: gr.Markdown
    pf_model: gr.Textbox
    pf_gpu: gr.Number
    pf_method: gr.Dropdown
    pf_precision: gr.Dropdown
    pf_micro_batch: gr.Number
    pf_seq_len: gr.Number
    pf_rank: gr.Number
    pf_ckpt: gr.Checkbox
    pf_btn: gr.Button
    pf_verdict: gr.Markdown
    pf_chart: gr.HTML
    pf_recs: gr.Dataframe
    fixset: gr.Textbox
    method: gr.Dropdown
    steps: gr.Number
    name: gr.Textbox
    launch: gr.Button
    stop: gr.Button
    pick: gr.Dropdown
    list_btn: gr.Button
    job_dir: gr.Textbox
    open_btn: gr.Button
    msg: gr.Markdown
    status: gr.Markdown
    config: gr.Code
    loss: gr.LinePlot
    events: gr.Dataframe
    cli: gr.Textbox
    timer: gr.Timer

    @ui_errors
    def first_load(self) -> Updates:
        """The latest gated candidate picked, and the jobs listed (after login)."""
        return {self.run: self.ctx.run_picker(views.default_pair(self.ctx.store)[1], pick=True),
                self.pick: gr.Dropdown(choices=fix.list_jobs(self.ctx.store))}

    @ui_errors
    def build_fixset(self, run_id: str, out: str, strategy: str) -> Updates:
        v = fix.build_fix(self.ctx.store, run_id or "", out or "", strategy)
        return {self.summary: v.summary, self.cli: v.cli, self.fixset: v.path}

    @ui_errors
    def preflight(self, model: str, gpu: float, method: str, precision: str, micro_batch: float, seq_len: float,
                  rank: float, ckpt: bool) -> Updates:
        v = fix.preflight(model, gpu, method=method, precision=precision, micro_batch=int(micro_batch),
                          seq_len=int(seq_len), lora_rank=int(rank), gradient_checkpointing=ckpt, workspace=self.ctx.ws)
        return {self.pf_verdict: v.verdict, self.pf_chart: v.chart_html, self.pf_recs: v.recommendations,
                self.cli: v.cli}

    @ui_errors
    def launch_job(self, fixset: str, method: str, steps: float | None, name: str) -> Updates:
        v = fix.launch_job(self.ctx.store, fixset or "", method=method,
                           max_steps=None if steps is None else int(steps), name=name or "")
        return {self.job_dir: v.output_dir, self.msg: f"started pid {v.pid}: `{v.job_yaml}`", self.cli: v.cli,
                self.timer: gr.Timer(active=True)}

    @ui_errors
    def follow(self, output_dir: str) -> Updates:
        if not output_dir:  # the tables keep their headers (None would show gradio's "1 2 3")
            return {self.status: "no job", self.loss: None, self.events: views.empty(fix.EVENT_COLUMNS),
                    self.timer: gr.Timer(active=False)}
        v = fix.follow_job(self.ctx.store, output_dir)
        return {self.status: v.status, self.loss: v.loss, self.events: v.events,
                self.timer: gr.Timer(active=v.running)}

    @ui_errors
    def jobs(self) -> Updates:
        return {self.pick: gr.Dropdown(choices=fix.list_jobs(self.ctx.store))}

    @ui_errors
    def open_job(self, output_dir: str) -> Updates:
        if not (output_dir or "").strip():
            return {self.status: "pick a job dir", self.config: "", self.loss: None,
                    self.events: views.empty(fix.EVENT_COLUMNS), self.timer: gr.Timer(active=False), self.cli: ""}
        d = fix.open_job(self.ctx.store, output_dir)
        return {self.status: d.summary, self.config: d.config, self.loss: d.view.loss, self.events: d.view.events,
                self.timer: gr.Timer(active=d.view.running), self.cli: d.cli}

    def pick_job(self, output_dir: str) -> Updates:
        return {self.job_dir: output_dir, **self.open_job(output_dir)}

    @ui_errors
    def stop_job(self, output_dir: str, request: gr.Request) -> str:
        return fix.stop_job(self.ctx.store, output_dir or "", who=self.ctx.who("", request) or "app")


def _layout(ctx: Context) -> FixTab:
    c: dict[str, object] = {}  # the tab's components by field name, in the page's order
    gr.Markdown("Build a fix set from a run's attributions, check memory, then train a LoRA.")
    with gr.Row():
        c["run"] = gr.Dropdown(elem_classes=["wb-run-pick"], label="run", choices=[], allow_custom_value=True)
        c["out"] = gr.Textbox(label="fix set dir (in the workspace)", placeholder="fixsets/<run id>")
        c["strategy"] = gr.Dropdown(label="strategy", choices=list(STRATEGIES), value="auto")
        c["build"] = gr.Button("Build fix set")
    c["summary"] = gr.Markdown()
    with gr.Accordion("memory pre-flight", open=True):
        with gr.Row():
            c["pf_model"] = gr.Textbox(label="model (directory or cached hub id)", elem_id="pf-model")
            c["pf_gpu"] = gr.Number(label="GPU memory GiB", value=80)
            c["pf_method"] = gr.Dropdown(label="method", value="lora", choices=list(PREFLIGHT_METHODS))
            c["pf_precision"] = gr.Dropdown(label="precision", choices=["bf16", "fp16", "fp32"], value="bf16")
        with gr.Row():
            c["pf_micro_batch"] = gr.Number(label="micro batch", value=1, precision=0)
            c["pf_seq_len"] = gr.Number(label="sequence length", value=2048, precision=0)
            c["pf_rank"] = gr.Number(label="LoRA rank", value=16, precision=0)
            c["pf_ckpt"] = gr.Checkbox(label="gradient checkpointing")
            c["pf_btn"] = gr.Button("Pre-flight", elem_id="pf-btn")
        c["pf_verdict"] = gr.Markdown()
        c["pf_chart"] = gr.HTML(elem_id="pf-chart")
        c["pf_recs"] = gr.Dataframe(views.empty(fix.RECOMMENDATION_COLUMNS), label="what to change",
                                    interactive=False, elem_id="pf-recs")
    with gr.Row():
        c["fixset"] = gr.Textbox(label="fix set dir")
        c["method"] = gr.Dropdown(label="method", choices=list(JOB_METHODS), value="sft")
        c["steps"] = gr.Number(label="max steps (empty: epochs over the fix set)", value=None, precision=0)
        c["name"] = gr.Textbox(label="job name (optional)")
        c["launch"] = gr.Button("Launch job", variant="primary")
        c["stop"] = gr.Button("Stop job", variant="stop")
    with gr.Row():
        c["pick"] = gr.Dropdown(label="open an existing job (newest first)", choices=[], allow_custom_value=True,
                                elem_id="job-pick", scale=3)
        c["list_btn"] = gr.Button("Refresh jobs", scale=1)
        c["job_dir"] = gr.Textbox(label="job dir (in the workspace)", elem_id="job-dir", scale=2)
        c["open_btn"] = gr.Button("Open job", elem_id="job-open", scale=1)
    c["msg"] = gr.Markdown()
    c["status"] = gr.Markdown(elem_id="job-status")
    with gr.Accordion("job config (job.yaml)", open=False):
        c["config"] = gr.Code(language="yaml", interactive=False, elem_id="job-config")
    c["loss"] = gr.LinePlot(x="step", y="value", color="name", elem_id="job-loss",
                            label="training curves (loss; grpo: reward, abstention)")
    c["events"] = gr.Dataframe(views.empty(fix.EVENT_COLUMNS), label="events", interactive=False, wrap=True,
                               elem_id="job-events")
    c["cli"] = gr.Textbox(label="equivalent CLI", interactive=False, buttons=["copy"], elem_id="fix-cli")
    c["timer"] = gr.Timer(2.0, active=False)
    return FixTab(ctx, **c)  # type: ignore[arg-type]


def fix_tab(ctx: Context, shared: Shared) -> FixTab:
    """The tab, laid out and wired inside the caller's `gr.Tabs`."""
    with gr.Tab("Fix", id="fix"):
        t = _layout(ctx)
    shared.page.load(t.first_load, None, [t.run, t.pick], api_name="fix_first_load", api_visibility="private")
    shared.refresh.click(lambda: {t.run: ctx.run_picker()}, None, t.run, api_name="fix_pickers",
                         api_visibility="private")
    t.build.click(t.build_fixset, [t.run, t.out, t.strategy], [t.summary, t.cli, t.fixset], api_name="build_fixset")
    t.pf_btn.click(t.preflight, [t.pf_model, t.pf_gpu, t.pf_method, t.pf_precision, t.pf_micro_batch, t.pf_seq_len,
                                 t.pf_rank, t.pf_ckpt], [t.pf_verdict, t.pf_chart, t.pf_recs, t.cli],
                   api_name="preflight")
    job = [t.status, t.config, t.loss, t.events, t.timer, t.cli]
    t.launch.click(t.launch_job, [t.fixset, t.method, t.steps, t.name], [t.job_dir, t.msg, t.cli, t.timer],
                   api_name="launch_job").then(t.open_job, t.job_dir, job, api_name="job_after_launch",
                                               api_visibility="private")
    t.timer.tick(t.follow, t.job_dir, [t.status, t.loss, t.events, t.timer], api_name="job_follow",
                 api_visibility="private")
    t.list_btn.click(t.jobs, None, t.pick, api_name="jobs_list", api_visibility="private")
    t.pick.input(t.pick_job, t.pick, [t.job_dir, *job], api_name="job_pick", api_visibility="private")
    t.job_dir.submit(t.open_job, t.job_dir, job, api_name="job_dir_submit", api_visibility="private")
    t.open_btn.click(t.open_job, t.job_dir, job, api_name="open_job")
    t.stop.click(t.stop_job, t.job_dir, t.msg, api_name="stop_job")
    return t

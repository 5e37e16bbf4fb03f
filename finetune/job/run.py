"""The run skeleton: one job, whatever its method, read top to bottom.

`run_method` (one method's job; finetune/job/staged.py runs a staged one stage by stage through it) does, in
order:

1. resolve the spec once (finetune/job/resolve.py) unless given a ResolvedJob; find where to resume, or
   refuse an output_dir that already holds a job; save the decided spec as `output_dir/job.yaml`;
2. record the job in the store (lineage: eval run, fix set path + hash), and its start or resume;
3. load the base model and tokenizer, and the fix set's split the method trains on;
4. put the LoRA on the model (fresh from `lora`, or the `init_adapter` a staged fix continues);
5. let the method (finetune/job/methods/) build its trl config, trainer, held-out scorer and watchdogs;
   wire the shared ones (metrics to the store, NaN/spike watchdog, atomic checkpoints);
6. score the held-out rows and the known facts of the fix set's validation slice, train (from the
   checkpoint when resuming; the slice and the targets are scored every `early_stop.known_every` steps and
   the best state is put back at the end when the last one broke more known facts), score them again;
7. save the adapter in the standard peft format at `output_dir/adapter`, record the outcome (with the
   known facts the job broke), and write the JobResult as `output_dir/result.json`.

docs/architecture.md follows a job from `workbench train` to here.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finetune.fixset import load_manifest
from finetune.job import trackers
from finetune.job.checkpoint import COMPLETE, clean_incomplete, last_complete_checkpoint
from finetune.job.resolve import ResolvedJob, resolve
from finetune.job.result import JobResult, Status, write_result
from finetune.job.scale import ScaleChoice, decide, scaled, write_scale
from finetune.job.scoring import KnownFacts, Targets
from finetune.job.spec import JobSpec, save_spec
from finetune.records import JobRecorder
from workbench.errors import WorkbenchError
from workbench.store import Store, new_id

JOB_FILE = "job.yaml"
JOB_ID_FILE = "job_id"
ADAPTER_DIR = "adapter"
CHECKPOINT_DIR = "checkpoints"


@dataclass(frozen=True)
class StageContext:
    """What a stage of a staged job (finetune/job/staged.py) takes from the stages before it.

    Attributes:
        label: The stage in words (`stage 2 of 2, dpo`): its progress lines and events say it.
        fixset: The fix set whose validation slice `known_right` was scored on (the first stage's).
        known_right: The slice's probes the base model answered right (the first stage's `known_right_before`):
            a later stage starts from an adapter, so it counts what it breaks against these, not against its own
            start; None: the first stage (it scores the base model itself).
        earlier: (fix set, split) of every stage before: their targeted probes count beside this stage's when it
            picks the state it keeps (rollback) and its adapter scale, so a stage does not undo the stages before.
    """

    label: str
    fixset: str
    known_right: frozenset[str] | None = None
    earlier: tuple[tuple[str, str], ...] = ()


def run_method(spec: JobSpec | ResolvedJob, store: Store | None = None, *, resume: bool = False,
            callbacks: Sequence[Any] = (), before_commit: Callable[[int, Path], None] | None = None,
            progress: Callable[[str], None] | None = None, stage: StageContext | None = None) -> JobResult:
    """Train to completion, or until a watchdog stops it. `resume=True` continues from the last complete
    checkpoint of the output_dir. `progress` gets a line (step, loss, ETA) every 30 s of training
    (finetune/job/progress.py); None: silent. `callbacks` (extra trainer callbacks) and
    `before_commit(step, staging)` (called while a checkpoint is written but not yet committed) are for tools
    and tests. One method's job: a `method: staged` job runs its stages through here (finetune/job/staged.py
    `run_job`, the package's entry point for either), each with its `stage` context."""
    if isinstance(spec, JobSpec) and spec.method == "staged":
        raise WorkbenchError("a `method: staged` job runs stage by stage: finetune.job.run_job runs either kind")
    t0 = time.perf_counter()
    # 1. Resolve, find the resume point, save the decided spec.
    job = spec if isinstance(spec, ResolvedJob) else resolve(spec)
    trackers.require(job.spec.report_to)  # before anything is written: a missing tracker is a setup error
    if progress is not None:  # before anything is written: a bad $WORKBENCH_PROGRESS_EVERY is refused here
        from finetune.job.progress import TrainingProgress

        callbacks = [*callbacks, TrainingProgress(progress, label=stage.label if stage else job.method)]
    out = job.output_dir
    start_from = resume_point(out, resume)
    save_spec(job.spec, out / JOB_FILE)
    if store is None and job.spec.workspace:
        store = Store.open(job.spec.workspace)

    # 2. The job row, events and metrics (a no-op without a store).
    job_id = job_id_of(out, resume)
    log = JobRecorder(store, job_id)
    m = job.manifest
    log.create(method=job.method, spec=job.spec.to_dict(), run_id=m.run_id,
               fixset_path=str(Path(m.path).resolve()), fixset_hash=m.sha256)
    log.status("running")
    if start_from is not None:
        log.event("resume", f"resuming from {start_from.name}", {"checkpoint": str(start_from)})
    else:
        log.event("start", f"{job.method} on {m.train_rows.get(job.split, 0)} training rows; defaults: "
                  f"{job.size_rule}; max_steps: {job.steps_rule}; learning_rate: {job.lr_rule}",
                  {"output_dir": str(out), "max_steps": job.max_steps, "max_steps_rule": job.steps_rule,
                   "learning_rate": job.learning_rate, "learning_rate_rule": job.lr_rule,
                   "per_device_batch_size": job.batch, "size_rule": job.size_rule})
        log.event("tokens", f"trainable token rows: {job.tokens_decision}", {"ids": list(job.trainable_tokens)})
    tags = trackers.lineage(job_id=job_id, method=job.method, run_id=m.run_id, fixset=str(Path(m.path).resolve()),
                            fixset_sha256=m.sha256, base_model=job.base_model)
    try:
        with trackers.tracker_env(job.spec.report_to, out, tags):
            result = _train(job, job_id, start_from, log, callbacks, before_commit, tags, stage)
    except BaseException as e:
        log.event("failed", f"{type(e).__name__}: {e}")
        log.status("failed", finished=True)
        raise
    result = dataclasses.replace(result, seconds=round(time.perf_counter() - t0, 2))
    log.event("done" if result.status != "failed" else "failed", result.message, result.to_dict())
    log.status(result.status, adapter=result.adapter, metrics=result.to_dict(), finished=True)
    if os.environ.get("RANK", "0") == "0":  # under accelerate, one result file for the launcher to read
        write_result(result, out)
        if result.adapter is not None:  # peft's empty template replaced by one written from the records
            from workbench.cards import write_model_card

            write_model_card(result.adapter, store)
    return result


def _train(job: ResolvedJob, job_id: str, start_from: Path | None, log: JobRecorder, callbacks: Sequence[Any],
           before_commit: Callable[[int, Path], None] | None, tags: dict[str, str],
           stage: StageContext | None) -> JobResult:
    from datasets import load_from_disk

    from finetune.job.anchor import NLLAnchor, earlier_pairs
    from finetune.job.callbacks import LossWatchdog, MetricsRecorder, TimedCheckpoints
    from finetune.job.known_guard import KnownFactsGuard
    from finetune.job.methods import method_class

    # 3. Model, tokenizer, the method's split.
    tokenizer, model = load_base(job)
    split_rows = load_from_disk(job.spec.fixset)[job.split]
    method = method_class(job.method)(job, tokenizer, split_rows, log)
    if stage is not None and job.spec.trainer.earlier_anchor > 0:  # a later stage holds what the ones before taught
        pairs = [p for fixset, split in stage.earlier for p in earlier_pairs(tokenizer, load_from_disk(fixset)[split],
                                                                              split)]
        method.hold = NLLAnchor(tokenizer, pairs, batch=job.batch) if pairs else None

    # 4. LoRA (fresh, or the adapter a staged fix continues).
    model, peft_config = with_adapter(model, job)

    # 5. The method's trainer, config, scorer and watchdogs; the shared watchdogs.
    w = job.spec.watchdog
    watchdog = LossWatchdog(log.event, stop_on_nan=w.stop_on_nan, spike_factor=method.spike_factor,
                            window=w.spike_window, min_steps=w.spike_min_steps)
    known, targets = KnownFacts(job.manifest, tokenizer), Targets.of(split_rows, job.manifest, tokenizer)
    for fixset, split in stage.earlier if stage else ():  # a stage keeps what the stages before it fixed
        targets = targets.plus(Targets.of(load_from_disk(fixset)[split], load_manifest(fixset), tokenizer))
    es = job.spec.early_stop
    known_guard = KnownFactsGuard(log.event, log.metrics, correct=known.correct, targets=targets.fixed,
                                  eval_every=es.known_every or 0, max_share=es.max_known_broken,
                                  patience=es.patience, stop=es.known_stop, rollback=es.rollback,
                                  min_targets=es.min_targets_fixed, until_fixed=bool(es.until_fixed))
    guards = [*method.guards(), known_guard]
    early = method.early_stopping()
    lineage = [trackers.tensorboard_lineage(tags)] if "tensorboard" in job.spec.report_to else []
    trainer = method.trainer(model=model, args=method.config(job.output_dir / CHECKPOINT_DIR), peft_config=peft_config,
                             callbacks=[MetricsRecorder(log.metrics), watchdog, *guards, early, *lineage,
                                        TimedCheckpoints(job.spec.checkpoint_minutes), *callbacks])
    for cb in lineage:
        cb.trainer = trainer
    wire_trainer(trainer, job, log, before_commit)

    def save_extra(folder: Path) -> None:  # the watchers' state goes into every checkpoint, for --resume
        known_guard.save(folder)
        early.save(folder)

    trainer.save_extra = save_extra

    # 6. Held-out score and known facts, train, held-out score.
    before = None
    if early.has_rows and start_from is None:
        before = early.score(trainer.model)
        log.metrics(0, {early.metric: before})
        early.best = before
    # a resumed job takes the base answers and the scores its checkpoint holds; a checkpoint without them
    # (an older version's): every probe of the slice was right in the evaluation run
    if start_from is None:
        known_guard.before = _known_right(known, trainer.model, job, stage)
    elif not known_guard.restore(start_from):
        known_guard.before = {r["probe_id"] for r in known.rows}
    if start_from is not None:
        early.restore(start_from)  # its best score and patience as the checkpoint left them
    known_before = known_guard.before
    trainer.train(resume_from_checkpoint=str(start_from) if start_from is not None else None)
    stop = watchdog.stopped or next((g.stopped for g in guards if g.stopped is not None), None) or early.stopped
    steps = int(trainer.state.global_step)
    history = list(trainer.state.log_history)
    losses = [h["loss"] for h in history if "loss" in h]
    final_loss = float(losses[-1]) if losses else None
    kept, kept_reason = known_guard.kept, known_guard.kept_reason
    def result(status: Status, adapter: str | None, after: float | None, message: str,
               broken: Sequence[str] = (), scale: ScaleChoice | None = None) -> JobResult:
        return JobResult(job_id=job_id, status=status, output_dir=str(job.output_dir), adapter=adapter, steps=steps,
                         final_loss=final_loss, heldout_before=before, heldout_after=after,
                         resumed_from=str(start_from) if start_from else None,
                         stop_reason=stop.kind if stop else None, message=message, seconds=0.0,
                         known_checked=len(known_before), known_broken=list(broken),
                         known_right_before=sorted(known_before), learning_rate=job.learning_rate,
                         max_steps_rule=job.steps_rule, learning_rate_rule=job.lr_rule, size_rule=job.size_rule,
                         kept_step=kept.step if kept else None, kept_reason=kept_reason,
                         adapter_scale=scale.scale if scale else 1.0,
                         adapter_scale_reason=scale.reason if scale else None, method=job.method)

    if stop is not None and stop.kind == "nan":
        return result("failed", None, None, stop.message)

    # 7. The adapter (a watchdog stop keeps it: the regression gate decides on it), its LoRA delta scaled first
    # when `trainer.adapter_scale` asks (WiSE-FT, finetune/job/scale.py): what is saved is what is scored. The
    # guard's evaluation of the state kept (when it scored one) is the targets fixed at 1.0: not scored twice.
    end = known_guard.end
    setting = job.spec.trainer.adapter_scale  # decided by resolve; None only in a spec it never saw: as trained
    choice = decide(1.0 if setting is None else setting, trainer.model, targets.fixed, es.min_targets_fixed,
                    source=job.scale_source, full=end.targets_fixed if end is not None else None)
    scale = choice.scale if choice is not None else 1.0  # None: the whole delta, as trained
    if choice is not None:
        log.event("adapter_scale", f"adapter scale {choice.scale}: {choice.reason}",
                  {"scale": choice.scale, "fixed_by_scale": {str(a): v for a, v in choice.fixed_by_scale.items()}})
    with scaled(trainer.model, scale):
        adapter = save_adapter(trainer.model, job.output_dir / ADAPTER_DIR, scale=scale)
        after = early.score(trainer.model) if early.has_rows else None
        broken = sorted(known_before - known.correct(trainer.model))
    if after is not None:
        log.metrics(steps, {early.metric: after})
    if known_before:
        log.metrics(steps, {"known_broken": float(len(broken)), "known_checked": float(len(known_before))})
    if stop is not None:
        return result("stopped", str(adapter), after, stop.message, broken, choice)
    summary = method.summary(steps, final_loss, history)
    if known_guard.fixed_at is not None:
        summary += f"; stopped once its targets were fixed (step {known_guard.fixed_at.step}, early_stop.until_fixed)"
    return result("done", str(adapter), after, summary, broken, choice)


def _known_right(known: KnownFacts, model: Any, job: ResolvedJob, stage: StageContext | None) -> set[str]:
    """The validation slice's probes right before training: scored on the model, or, for a later stage on the same
    fix set, those the base model answered right (the first stage's), so what the whole job breaks is counted."""
    if stage is not None and stage.known_right is not None and Path(stage.fixset) == Path(job.spec.fixset):
        return {r["probe_id"] for r in known.rows} & stage.known_right
    return known.correct(model)


def load_base(job: ResolvedJob) -> tuple[Any, Any]:
    """The base model's tokenizer (pad = EOS when it has none) and weights in the job's precision."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(job.base_model)
    if tokenizer.eos_token is None:
        raise WorkbenchError(f"base_model `{job.base_model}`: the tokenizer has no EOS token; trl needs one to "
                             "end completions (set tokenizer.eos_token to a special token and save it)")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(job.base_model, dtype=torch.bfloat16 if job.bf16 else torch.float32)
    return tokenizer, model


def with_adapter(model: Any, job: ResolvedJob) -> tuple[Any, Any]:
    """(model, peft_config) for the trl trainer: a fresh LoRA config, or `init_adapter` loaded trainable (then
    the trainer gets the PeftModel and no config)."""
    if job.spec.init_adapter is not None:
        from peft import PeftModel

        return PeftModel.from_pretrained(model, job.spec.init_adapter, is_trainable=True), None
    from peft import LoraConfig

    lo = job.spec.lora
    return model, LoraConfig(r=job.lora_r, lora_alpha=job.lora_alpha, lora_dropout=lo.dropout,
                             target_modules=list(job.target_modules), fan_in_fan_out=job.fan_in_fan_out,
                             trainable_token_indices=list(job.trainable_tokens) or None, task_type="CAUSAL_LM")


def wire_trainer(trainer: Any, job: ResolvedJob, log: JobRecorder,
                 before_commit: Callable[[int, Path], None] | None) -> None:
    """What every method's trainer needs after construction: the tied-head patch, logs to the store (not
    stdout), checkpoint rotation and a store event per complete checkpoint."""
    from transformers import PrinterCallback

    _patch_trainable_token_heads(trainer.model)
    trainer.remove_callback(PrinterCallback)
    trainer.keep_checkpoints = job.spec.keep_checkpoints
    trainer.on_checkpoint = lambda step, path: log.event("checkpoint", f"checkpoint at step {step}",
                                                         {"step": step, "path": str(path)})
    trainer.before_commit = before_commit


def _patch_trainable_token_heads(model: Any) -> None:
    """trl 1.16's fused LM head reads `lm_head.bias`; peft's TrainableTokensWrapper (a tied head with
    `trainable_token_indices`) forwards only `weight`, so the attribute lookup fails. A bias-free head
    gets an explicit `bias = None` (its `weight` already carries the trained token rows)."""
    from peft.utils.other import TrainableTokensWrapper

    for module in model.modules():
        if isinstance(module, TrainableTokensWrapper) and getattr(module.original_module, "bias", None) is None:
            object.__setattr__(module, "bias", None)


def resume_point(out: Path, resume: bool) -> Path | None:
    """The checkpoint to resume from (incomplete ones cleaned up first); without `resume`, an output_dir that
    already holds a job is refused and stale checkpoint folders are removed."""
    ckpt_dir = out / CHECKPOINT_DIR
    if not resume:
        refuse_existing(out)
        if ckpt_dir.exists():
            shutil.rmtree(ckpt_dir)
        return None
    clean_incomplete(ckpt_dir)  # staging areas and unmarked checkpoints of a killed save
    return last_complete_checkpoint(ckpt_dir)


def refuse_existing(out: Path) -> None:
    """A WorkbenchError when `out` already holds a job (an adapter or a complete checkpoint)."""
    if (out / ADAPTER_DIR).exists() or last_complete_checkpoint(out / CHECKPOINT_DIR) is not None:
        raise WorkbenchError(f"output_dir `{out}` already holds a job; pass --resume to continue it, "
                             "or choose a new output_dir")


def job_id_of(out: Path, resume: bool) -> str:
    """The job's id: the one `out` records when resuming, else a new one, recorded there."""
    path = out / JOB_ID_FILE
    if resume and path.is_file():
        return path.read_text().strip()
    job_id = new_id("job")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(job_id + "\n")
    return job_id


def save_adapter(model: Any, dest: Path, *, scale: float = 1.0) -> Path:
    """save_pretrained into a temp dir (its LoRA delta scaled by `scale`: finetune/job/scale.py), then rename:
    `adapter/` is always a whole adapter."""
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    # only the trained adapter: a DPO job continuing one (`init_adapter`) also holds trl's frozen "ref" copy
    model.save_pretrained(str(tmp), selected_adapters=[model.active_adapter])
    if scale != 1.0:
        write_scale(tmp, scale)
    (tmp / COMPLETE).write_text("")  # the same marker as checkpoints: `workbench watch` gates only whole adapters
    if dest.exists():
        shutil.rmtree(dest)
    os.rename(tmp, dest)
    return dest

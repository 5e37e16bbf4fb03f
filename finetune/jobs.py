"""Run one training job: LoRA SFT (trl SFTTrainer), DPO (trl DPOTrainer) or GRPO (trl GRPOTrainer,
finetune/grpo.py) on a fix set.

Read top to bottom, `run_job` does:

1. resolve the spec (every "auto" decided) and save it as `output_dir/job.yaml`;
2. record the job in the store (lineage: eval run, fix set path + hash);
3. load the base model and tokenizer, and the fix set's training rows for the method;
4. build the peft LoRA config (abstention tokens trainable when the fix set teaches abstention);
5. build trl's config (CPU-safe: bf16 and gradient checkpointing off, no wandb, seeded data order);
6. train with atomic checkpoints and the watchdogs, resuming from the last complete checkpoint;
7. save the adapter in the standard peft format at `output_dir/adapter` and record the outcome.

Also a module entry point for the subprocess and `accelerate launch` launchers:
    python -m finetune.jobs JOB.yaml [--resume] [--workspace DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finetune import records
from finetune.checkpoint import COMPLETE, AtomicCheckpointMixin, clean_incomplete, last_complete_checkpoint
from finetune.fixset import FixSetManifest, load_manifest
from finetune.spec import JobSpec, load_spec, resolve_spec, save_spec, with_absolute_paths
from workbench.errors import WorkbenchError
from workbench.store import Store

JOB_FILE = "job.yaml"
JOB_ID_FILE = "job_id"
ADAPTER_DIR = "adapter"
CHECKPOINT_DIR = "checkpoints"
STEP_DELAY_ENV = "FINETUNE_TEST_STEP_DELAY"


@dataclass(frozen=True)
class JobResult:
    """What a job did.

    Attributes:
        job_id: The `jobs` row id (also in output_dir/job_id).
        status: done | stopped (early stop or collapse; the adapter is saved) | failed (NaN: no adapter).
        output_dir: The job directory.
        adapter: The peft adapter directory (None when the job failed).
        steps: Optimizer steps taken in total (across resumes).
        final_loss: The last logged training loss.
        heldout_before: Held-out accuracy of the base model on the fix set's heldout rows (None: no rows,
            or a resumed job); grpo: the mean reward of greedy answers on the held-out prompts.
        heldout_after: The same with the trained adapter.
        resumed_from: The checkpoint a resumed job started from.
        stop_reason: nan | early_stop | collapse (grpo also reward_hacking | kl_blowup | collapsed_length)
            when a watchdog stopped the job.
        message: The watchdog's message, or a one-line summary.
        seconds: Wall time of this call.
    """

    job_id: str
    status: str
    output_dir: str
    adapter: str | None
    steps: int
    final_loss: float | None
    heldout_before: float | None
    heldout_after: float | None
    resumed_from: str | None
    stop_reason: str | None
    message: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_job(spec: JobSpec, store: Store | None = None, *, resume: bool = False,
            callbacks: Sequence[Any] = ()) -> JobResult:
    """Train `spec` to completion (or until a watchdog stops it). `resume=True` continues from the last
    complete checkpoint of `spec.output_dir`; extra trainer `callbacks` are for tests and tools."""
    t0 = time.perf_counter()
    # 1. Resolve and save the spec.
    spec = resolve_spec(with_absolute_paths(spec))
    out = Path(spec.output_dir)
    ckpt_dir = out / CHECKPOINT_DIR
    start_from = _resume_point(out, ckpt_dir, resume)
    manifest = load_manifest(spec.fixset)
    split = manifest.require_rows(spec.method)  # before the job row and the model load
    save_spec(spec, out / JOB_FILE)
    if store is None and spec.workspace:
        store = Store.open(spec.workspace)

    # 2. The job row, events and metrics (a no-op without a store).
    job_id = _job_id(out, resume)
    log = _Recorder(store, job_id)
    log.create(spec, manifest)
    log.status("running")
    if start_from is not None:
        log.event("resume", f"resuming from {start_from.name}", {"checkpoint": str(start_from)})
    else:
        log.event("start", f"{spec.method} on {manifest.train_rows.get(split, 0)} training rows, "
                  f"{spec.trainer.max_steps} steps", {"output_dir": str(out)})

    if os.environ.get(STEP_DELAY_ENV):  # test hook: slow steps so a SIGKILL lands between checkpoints
        from finetune.watchdog import SlowStepsForTests

        callbacks = [*callbacks, SlowStepsForTests(float(os.environ[STEP_DELAY_ENV]))]
    try:
        result = _train(spec, manifest, out, ckpt_dir, start_from, log, callbacks)
    except BaseException as e:
        log.event("failed", f"{type(e).__name__}: {e}")
        log.status("failed", finished=True)
        raise
    result = dataclasses.replace(result, job_id=job_id, seconds=round(time.perf_counter() - t0, 2))
    log.event("done" if result.status != "failed" else "failed", result.message, result.to_dict())
    log.status(result.status, adapter=result.adapter, metrics=result.to_dict(), finished=True)
    return result


def _train(spec: JobSpec, manifest: FixSetManifest, out: Path, ckpt_dir: Path, start_from: Path | None,
           log: _Recorder, callbacks: Sequence[Any]) -> JobResult:
    from datasets import load_from_disk

    from finetune.watchdog import EarlyStopping, HeldoutRow, LossWatchdog, MetricsRecorder, heldout_accuracy

    if spec.method == "grpo":
        from finetune.grpo import train_grpo

        return train_grpo(spec, manifest, out, ckpt_dir, start_from, log, callbacks)
    # 3. Model, tokenizer, data.
    tokenizer, model = load_base(spec)
    data = load_from_disk(spec.fixset)[spec.method]
    columns = ["prompt", "completion"] if spec.method == "sft" else ["prompt", "chosen", "rejected"]
    train = data.filter(lambda r: r["split"] == "train").select_columns(columns)
    heldout = [HeldoutRow(r["prompt"], _target(r["completion" if spec.method == "sft" else "chosen"],
                                               manifest.stop))
               for r in data if r["split"] == "heldout"]

    # 4. LoRA (fresh, or the adapter a staged fix continues).
    model, peft_config = with_adapter(model, spec)

    # 5. trl config.
    t = spec.trainer
    common = trainer_args(spec, ckpt_dir) | {"max_length": t.max_length}
    trainer_cls = _trainer_class(spec.method)
    if spec.method == "sft":
        from trl.trainer.sft_config import SFTConfig

        args: Any = SFTConfig(**common, completion_only_loss=True, packing=False)
    else:
        from trl.trainer.dpo_config import DPOConfig

        args = DPOConfig(**common, beta=t.dpo_beta, loss_type=list(t.dpo_loss_type))

    # 6. Train with atomic checkpoints and watchdogs.
    watchdog = LossWatchdog(log.event, stop_on_nan=spec.watchdog.stop_on_nan,
                            spike_factor=spec.watchdog.spike_factor, window=spec.watchdog.spike_window,
                            min_steps=spec.watchdog.spike_min_steps)
    es = spec.early_stop
    early = EarlyStopping(
        log.event, log.metrics, rows=heldout, stop=manifest.stop, tokenizer=tokenizer, eval_every=es.eval_every,
        patience=es.patience, min_delta=es.min_delta, use_accuracy=es.metric in ("auto", "heldout_accuracy"),
        collapse_nats=es.collapse_nats if spec.method == "dpo" and es.metric in ("auto", "chosen_logp") else None)
    trainer = trainer_cls(model=model, args=args, train_dataset=train, processing_class=tokenizer,
                          peft_config=peft_config,
                          callbacks=[MetricsRecorder(log.metrics), watchdog, early, *callbacks])
    wire_trainer(trainer, spec, log)
    before = None
    if heldout and start_from is None:
        before = heldout_accuracy(trainer.model, tokenizer, heldout, manifest.stop)
        log.metrics(0, {"heldout_accuracy": before})
        early.best = before
    trainer.train(resume_from_checkpoint=str(start_from) if start_from is not None else None)

    # 7. Outcome and adapter.
    stop = watchdog.stopped or early.stopped
    steps = int(trainer.state.global_step)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    final_loss = float(losses[-1]) if losses else None
    if stop is not None and stop.kind == "nan":
        return JobResult("", "failed", str(out), None, steps, final_loss, before, None,
                         str(start_from) if start_from else None, stop.kind, stop.message, 0.0)
    adapter = _save_adapter(trainer.model, out / ADAPTER_DIR)
    after = heldout_accuracy(trainer.model, tokenizer, heldout, manifest.stop) if heldout else None
    if after is not None:
        log.metrics(steps, {"heldout_accuracy": after})
    status = "stopped" if stop is not None else "done"
    message = stop.message if stop is not None else (
        f"{spec.method} done: {steps} steps, loss {final_loss:.4g}" if final_loss is not None else "done")
    return JobResult("", status, str(out), str(adapter), steps, final_loss, before, after,
                     str(start_from) if start_from else None, stop.kind if stop else None, message, 0.0)


def load_base(spec: JobSpec) -> tuple[Any, Any]:
    """The base model's tokenizer (pad = EOS when it has none) and weights in the job's precision."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert spec.base_model is not None  # resolve_spec fills it
    tokenizer = AutoTokenizer.from_pretrained(spec.base_model)
    if tokenizer.eos_token is None:
        raise WorkbenchError(f"base_model `{spec.base_model}`: the tokenizer has no EOS token; trl needs one to "
                             "end completions (set tokenizer.eos_token to a special token and save it)")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(spec.base_model, dtype=torch.bfloat16 if spec.bf16 else torch.float32)
    return tokenizer, model


def wire_trainer(trainer: Any, spec: JobSpec, log: Any) -> None:
    """What every method's trainer needs after construction: the tied-head patch, logs to the store
    (not stdout), checkpoint rotation and a store event per complete checkpoint."""
    from transformers import PrinterCallback

    _patch_trainable_token_heads(trainer.model)
    trainer.remove_callback(PrinterCallback)
    trainer.keep_checkpoints = spec.keep_checkpoints
    trainer.on_checkpoint = lambda step, path: log.event("checkpoint", f"checkpoint at step {step}",
                                                         {"step": step, "path": str(path)})


def with_adapter(model: Any, spec: JobSpec) -> tuple[Any, Any]:
    """(model, peft_config) for the trl trainer: a fresh LoRA from `spec.lora`, or `spec.init_adapter`
    loaded trainable (then the trainer gets the PeftModel and no config; resolve_spec checked the folder)."""
    if spec.init_adapter is None:
        return model, lora_config(spec)
    from peft import PeftModel

    return PeftModel.from_pretrained(model, spec.init_adapter, is_trainable=True), None


def lora_config(spec: JobSpec) -> Any:
    """The peft LoraConfig of a resolved spec (shared by the sft/dpo and grpo jobs)."""
    from peft import LoraConfig

    return LoraConfig(
        r=spec.lora.r, lora_alpha=spec.lora.alpha, lora_dropout=spec.lora.dropout,
        target_modules=spec.lora.target_modules, fan_in_fan_out=bool(spec.lora.fan_in_fan_out),
        trainable_token_indices=spec.lora.trainable_token_indices or None, task_type="CAUSAL_LM")


def trainer_args(spec: JobSpec, ckpt_dir: Path) -> dict[str, Any]:
    """trl config arguments every method shares: optimisation, logging, checkpoints, device."""
    t = spec.trainer
    return dict(
        output_dir=str(ckpt_dir), max_steps=t.max_steps, per_device_train_batch_size=t.per_device_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation, learning_rate=t.learning_rate,
        lr_scheduler_type=t.lr_scheduler, warmup_steps=t.warmup_steps, weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm, seed=t.seed, data_seed=t.seed, logging_steps=t.logging_steps,
        logging_nan_inf_filter=False,  # the NaN watchdog must see NaN losses
        save_strategy="steps" if spec.checkpoint_every else "no", save_steps=spec.checkpoint_every or 500,
        save_total_limit=None,  # AtomicCheckpointMixin rotates complete checkpoints itself
        report_to=[], bf16=bool(spec.bf16), fp16=False, use_cpu=spec.device == "cpu",
        gradient_checkpointing=bool(spec.gradient_checkpointing), dataloader_num_workers=0,
        disable_tqdm=True, eval_strategy="no",
    )


def _trainer_class(method: str) -> Any:
    """trl's trainer for the method with atomic checkpoints in front of its save."""
    from trl.trainer.dpo_trainer import DPOTrainer
    from trl.trainer.sft_trainer import SFTTrainer

    base = SFTTrainer if method == "sft" else DPOTrainer
    return type(f"Atomic{base.__name__}", (AtomicCheckpointMixin, base), {})


def _patch_trainable_token_heads(model: Any) -> None:
    """trl 1.16's fused LM head reads `lm_head.bias`; peft's TrainableTokensWrapper (a tied head with
    `trainable_token_indices`) forwards only `weight`, so the attribute lookup fails. A bias-free head
    gets an explicit `bias = None` (its `weight` already carries the trained token rows)."""
    from peft.utils.other import TrainableTokensWrapper

    for module in model.modules():
        if isinstance(module, TrainableTokensWrapper) and getattr(module.original_module, "bias", None) is None:
            object.__setattr__(module, "bias", None)


def _target(text: str, stop: Sequence[str]) -> str:
    """A completion as the evaluation would return it: without the leading space and the stop string."""
    text = text.strip()
    for s in stop:
        if s and text.endswith(s):
            return text[: -len(s)].strip()
    return text


def _resume_point(out: Path, ckpt_dir: Path, resume: bool) -> Path | None:
    if not resume:
        if (out / ADAPTER_DIR).exists() or last_complete_checkpoint(ckpt_dir) is not None:
            raise WorkbenchError(f"output_dir `{out}` already holds a job; pass --resume to continue it, "
                                 "or choose a new output_dir")
        if ckpt_dir.exists():
            shutil.rmtree(ckpt_dir)
        return None
    clean_incomplete(ckpt_dir)  # staging areas and unmarked checkpoints of a killed save
    return last_complete_checkpoint(ckpt_dir)


def _job_id(out: Path, resume: bool) -> str:
    from workbench.store import new_id

    path = out / JOB_ID_FILE
    if resume and path.is_file():
        return path.read_text().strip()
    job_id = new_id("job")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(job_id + "\n")
    return job_id


def _save_adapter(model: Any, dest: Path) -> Path:
    """save_pretrained into a temp dir, then rename: `adapter/` is always a whole adapter."""
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(str(tmp))
    (tmp / COMPLETE).write_text("")  # the same marker as checkpoints: `workbench watch` gates only whole adapters
    if dest.exists():
        shutil.rmtree(dest)
    os.rename(tmp, dest)
    return dest


class _Recorder:
    """Store writes of one job; silent without a store."""

    def __init__(self, store: Store | None, job_id: str) -> None:
        self.store, self.job_id = store, job_id

    def create(self, spec: JobSpec, manifest: FixSetManifest) -> None:
        if self.store is None or records.job_exists(self.store, self.job_id):
            return
        records.create_job(self.store, method=spec.method, spec=spec.to_dict(), run_id=manifest.run_id,
                           fixset_path=str(Path(manifest.path).resolve()), fixset_hash=manifest.sha256,
                           job_id=self.job_id)

    def status(self, status: str, *, adapter: str | None = None, metrics: Mapping[str, Any] | None = None,
               finished: bool = False) -> None:
        if self.store is not None:
            records.set_status(self.store, self.job_id, status, adapter_path=adapter, metrics=metrics,
                               finished=finished)

    def event(self, kind: str, message: str, data: Mapping[str, Any] | None = None) -> None:
        if self.store is not None:
            records.add_event(self.store, self.job_id, kind, message, data)

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        if self.store is not None:
            records.add_metrics(self.store, self.job_id, step, values)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m finetune.jobs JOB.yaml [--resume] [--workspace DIR]`: prints the JobResult as JSON."""
    p = argparse.ArgumentParser(prog="python -m finetune.jobs", description="Run one finetune job spec.")
    p.add_argument("job", help="job YAML")
    p.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint")
    p.add_argument("--workspace", help="workspace whose store records the job (default: the spec's)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args(argv)
    try:
        if a.threads:
            import torch

            torch.set_num_threads(a.threads)
        spec = load_spec(a.job)
        workspace = a.workspace or spec.workspace
        store = Store.open(workspace) if workspace else None
        result = run_job(spec, store, resume=a.resume)
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result.to_dict()))
    return 0 if result.status != "failed" else 1


if __name__ == "__main__":
    sys.exit(main())

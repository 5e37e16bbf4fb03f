"""The method contract: what SFT, DPO and GRPO each bring to the one run skeleton (finetune/job/run.py).

A method says which fix-set split it trains on and which columns, builds its trl config and trainer,
scores the held-out rows (the score early stopping watches and the job reports before/after), adds its
own watchdogs, and sums up the run in one line. Everything else (model, adapter, store records,
checkpoints, the shared watchdogs, the saved adapter, the result) is the skeleton's, written once.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from finetune.chatform import flat_row
from finetune.job.anchor import NLLAnchor, anchored
from finetune.job.callbacks import EarlyStopping, heldout_accuracy, heldout_rows
from finetune.job.checkpoint import atomic
from finetune.job.resolve import ResolvedJob
from finetune.records import JobRecorder


class Method(abc.ABC):
    """One training method, built per job with the loaded tokenizer and the fix set's split."""

    name: ClassVar[str]
    #: The training columns passed to trl (None: every column; GRPO's rewards read them all).
    columns: ClassVar[tuple[str, ...] | None]
    #: The held-out score's metric name in the store (`heldout_accuracy`, `heldout_reward`).
    heldout_metric: ClassVar[str]

    #: A staged job's later stage: the answers the stages before taught, held by an NLL term of weight
    #: `trainer.earlier_anchor` (finetune/job/anchor.py); None otherwise.
    hold: NLLAnchor | None = None

    def __init__(self, job: ResolvedJob, tokenizer: Any, rows: Any, log: JobRecorder) -> None:
        """`rows`: the method's split of the fix set (a `datasets.Dataset`, train and heldout rows)."""
        self.job, self.tokenizer, self.log = job, tokenizer, log
        train = rows.filter(lambda r: r["split"] == "train")
        self.train = train.select_columns(list(self.columns)) if self.columns is not None else train
        # chat-form rows: prompts rendered as the evaluation renders them, answers as text (the scores generate)
        self.heldout = [flat_row(tokenizer, r) for r in rows if r["split"] == "heldout"]

    @property
    def spike_factor(self) -> float:
        """The loss-spike watchdog's factor (0 turns it off)."""
        return self.job.spec.watchdog.spike_factor

    @abc.abstractmethod
    def config(self, checkpoint_dir: Path) -> Any:
        """trl's config for this method (`trainer_args` plus the method's own settings)."""

    @abc.abstractmethod
    def trainer(self, *, model: Any, args: Any, peft_config: Any, callbacks: Sequence[Any]) -> Any:
        """trl's trainer with atomic checkpoints (finetune/job/checkpoint.py) in front of its save."""

    @abc.abstractmethod
    def score(self, model: Any) -> float:
        """The held-out score of `model` (higher is better; nan without held-out rows)."""

    def early_stopping(self) -> EarlyStopping:
        """The early-stopping callback on `score` (DPO adds the chosen-log-prob collapse)."""
        es = self.job.spec.early_stop
        return EarlyStopping(self.log.event, self.log.metrics, score=self.score, metric=self.heldout_metric,
                             has_rows=bool(self.heldout), eval_every=es.eval_every, patience=es.patience,
                             min_delta=es.min_delta, use_score=es.metric != "chosen_logp")

    def guards(self) -> list[Any]:
        """Watchdog callbacks of this method beyond the shared ones (each with a `stopped` StopReason)."""
        return []

    def held(self, trainer_class: type) -> type:
        """`trainer_class`, with the earlier stages' answers held in its loss when this is a staged job's later
        stage."""
        if self.hold is None:
            return trainer_class
        return anchored(trainer_class, self.hold, self.job.spec.trainer.earlier_anchor)

    def summary(self, steps: int, final_loss: float | None, log_history: Sequence[dict[str, Any]]) -> str:
        """One line for a job that ran to the end."""
        return f"{self.name} done: {steps} steps, loss {final_loss:.4g}" if final_loss is not None else "done"

    def trainer_args(self, checkpoint_dir: Path) -> dict[str, Any]:
        """trl config arguments every method shares: optimisation, logging, checkpoints, device (CPU-safe: bf16
        and gradient checkpointing as resolved, seeded data order; trackers only as `report_to` names, the run
        named after the job: finetune/job/trackers.py)."""
        job, t = self.job, self.job.spec.trainer
        every = job.spec.checkpoint_every
        return dict(
            output_dir=str(checkpoint_dir), max_steps=job.max_steps,
            per_device_train_batch_size=job.batch, gradient_accumulation_steps=t.gradient_accumulation,
            learning_rate=job.learning_rate,
            lr_scheduler_type=t.lr_scheduler, warmup_steps=t.warmup_steps, weight_decay=t.weight_decay,
            max_grad_norm=t.max_grad_norm, seed=t.seed, data_seed=t.seed, logging_steps=t.logging_steps,
            logging_nan_inf_filter=False,  # the NaN watchdog must see NaN losses
            save_strategy="steps" if every else "no", save_steps=every or 500,
            save_total_limit=None,  # AtomicCheckpointMixin rotates complete checkpoints itself
            report_to=list(job.spec.report_to), run_name=self.log.job_id,
            bf16=job.bf16, fp16=False, use_cpu=job.device == "cpu",
            gradient_checkpointing=job.gradient_checkpointing, dataloader_num_workers=0,
            disable_tqdm=True, eval_strategy="no",
        )


class SupervisedMethod(Method):
    """A method trained on written answers (SFT completions, DPO chosen answers): its trainer takes the rows
    as they are, and its held-out score is the greedy accuracy on those answers."""

    #: The column holding the answer a held-out row teaches.
    target: ClassVar[str]

    @abc.abstractmethod
    def trainer_class(self) -> type:
        """trl's trainer class (atomic checkpoints are added in `trainer`)."""

    def trainer(self, *, model: Any, args: Any, peft_config: Any, callbacks: Sequence[Any]) -> Any:
        cls = self.held(self.trainer_class())
        return atomic(cls)(model=model, args=args, train_dataset=self.train, processing_class=self.tokenizer,
                           peft_config=peft_config, callbacks=list(callbacks))

    def score(self, model: Any) -> float:
        stop = self.job.manifest.stop
        return heldout_accuracy(model, self.tokenizer, heldout_rows(self.heldout, self.target, stop), stop)

"""LoRA DPO (trl DPOTrainer; the reference is the base model with the adapter disabled) on the fix set's
`dpo` split: behavior and conflict pairs plus anchor pairs. Held-out score: greedy accuracy on the chosen
answers; early stopping also watches the chosen log-prob for a collapse."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from finetune.job.callbacks import EarlyStopping
from finetune.job.method import SupervisedMethod


class DPO(SupervisedMethod):
    name = "dpo"
    columns = ("prompt", "chosen", "rejected")
    heldout_metric = "heldout_accuracy"
    target = "chosen"

    def config(self, checkpoint_dir: Path) -> Any:
        from trl.trainer.dpo_config import DPOConfig

        t = self.job.spec.trainer
        return DPOConfig(**self.trainer_args(checkpoint_dir), max_length=t.max_length, beta=t.dpo_beta,
                         loss_type=list(t.dpo_loss_type))

    def trainer_class(self) -> type:
        from trl.trainer.dpo_trainer import DPOTrainer

        return DPOTrainer

    def early_stopping(self) -> EarlyStopping:
        early = super().early_stopping()
        es = self.job.spec.early_stop
        early.collapse_nats = es.collapse_nats if es.metric in ("auto", "chosen_logp") else None
        t = self.job.spec.trainer
        epoch_steps = math.ceil(len(self.train) / self.job.rows_per_step)
        early.collapse_window = max(1, math.ceil(epoch_steps / t.logging_steps))  # an epoch of logged batches
        if "sft" not in t.dpo_loss_type:
            early.collapse_hint += " or add 'sft' to trainer.dpo_loss_type"
        return early

"""LoRA DPO (trl DPOTrainer; the reference is the base model with the adapter disabled) on the fix set's
`dpo` split: behavior and conflict pairs plus anchor pairs. Held-out score: greedy accuracy on the chosen
answers; early stopping also watches the chosen log-prob for a collapse. With `trainer.replay_kl` > 0 the loss adds
that weight x KL(base || adapted) over the anchor pairs' prompts and chosen answers (the model's own), as SFT's does
over its replay rows (finetune/job/methods/kl.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from finetune.job.callbacks import EarlyStopping
from finetune.job.method import SupervisedMethod
from finetune.job.methods.kl import kl_trainer, replay_anchor


class DPO(SupervisedMethod):
    name = "dpo"
    columns = ("prompt", "chosen", "rejected")
    heldout_metric = "heldout_accuracy"
    target = "chosen"

    def __init__(self, job: Any, tokenizer: Any, rows: Any, log: Any) -> None:
        self.replay = replay_anchor(job, tokenizer, rows, "chosen")
        super().__init__(job, tokenizer, rows, log)

    def config(self, checkpoint_dir: Path) -> Any:
        from trl.trainer.dpo_config import DPOConfig

        t = self.job.spec.trainer
        return DPOConfig(**self.trainer_args(checkpoint_dir), max_length=t.max_length, beta=t.dpo_beta,
                         loss_type=list(t.dpo_loss_type))

    def trainer_class(self) -> type:
        from trl.trainer.dpo_trainer import DPOTrainer

        # DPO batches carry no labels, so the Trainer divides this loss by the accumulation steps itself
        return kl_trainer(DPOTrainer, [self.replay], self.job.spec.trainer) if self.replay else DPOTrainer

    def trainer(self, *, model: Any, args: Any, peft_config: Any, callbacks: Sequence[Any]) -> Any:
        trainer = super().trainer(model=model, args=args, peft_config=peft_config, callbacks=callbacks)
        if self.job.spec.init_adapter is not None:
            continue_adapter(trainer.model)
        return trainer

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


def continue_adapter(model: Any) -> None:
    """Mend what trl's DPOTrainer does to an adapter it continues (`init_adapter`: a staged job's later stage). It adds
    a frozen copy named "ref" as the reference, copying the parameters named `.default.`:
    - the trainable token rows end in `.default` and are left at the base model's rows, so the reference would not
      say the abstention phrase the adapter was taught: copied here;
    - checkpoints would hold both adapters, "ref" in a subfolder, and transformers' resume then loads only the
      subfolders' adapters, never the trained one at the root (measured: a resumed job 0.028 off the uninterrupted
      one; 0.0 without "ref"): the model saves its trained adapter alone."""
    import functools

    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("trainable_tokens_delta.default"):
                model.get_parameter(name.removesuffix("default") + "ref").copy_(param)
    model.save_pretrained = functools.partial(model.save_pretrained, selected_adapters=[model.active_adapter])

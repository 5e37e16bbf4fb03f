"""LoRA SFT (trl SFTTrainer, completion-only loss) on the fix set's `sft` split: injection, abstention and
replay rows. Held-out score: greedy accuracy on the held-out rows' completions.

With `trainer.rehearsal_kl` > 0 the rehearsal rows (corpus text) leave the cross-entropy rows and each step adds
that weight x KL(base || adapted) over every position of a seeded batch of them (README "Unreplayed known facts").
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from finetune.job.method import SupervisedMethod
from workbench.errors import WorkbenchError


class SFT(SupervisedMethod):
    name = "sft"
    columns = ("prompt", "completion")
    heldout_metric = "heldout_accuracy"
    target = "completion"

    def __init__(self, job: Any, tokenizer: Any, rows: Any, log: Any) -> None:
        self.kl_weight = job.spec.trainer.rehearsal_kl
        self.kl_texts: list[str] = []
        if self.kl_weight > 0:
            self.kl_texts = [r["completion"] for r in rows if r["split"] == "train" and r["source"] == "rehearsal"]
            if not self.kl_texts:
                raise WorkbenchError(f"trainer.rehearsal_kl is {self.kl_weight} but fix set `{job.spec.fixset}` has "
                                     "no rehearsal rows; build it with `workbench fix --rehearsal INDEX`")
            rows = rows.filter(lambda r: r["source"] != "rehearsal")
        super().__init__(job, tokenizer, rows, log)

    def config(self, checkpoint_dir: Path) -> Any:
        from trl.trainer.sft_config import SFTConfig

        return SFTConfig(**self.trainer_args(checkpoint_dir), max_length=self.job.spec.trainer.max_length,
                         completion_only_loss=True, packing=False)

    def trainer_class(self) -> type:
        from trl.trainer.sft_trainer import SFTTrainer

        if self.kl_weight <= 0:
            return SFTTrainer
        return kl_trainer(SFTTrainer, self.kl_texts, self.kl_weight, self.job.spec.trainer)


def kl_batch(texts: list[str], seed: int, step: int, k: int, micro: int = 0) -> list[str]:
    """The `k` rehearsal texts the KL term reads in micro-batch `micro` of optimizer step `step` (micro-batches
    count across gradient accumulation and processes): slice `micro` of a permutation drawn from (seed, step)
    alone, so the micro-batches of a step read different documents (one seed per step gave each the same ones:
    1/GA of the documents), and a job resumed from a checkpoint reads what an uninterrupted one would have."""
    k = min(k, len(texts))
    order = random.Random(f"rehearsal-kl-{seed}-{step}").sample(range(len(texts)), len(texts))
    return [texts[order[(micro * k + i) % len(texts)]] for i in range(k)]


def kl_trainer(base: type, texts: list[str], weight: float, t: Any) -> type:
    """`base` (an SFTTrainer) whose loss adds `weight` x the mean per-token KL(base model || adapted model) over a
    batch of `texts` (`kl_batch`: `t.per_device_batch_size` of them per micro-batch, cut at `t.max_length` tokens)."""
    import torch
    import torch.nn.functional as F

    class KLTrainer(base):  # type: ignore[misc]
        kl_step, kl_micro = -1, 0  # the optimizer step compute_loss last trained on, and its micro-batches so far

        def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            out = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                       num_items_in_batch=num_items_in_batch)
            loss = out[0] if return_outputs else out
            if model.training:
                tok = self.processing_class
                step = int(self.state.global_step)  # advances once per optimizer step, not per micro-batch
                self.kl_micro = self.kl_micro + 1 if step == self.kl_step else 0
                self.kl_step = step
                micro = self.args.process_index * t.gradient_accumulation + self.kl_micro  # each rank its own slice
                docs = kl_batch(texts, t.seed, step, t.per_device_batch_size, micro)
                ids = [tok(d, add_special_tokens=False)["input_ids"][: t.max_length] for d in docs]
                n = max(map(len, ids))
                device = loss.device
                x = torch.tensor([i + [tok.pad_token_id or 0] * (n - len(i)) for i in ids], device=device)
                mask = torch.tensor([[1] * len(i) + [0] * (n - len(i)) for i in ids], device=device)
                with torch.no_grad(), model.disable_adapter():
                    ref = F.log_softmax(model(input_ids=x, attention_mask=mask).logits.float(), -1)
                cur = F.log_softmax(model(input_ids=x, attention_mask=mask).logits.float(), -1)
                kl = ((ref.exp() * (ref - cur)).sum(-1) * mask).sum() / mask.sum()
                # a micro-batch mean: with `num_items_in_batch` the Trainer leaves accumulation to the loss (it
                # does not divide by GA), so average over the step's micro-batches here, as trl does its aux loss
                steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
                loss = loss + weight * kl / steps
            return (loss, out[1]) if return_outputs else loss

    return KLTrainer

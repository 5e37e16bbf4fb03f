"""The KL terms of the supervised methods: each anchor's weight x KL(base model || adapted model) over every position
of a seeded batch of its texts, added to the trainer's loss each micro-batch (finetune/job/methods/sft.py and dpo.py).
The base model is the same network with the adapter disabled, so the term costs one forward pass without and one with
gradients per batch of texts, and no second copy of the model.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from finetune.chatform import flat_row
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class KLAnchor:
    """Texts the adapted model's distribution is held to the base model's on.

    Attributes:
        name: What the texts are ("rehearsal", "replay"); seeds their batches, so two anchors draw apart.
        texts: The texts, each scored at every position.
        weight: The KL term's weight in the loss.
    """

    name: str
    texts: tuple[str, ...]
    weight: float


def replay_anchor(job: Any, tokenizer: Any, rows: Any, answer: str) -> KLAnchor | None:
    """The anchor of `trainer.replay_kl` (decided by resolve: the defaults table when the spec gives none): the
    method's training rows of category `replay`, each its prompt as the evaluation renders it and its `answer`
    column (SFT's completion, DPO's chosen: the model's own answer); None when the weight is 0."""
    t = job.spec.trainer
    if not (t.replay_kl or 0) > 0:
        return None
    replay = (r for r in rows if r["split"] == "train" and r["category"] == "replay")
    texts = tuple(_whole_text(tokenizer, r, answer) for r in replay)
    if not texts:
        raise WorkbenchError(f"trainer.replay_kl is {t.replay_kl} but fix set `{job.spec.fixset}` has no replay rows "
                             "(no known fact to hold); set it to 0")
    return KLAnchor("replay", texts, t.replay_kl)


def _whole_text(tokenizer: Any, row: Any, answer: str = "completion") -> str:
    """A row as one text: its prompt as the evaluation renders it (the chat template for chat rows), then its
    answer."""
    flat = flat_row(tokenizer, row)
    return str(flat["prompt"]) + str(flat[answer])


def kl_batch(texts: Sequence[str], seed: int, step: int, k: int, micro: int = 0, name: str = "rehearsal") -> list[str]:
    """The `k` texts of an anchor the KL term reads in micro-batch `micro` of optimizer step `step` (micro-batches
    count across gradient accumulation and processes): slice `micro` of a permutation drawn from (seed, step)
    alone, so the micro-batches of a step read different documents (one seed per step gave each the same ones:
    1/GA of the documents), and a job resumed from a checkpoint reads what an uninterrupted one would have.
    `name`: the anchor's (each anchor its own order)."""
    k = min(k, len(texts))
    order = random.Random(f"{name}-kl-{seed}-{step}").sample(range(len(texts)), len(texts))
    return [texts[order[(micro * k + i) % len(texts)]] for i in range(k)]


def kl_trainer(base: type, anchors: Sequence[KLAnchor], t: Any) -> type:
    """`base` (an SFTTrainer) whose loss adds, per anchor, its weight x the mean per-token KL(base model || adapted
    model) over a batch of its texts (`kl_batch`: `t.per_device_batch_size` of them per micro-batch, cut at
    `t.max_length` tokens)."""
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
                step = int(self.state.global_step)  # advances once per optimizer step, not per micro-batch
                self.kl_micro = self.kl_micro + 1 if step == self.kl_step else 0
                self.kl_step = step
                micro = self.args.process_index * t.gradient_accumulation + self.kl_micro  # each rank its own slice
                # a micro-batch mean: with `num_items_in_batch` the Trainer leaves accumulation to the loss (it
                # does not divide by GA), so average over the step's micro-batches here, as trl does its aux loss
                steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
                for a in anchors:
                    docs = kl_batch(a.texts, t.seed, step, t.per_device_batch_size, micro, a.name)
                    loss = loss + a.weight * self.kl(model, docs, loss.device) / steps
            return (loss, out[1]) if return_outputs else loss

        def kl(self, model: Any, docs: Sequence[str], device: Any) -> Any:
            tok = self.processing_class
            ids = [tok(d, add_special_tokens=False)["input_ids"][: t.max_length] for d in docs]
            n = max(map(len, ids))
            x = torch.tensor([i + [tok.pad_token_id or 0] * (n - len(i)) for i in ids], device=device)
            mask = torch.tensor([[1] * len(i) + [0] * (n - len(i)) for i in ids], device=device)
            with torch.no_grad(), model.disable_adapter():
                ref = F.log_softmax(model(input_ids=x, attention_mask=mask).logits.float(), -1)
            cur = F.log_softmax(model(input_ids=x, attention_mask=mask).logits.float(), -1)
            return ((ref.exp() * (ref - cur)).sum(-1) * mask).sum() / mask.sum()

    return KLTrainer

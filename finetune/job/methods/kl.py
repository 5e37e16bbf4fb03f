"""The KL terms of the supervised methods: an anchor's weight x KL(base model || adapted model) over every position
of its texts, added to the trainer's loss each micro-batch (finetune/job/methods/sft.py and dpo.py). The base model is
the same network with the adapter disabled: no second copy of the model.

Two ways to pay for it:
- a separate batch (`kl_trainer`'s `anchors`): a seeded batch of the anchor's texts each micro-batch, one forward pass
  without gradients (the base) and one with (the adapted model); the rehearsal term and DPO's replay term;
- in the batch (`kl_trainer`'s `inbatch`, SFT's replay term): the replay rows are training rows too, so the adapted
  model's logits over them come with the batch's own forward pass (the cross-entropy is then computed from the same
  full logits), and the base model's distribution over each replay text is computed once, the first time the text
  comes in a batch, and kept as its TOPK log-probabilities and the mass of the rest (`BaseTopK`). The KL between the
  two distributions coarse-grained to those TOPK tokens and one bucket for the rest is a lower bound of the exact KL,
  close to it where the base model's top tokens hold most of the mass (docs/benchmarks/staged_fix.md measures it).
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


#: Base-model log-probabilities kept per position of a replay text for the in-batch KL term.
TOPK = 64
#: The training dataset's column that marks the rows the in-batch KL term reads (SFT's replay rows).
KL_COLUMN = "replay_kl_row"


class BaseTopK:
    """The base model's next-token distribution over each replay text, computed once: per position its TOPK
    log-probabilities, their token ids and the log of the rest's mass, by the text's token ids."""

    def __init__(self, keys: set[tuple[int, ...]]) -> None:
        self.keys = keys
        self.cache: dict[tuple[int, ...], tuple[Any, Any, Any]] = {}

    def fill(self, model: Any, ids: Any, mask: Any, rows: Sequence[int]) -> None:
        """Score the rows of the batch whose texts are not cached yet, with the adapter disabled (no gradients)."""
        import torch
        import torch.nn.functional as F

        todo = [b for b in rows if _key(ids, mask, b) not in self.cache]
        if not todo:
            return
        with torch.no_grad(), model.disable_adapter():
            ref = F.log_softmax(model(input_ids=ids[todo], attention_mask=mask[todo]).logits.float(), -1)
        top, idx = ref.topk(min(TOPK, ref.shape[-1]), dim=-1)
        rest = torch.log1p(-top.exp().sum(-1).clamp(max=1 - 1e-6))
        for j, b in enumerate(todo):
            n = int(mask[b].sum())
            self.cache[_key(ids, mask, b)] = (top[j, :n].cpu(), idx[j, :n].cpu(), rest[j, :n].cpu())

    def kl(self, logp: Any, ids: Any, mask: Any, rows: Sequence[int]) -> Any:
        """Mean per-token KL(base || adapted) over the rows' positions, `logp` the adapted model's log-probs."""
        import torch

        total, count = logp.new_zeros(()), 0
        for b in rows:
            top, idx, rest = (t.to(logp.device) for t in self.cache[_key(ids, mask, b)])
            n = top.shape[0]
            cur = logp[b, :n].gather(-1, idx)
            cur_rest = torch.log1p(-cur.exp().sum(-1).clamp(max=1 - 1e-6))
            total = total + (top.exp() * (top - cur)).sum() + (rest.exp() * (rest - cur_rest)).sum()
            count += n
        return total / max(count, 1)


def _key(ids: Any, mask: Any, b: int) -> tuple[int, ...]:
    return tuple(int(i) for i in ids[b][mask[b].bool()].tolist())


def kl_trainer(base: type, anchors: Sequence[KLAnchor], t: Any, inbatch: KLAnchor | None = None) -> type:
    """`base` (an SFTTrainer or DPOTrainer) whose loss adds, per anchor, its weight x the mean per-token KL(base
    model || adapted model) over a batch of its texts (`kl_batch`: `t.per_device_batch_size` of them per micro-batch,
    cut at `t.max_length` tokens); and, with `inbatch` (SFT), its weight x the KL over the batch's own rows marked
    KL_COLUMN (the trainer's `kl_rows`, set after its dataset is prepared), from the batch's forward pass."""
    import torch
    import torch.nn.functional as F

    class KLTrainer(base):  # type: ignore[misc]
        kl_step, kl_micro = -1, 0  # the optimizer step compute_loss last trained on, and its micro-batches so far
        kl_rows: BaseTopK | None = None
        kl_seen: dict[str, list[Any]]  # each term's KL values since the last logged loss (tensors: no sync per step)

        def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
            """Each KL term's mean since the last loss line as `kl/NAME` (the job's metrics, the trackers)."""
            seen = getattr(self, "kl_seen", {})
            if "loss" in logs and seen:
                logs.update({f"kl/{name}": float(torch.stack(v).mean()) for name, v in seen.items() if v})
                self.kl_seen = {}
            super().log(logs, *args, **kwargs)

        def _seen(self, name: str, value: Any) -> None:
            if not hasattr(self, "kl_seen"):
                self.kl_seen = {}
            self.kl_seen.setdefault(name, []).append(value.detach())

        def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            if inbatch is not None and model.training and self.kl_rows is not None:
                out = self._inbatch_loss(model, inputs, return_outputs, num_items_in_batch)
            else:
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
                    value = self.kl(model, docs, loss.device)
                    self._seen(a.name, value)
                    loss = loss + a.weight * value / steps
            return (loss, out[1]) if return_outputs else loss

        def _inbatch_loss(self, model: Any, inputs: Any, return_outputs: bool, num_items_in_batch: Any) -> Any:
            """The SFT cross-entropy (as trl's `nll` loss: the completion tokens' summed NLL over the batch's token
            count) and the in-batch KL term, both from one forward pass with the full logits."""
            assert self.kl_rows is not None and inbatch is not None
            labels = inputs["labels"]
            outputs = model(**{k: v for k, v in inputs.items() if k != "labels"}, use_cache=False)
            logp = F.log_softmax(outputs.logits.float(), -1)
            target = labels[:, 1:]
            scored = target != -100
            token_logp = logp[:, :-1].gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            tokens = scored.sum() if num_items_in_batch is None else num_items_in_batch
            loss = -(token_logp * scored).sum() / torch.as_tensor(tokens).clamp(min=1)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes
            ids = inputs["input_ids"]
            mask = inputs.get("attention_mask")
            mask = torch.ones_like(ids) if mask is None else mask
            rows = [b for b in range(ids.shape[0]) if _key(ids, mask, b) in self.kl_rows.keys]
            if rows:
                self.kl_rows.fill(model, ids, mask, rows)
                steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
                value = self.kl_rows.kl(logp, ids, mask, rows)
                self._seen(inbatch.name, value)
                loss = loss + inbatch.weight * value / steps
            return (loss, outputs) if return_outputs else loss

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

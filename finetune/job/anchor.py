"""NLL anchors: the mean NLL of answers a job must keep, teacher-forced, added to a trainer's loss.

Two jobs use one:
- GRPO's replay anchor (`grpo.replay_anchor`): the accepted answers of facts the model knew (InstructGPT's PPO-ptx,
  the replay prompts as the data to keep; finetune/job/methods/grpo.py);
- a staged job's later stages (`trainer.earlier_anchor`): the answers the stages before taught (abstention, injected
  facts, behaviour fixes). Measured on the default world: a DPO stage after SFT without it undid the SFT stage's
  abstention (47 of 55 missing facts abstaining -> 0) and most of its injected facts (41 -> 14 of 53); SFT after DPO
  undid most of DPO's behaviour fixes (93 -> 31 of 138) (docs/benchmarks/staged_fix.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from finetune.chatform import flat_row
from finetune.fixset import UNTARGETED

#: NLL of the replay answers in GRPO's replay anchor term (grpo.replay_anchor).
ANCHOR_NLL = "anchor/nll"
#: NLL of the earlier stages' answers in a staged job's later stage (trainer.earlier_anchor).
EARLIER_NLL = "earlier/nll"


class NLLAnchor:
    """Mean NLL of (prompt, completion) pairs' completions, teacher-forced.

    `loss = loss + weight * anchor.nll(model, step)`. Each call takes `batch` pairs in a fixed cycle indexed by the
    optimizer step, so a resumed job sees the same pairs as an uninterrupted one. Prompts are tokenized as the
    evaluation sends them (special tokens included), completions without, then EOS (the end of the answer).
    """

    def __init__(self, tokenizer: Any, pairs: Sequence[tuple[str, str]], *, batch: int) -> None:
        eos = [int(tokenizer.eos_token_id)]
        self.pad = int(tokenizer.pad_token_id)
        self.rows = [(list(tokenizer(p)["input_ids"]), [*tokenizer(c, add_special_tokens=False)["input_ids"], *eos])
                     for p, c in sorted(set(pairs))]
        self.batch = min(batch, len(self.rows))

    def nll(self, model: Any, step: int) -> Any:
        import torch

        start = (step * self.batch) % len(self.rows)
        chosen = [self.rows[(start + k) % len(self.rows)] for k in range(self.batch)]
        width = max(len(p) + len(c) for p, c in chosen)
        ids = torch.full((len(chosen), width), self.pad, dtype=torch.long)
        labels = torch.full_like(ids, -100)  # only the answer tokens are scored
        mask = torch.zeros_like(ids)
        for i, (p, c) in enumerate(chosen):
            ids[i, : len(p) + len(c)] = torch.tensor(p + c)
            labels[i, len(p) : len(p) + len(c)] = torch.tensor(c)
            mask[i, : len(p) + len(c)] = 1
        device = next(model.parameters()).device
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
        return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten().to(device),
                                                 ignore_index=-100)


def earlier_pairs(tokenizer: Any, rows: Any, split: str) -> list[tuple[str, str]]:
    """(prompt as the evaluation renders it, answer taught) of a stage's targeted training rows: SFT completions,
    DPO chosen answers; GRPO prompts teach no one answer and give none."""
    column = {"sft": "completion", "dpo": "chosen"}.get(split)
    if column is None:
        return []
    out = []
    for row in rows:
        if row["split"] == "train" and row["category"] not in UNTARGETED:
            flat = flat_row(tokenizer, row)
            out.append((str(flat["prompt"]), str(flat[column])))
    return out


def anchored(base: type, anchor: NLLAnchor, weight: float, metric: str = EARLIER_NLL) -> type:
    """`base` (a trl trainer) whose training loss adds `weight` x `anchor.nll` each micro-batch (averaged over the
    step's micro-batches, as the KL terms are: finetune/job/methods/kl.py), logged as `metric`."""
    from workbench.compat.transformers import train_metrics

    class Anchored(base):  # type: ignore[misc]
        def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            out = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                       num_items_in_batch=num_items_in_batch)
            if not model.training or weight <= 0:
                return out
            loss = out[0] if return_outputs else out
            nll = anchor.nll(model, int(self.state.global_step))
            train_metrics(self)["train"][metric].append(float(nll.detach()))
            steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
            loss = loss + weight * nll / steps
            return (loss, out[1]) if return_outputs else loss

    return Anchored

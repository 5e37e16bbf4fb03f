"""GRPO's own watchdogs: blanket abstention on the replay prompts, KL blow-up, collapsed completions."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from finetune.job.callbacks import Report, StopReason
from finetune.job.methods.rewards import REPLAY_ABSTENTION, SAMPLED_LENGTH

#: Exact KL(policy || base) per answer token on replay prompts, measured by GRPOWatchdog.
REPLAY_KL = "kl/replay"


class GRPOWatchdog(TrainerCallback):
    """GRPO's failure modes, each judged on the mean of its last `window` logged values:

    - `reward_hacking`: sampled completions on replay prompts (facts the model knew) abstain more
      often than `max_replay_abstention` (silence scores 0 and never -penalty: blanket abstention);
    - `kl_blowup`: the policy drifts from the base model where it should not move: the exact
      KL(policy || base) per token over the vocabulary, along the accepted answers of up to `kl_rows`
      replay prompts, measured every logged step (`kl/replay`), above `max_kl`. trl's own `kl` is not
      used: it is a sampled estimate, meaningless on the guidance completions, and on the targeted
      prompts learning to abstain is a large KL by design;
    - `collapsed_length`: the sampled completions' mean length (tokens) below `min_length`.
    """

    def __init__(self, report: Report, *, max_replay_abstention: float, max_kl: float, min_length: float,
                 window: int = 3, record: Callable[[int, Mapping[str, float]], None] | None = None,
                 tokenizer: Any = None, replay: Sequence[tuple[str, str]] = (), kl_rows: int = 32) -> None:
        self.report, self.record, self.tokenizer = report, record, tokenizer
        self.replay = list(replay)[:kl_rows]
        self.checks: list[tuple[str, str, float, bool, str]] = [
            ("reward_hacking", REPLAY_ABSTENTION, max_replay_abstention, True,
             "sampled completions abstain on {v:.0%} of the replay prompts (known facts; bound {b:.0%}): the "
             "policy is learning to abstain everywhere; raise grpo.replay_anchor or the replay share "
             "(--replay-ratio), lower grpo.temperature, grpo.hallucination_penalty or trainer.learning_rate"),
            ("kl_blowup", REPLAY_KL, max_kl, True,
             "KL to the base model on the replay prompts is {v:.3g} nats per token (bound {b:.3g}): the policy "
             "drifts on facts it knew; lower trainer.learning_rate or raise grpo.beta"),
            ("collapsed_length", SAMPLED_LENGTH, min_length, False,
             "sampled completions average {v:.2f} tokens (bound {b:.2f}): the policy stops before answering; "
             "lower trainer.learning_rate or grpo.format_weight"),
        ]
        self.history: dict[str, deque[float]] = {key: deque(maxlen=window) for _, key, _, _, _ in self.checks}
        self.stopped: StopReason | None = None

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, model: Any = None, **kwargs: Any) -> None:
        if not logs or self.stopped is not None:
            return
        if model is not None and self.replay and self.tokenizer is not None:
            logs[REPLAY_KL] = replay_kl(model, self.tokenizer, self.replay)
            if self.record is not None:
                self.record(state.global_step, {REPLAY_KL: logs[REPLAY_KL]})
        for kind, key, bound, above, template in self.checks:
            value = logs.get(key)
            if not isinstance(value, int | float) or not math.isfinite(float(value)):
                continue
            seen = self.history[key]
            seen.append(float(value))
            if len(seen) < (seen.maxlen or 1):
                continue
            mean = sum(seen) / len(seen)
            if (mean > bound) if above else (mean < bound):
                step = state.global_step
                msg = f"{template.format(v=mean, b=bound)} (step {step})"
                self.report(kind, msg, {"step": step, "metric": key, "value": mean, "bound": bound})
                self.stopped = StopReason(kind, msg, step)
                control.should_training_stop = True
                return


def replay_kl(model: Any, tokenizer: Any, rows: Sequence[tuple[str, str]]) -> float:
    """Mean exact KL(policy || base) per completion token (full vocabulary), teacher-forced along
    (prompt, completion) pairs; the base is the peft model with its adapter disabled."""
    import torch

    was_training = model.training
    model.eval()
    side = tokenizer.padding_side
    tokenizer.padding_side = "right"
    try:
        device = next(model.parameters()).device
        prompts = [tokenizer(p)["input_ids"] for p, _ in rows]
        full = [tokenizer(p + c)["input_ids"] for p, c in rows]
        enc = tokenizer([p + c for p, c in rows], return_tensors="pt", padding=True).to(device)
        mask = torch.zeros_like(enc["input_ids"], dtype=torch.bool)
        for i, (p, f) in enumerate(zip(prompts, full, strict=True)):
            mask[i, len(p) - 1 : len(f) - 1] = True  # positions that predict a completion token
        with torch.no_grad():
            logp = model(**enc).logits.float().log_softmax(-1)
            with model.disable_adapter():
                base = model(**enc).logits.float().log_softmax(-1)
        kl = (logp.exp() * (logp - base)).sum(-1)
        return float(kl[mask].mean())
    finally:
        tokenizer.padding_side = side
        if was_training:
            model.train()

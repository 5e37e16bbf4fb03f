"""GRPO on a fix set's `prompts` split: trl's GRPOTrainer with a LoRA adapter, rewarded by the suite's grader.

What it brings to the run skeleton, read top to bottom:

1. the rewards (finetune/job/methods/rewards.py): the grader's verdict of each completion cut at the first
   stop string (correct +1, not attempted 0, incorrect -hallucination_penalty) and a format reward;
2. abstention guidance: the abstention phrase is new to the model (probability ~1e-20 as a whole), so
   on-policy sampling never finds it and GRPO could never learn that silence beats a hallucination.
   `grpo.abstention_guidance` completions of every group are replaced by the phrase (an off-policy
   sample, like a demonstration). Where the group hallucinates it beats the group and is reinforced;
   its advantage is clipped at 0, so where the group answers correctly it is ignored rather than
   pushed down (pushing the same tokens up on one prompt and down on the next cancels out: measured,
   the phrase rose equally on known and unknown facts). Once the model samples the phrase itself,
   on-policy GRPO teaches where it loses (0 < +1 on known facts);
3. the replay anchor (`NLLAnchor`, weight `grpo.replay_anchor`): an NLL term on the accepted answers
   of the replay prompts, because a group that is all correct has zero advantage and GRPO alone does
   not hold the facts the model knew while the phrase rises (measured: a third of them abstained);
4. its watchdogs (finetune/job/methods/grpo_watchdog.py): blanket abstention on the replay prompts,
   KL blow-up, collapsed completions; held-out early stopping on the greedy held-out reward.

Generation goes through vLLM colocated in the training process (`grpo.use_vllm`, on CUDA by default) or
the model's own `generate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from finetune.chatform import render_text
from finetune.job.anchor import ANCHOR_NLL, NLLAnchor
from finetune.job.method import Method
from finetune.job.methods.grpo_watchdog import GRPOWatchdog
from finetune.job.methods.kl import KLAnchor, kl_trainer
from finetune.job.methods.rewards import build_rewards, guidance_ids, heldout_reward, is_guided
from finetune.job.resolve import ResolvedJob
from finetune.records import JobRecorder
from workbench.compat.transformers import (
    GRPO_GENERATE_AND_SCORE,
    GRPO_GENERATE_SINGLE_TURN,
    TRAINER_SAVE_CHECKPOINT,
    check_overrides,
    train_metrics,
)
from workbench.prompting import CHAT


def guided_trainer_class() -> Any:
    """trl's GRPOTrainer with atomic checkpoints, abstention guidance after each generation and the
    replay anchor added to the loss."""
    import torch
    from trl.trainer.grpo_trainer import GRPOTrainer

    from finetune.job.checkpoint import AtomicCheckpointMixin

    base: Any = GRPOTrainer  # trl's private hooks below are untyped: overridden as Any
    # The two trl hooks overridden below are private API (trl 1.16.0), declared in workbench/compat/transformers.py
    # and checked when the class is built (a renamed hook would otherwise never be called).

    class GuidedGRPOTrainer(AtomicCheckpointMixin, base):  # type: ignore[misc]
        guide_ids: tuple[int, ...] = ()
        guided: int = 0
        anchor: NLLAnchor | None = None
        anchor_weight: float = 0.0

        def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.anchor is not None and self.anchor_weight > 0 and model.training:
                nll = self.anchor.nll(model, self.state.global_step)
                train_metrics(self)["train"][ANCHOR_NLL].append(float(nll.detach()))
                loss = loss + self.anchor_weight * nll
            return loss

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            out = super()._generate_and_score_completions(inputs)
            if self.guided and self.model.training:
                adv = out["advantages"]
                offset = self.accelerator.process_index * len(adv)
                mask = [is_guided(offset + i, self.num_generations, self.guided) for i in range(len(adv))]
                keep = torch.tensor(mask, dtype=torch.bool, device=adv.device)
                adv[keep] = adv[keep].clamp(min=0.0)
            return out

        def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int,
                                  has_tool_images: bool = False) -> tuple[Any, Any]:
            completion_ids, logprobs = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
            if self.guided and self.model.training:
                completion_ids = list(completion_ids)
                for i in range(len(completion_ids)):
                    if is_guided(i, num_generations, self.guided):
                        completion_ids[i] = list(self.guide_ids)
                        if logprobs is not None:  # vLLM: unused (importance-sampling correction is off)
                            logprobs[i] = [0.0] * len(self.guide_ids)
            return completion_ids, logprobs

    return check_overrides(GuidedGRPOTrainer,
                           [TRAINER_SAVE_CHECKPOINT, GRPO_GENERATE_AND_SCORE, GRPO_GENERATE_SINGLE_TURN])


class GRPO(Method):
    """trl's GRPOTrainer on every prompt column (the rewards read answers, source, probe ids)."""

    name = "grpo"
    columns = None
    heldout_metric = "heldout_reward"

    def __init__(self, job: ResolvedJob, tokenizer: Any, rows: Any, log: JobRecorder) -> None:
        super().__init__(job, tokenizer, rows, log)
        m, g = job.manifest, job.spec.grpo
        self.rewards = build_rewards(g, m, int(tokenizer.eos_token_id))
        # (prompt text, answer) pairs of the replay anchor and the KL watchdog; chat rows: the rendered template
        # and the bare answer (the anchor appends the end-of-turn token, EOS, itself)
        end = "" if m.template == CHAT else next((s for s in m.stop if s.strip()), "")
        space = "" if m.template == CHAT else " "
        self.replay = sorted({(render_text(tokenizer, r["prompt"]), space + r["answers"][0] + end)
                              for r in self.train if r["source"] == "replay"})

    @property
    def spike_factor(self) -> float:
        return 0.0  # GRPO's loss hovers around 0: a ratio to its median means nothing

    def config(self, checkpoint_dir: Path) -> Any:
        """trl's GRPOConfig (vLLM colocated when `use_vllm` was resolved on)."""
        from trl.trainer.grpo_config import GRPOConfig

        g = self.job.spec.grpo
        vllm: dict[str, Any] = {}
        if self.job.use_vllm:
            vllm = dict(vllm_mode="colocate", vllm_max_model_length=self.job.spec.trainer.max_length,
                        # guidance completions were not sampled by vLLM: their "sampling" log-probs are made up
                        vllm_importance_sampling_correction=g.abstention_guidance == 0)
        return GRPOConfig(
            **self.trainer_args(checkpoint_dir),
            num_generations=g.num_generations, max_completion_length=g.max_completion_length,
            temperature=g.temperature, beta=g.beta, loss_type=g.loss_type, disable_dropout=True,
            use_vllm=self.job.use_vllm, **vllm,
            reward_weights=[1.0, g.format_weight] if g.format_weight > 0 else [1.0],
            log_completions=False,
        )

    def trainer(self, *, model: Any, args: Any, peft_config: Any, callbacks: Sequence[Any]) -> Any:
        g, m = self.job.spec.grpo, self.job.manifest
        cls = self.held(guided_trainer_class())
        t = self.job.spec.trainer
        if (t.replay_kl or 0) > 0 and self.replay:  # the SFT / DPO term, over the replay prompts and their answers
            cls = kl_trainer(cls, [KLAnchor("replay", tuple(p + a for p, a in self.replay), t.replay_kl or 0.0)], t)
        trainer = cls(model=model, reward_funcs=self.rewards, args=args, train_dataset=self.train,
                      processing_class=self.tokenizer, peft_config=peft_config, callbacks=list(callbacks))
        trainer.guided = g.abstention_guidance
        if trainer.guided:
            trainer.guide_ids = tuple(guidance_ids(self.tokenizer, m.abstention_phrase, m.stop,
                                                   model=self.job.base_model, chat=m.template == CHAT))
        if g.replay_anchor > 0 and self.replay:
            trainer.anchor = NLLAnchor(self.tokenizer, self.replay, batch=g.replay_anchor_batch)
            trainer.anchor_weight = g.replay_anchor
        return trainer

    def score(self, model: Any) -> float:
        """The mean grader reward (no format term) of the greedy answers to the held-out prompts."""
        return heldout_reward(model, self.tokenizer, self.heldout, self.rewards[0],
                              self.job.spec.grpo.max_completion_length)

    def guards(self) -> list[Any]:
        g = self.job.spec.grpo
        return [GRPOWatchdog(self.log.event, max_replay_abstention=g.max_replay_abstention, max_kl=g.max_kl,
                             min_length=g.min_completion_length, window=g.watch_window, record=self.log.metrics,
                             tokenizer=self.tokenizer, replay=self.replay)]

    def summary(self, steps: int, final_loss: float | None, log_history: Sequence[dict[str, Any]]) -> str:
        rewards = [h["reward"] for h in log_history if "reward" in h]
        first, last = (rewards[0], rewards[-1]) if rewards else (float("nan"), float("nan"))
        return f"grpo done: {steps} steps, mean reward {first:.3f} -> {last:.3f}"

"""GRPO on a fix set's `prompts` split: trl's GRPOTrainer with a LoRA adapter, rewarded by the suite's grader.

Read top to bottom:

1. the rewards: `GraderReward` cuts each sampled completion at the first stop string and grades it
   with the suite's grader against the row's accepted answers (correct +1, not attempted 0,
   incorrect -hallucination_penalty, SimpleQA-style: a wrong answer costs more than silence);
   `FormatReward` pays for stopping cleanly (the stop string, then EOS);
2. abstention guidance: the abstention phrase is new to the model (probability ~1e-20 as a whole),
   so on-policy sampling never finds it and GRPO could never learn that silence beats a
   hallucination. `grpo.abstention_guidance` completions of every group are replaced by the phrase
   (an off-policy sample, like a demonstration). Where the group hallucinates it beats the group
   and is reinforced; its advantage is clipped at 0, so where the group answers correctly it is
   ignored rather than pushed down (pushing the same tokens up on one prompt and down on the next
   cancels out: measured, the phrase rose equally on known and unknown facts). Once the model
   samples the phrase itself, on-policy GRPO teaches where it loses (0 < +1 on known facts);
3. the replay anchor (`ReplayAnchor`, weight `grpo.replay_anchor`): an NLL term on the accepted answers
   of the replay prompts, because a group that is all correct has zero advantage and GRPO alone does
   not hold the facts the model knew while the phrase rises (measured: a third of them abstained);
4. the watchdogs (`GRPOWatchdog`): blanket abstention on the replay prompts (`reward_hacking`),
   KL blow-up (`kl_blowup`), collapsed completions (`collapsed_length`); the shared NaN/spike
   watchdog and held-out early stopping (on the greedy held-out reward) run as for SFT/DPO;
5. `train_grpo`, the job body `finetune.jobs.run_job` dispatches `method: grpo` to.

Generation goes through vLLM colocated in the training process (`grpo.use_vllm`, on CUDA by
default) or the model's own `generate`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from finetune.watchdog import EarlyStopping, Report, StopReason
from workbench.errors import WorkbenchError
from workbench.grading import Grader, make_grader
from workbench.types import Probe, Verdict

if TYPE_CHECKING:
    from finetune.fixset import FixSetManifest
    from finetune.jobs import JobResult, _Recorder
    from finetune.spec import GRPOSpec, JobSpec

#: Metric names the reward function logs (trl averages them per logging step).
REPLAY_ABSTENTION = "abstention/replay"
SAMPLED_LENGTH = "completions/sampled_mean_length"
#: Exact KL(policy || base) per answer token on replay prompts, measured by GRPOWatchdog.
REPLAY_KL = "kl/replay"
#: NLL of the replay answers in the replay anchor term (grpo.replay_anchor).
ANCHOR_NLL = "anchor/nll"


# -- 1. rewards ----------------------------------------------------------------------------------------


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The answer as the evaluation sees it: the text before the first stop string."""
    cut = min((k for k in (text.find(s) for s in stop if s) if k >= 0), default=len(text))
    return text[:cut]


def is_guided(index: int, num_generations: int, guided: int) -> bool:
    """Whether completion `index` of a generation batch is a guidance completion (the last `guided` of
    each group of `num_generations`; trl's sampler keeps each prompt's group contiguous)."""
    return guided > 0 and index % num_generations >= num_generations - guided


class GraderReward:
    """Reward of one completion from the suite's grader: correct +1, not attempted 0, incorrect -penalty.

    Called by trl with the batch's dataset columns as keyword lists (`answers`, `incorrect_answers`,
    `source`, ...). Logs the abstention rate of the *sampled* (not guided) completions on replay prompts
    (`abstention/replay`), and per-slice rates, through trl's `log_metric`.
    """

    __name__ = "grader"

    def __init__(self, grader: Grader, stop: Sequence[str], *, penalty: float = 1.0, num_generations: int = 1,
                 guided: int = 0) -> None:
        self.grader, self.stop, self.penalty = grader, list(stop), penalty
        self.num_generations, self.guided = num_generations, guided

    def score(self, verdict: Verdict) -> float:
        return {Verdict.CORRECT: 1.0, Verdict.NOT_ATTEMPTED: 0.0}.get(verdict, -self.penalty)

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], answers: Sequence[Sequence[str]],
                 incorrect_answers: Sequence[Sequence[str]] | None = None, source: Sequence[str] | None = None,
                 probe_id: Sequence[str] | None = None, completion_ids: Sequence[Sequence[int]] | None = None,
                 log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
        n = len(completions)
        wrong = incorrect_answers if incorrect_answers is not None else [()] * n
        ids = probe_id if probe_id is not None else [f"p{i}" for i in range(n)]
        items = [(Probe(id=str(ids[i]), question=str(prompts[i]), answers=tuple(answers[i]),
                        incorrect_answers=tuple(wrong[i])), cut_at_stop(completions[i], self.stop).strip())
                 for i in range(n)]
        verdicts = self.grader.grade_many(items)
        if log_metric is not None:
            self._log(verdicts, source or ["targeted"] * n, completion_ids, log_metric)
        return [self.score(v) for v in verdicts]

    def _log(self, verdicts: Sequence[Verdict], source: Sequence[str], completion_ids: Sequence[Sequence[int]] | None,
             log_metric: Callable[[str, float], None]) -> None:
        sampled = [i for i in range(len(verdicts)) if not is_guided(i, self.num_generations, self.guided)]
        for name in ("replay", "targeted"):
            rows = [verdicts[i] for i in sampled if source[i] == name]
            if rows:
                log_metric(f"abstention/{name}", sum(v == Verdict.NOT_ATTEMPTED for v in rows) / len(rows))
                log_metric(f"incorrect/{name}", sum(v == Verdict.INCORRECT for v in rows) / len(rows))
                log_metric(f"correct/{name}", sum(v == Verdict.CORRECT for v in rows) / len(rows))
        if completion_ids is not None and sampled:
            log_metric(SAMPLED_LENGTH, sum(len(completion_ids[i]) for i in sampled) / len(sampled))


class FormatReward:
    """1.0 when the completion stops cleanly: a stop string, nothing after it, then EOS (so it ended within
    max_completion_length); else 0. Scaled by `grpo.format_weight` through trl's reward_weights."""

    __name__ = "format"

    def __init__(self, stop: Sequence[str], eos_token_id: int) -> None:
        self.stop, self.eos = [s for s in stop if s], eos_token_id

    def __call__(self, prompts: Sequence[str], completions: Sequence[str],
                 completion_ids: Sequence[Sequence[int]], **kwargs: Any) -> list[float]:
        return [float(self.clean(text, ids)) for text, ids in zip(completions, completion_ids, strict=True)]

    def clean(self, text: str, ids: Sequence[int]) -> bool:
        if not ids or ids[-1] != self.eos:
            return False
        hits = [(k, s) for s in self.stop if (k := text.find(s)) >= 0]
        if not hits:
            return not self.stop  # no stop strings: EOS alone is a clean stop
        k, s = min(hits)
        return bool(text[:k].strip()) and not text[k + len(s):].strip()


# -- 2, 3. abstention guidance, the replay anchor -----------------------------------------------------


def guidance_ids(tokenizer: Any, phrase: str, stop: Sequence[str]) -> list[int]:
    """Token ids of the guidance completion: " phrase" + the first stop string + EOS."""
    end = next((s for s in stop if s.strip()), "")
    ids = [int(i) for i in tokenizer(" " + phrase + end, add_special_tokens=False)["input_ids"]]
    unk = tokenizer.unk_token_id
    if unk is not None and unk in ids:
        raise WorkbenchError(f"grpo.abstention_guidance: the tokenizer cannot spell the abstention phrase "
                             f"`{phrase}` (it maps to [UNK]); add its words to the tokenizer or set "
                             "`grpo.abstention_guidance: 0`")
    return [*ids, int(tokenizer.eos_token_id)]


class ReplayAnchor:
    """The replay anchor: mean NLL of the accepted answers of facts the model knew, teacher-forced.

    `loss = grpo_loss + weight * anchor.nll(model, step)` is InstructGPT's PPO-ptx with the replay
    prompts as the data to keep. Each call takes `batch` (prompt, completion) pairs in a fixed cycle
    indexed by the optimizer step, so a resumed job sees the same pairs as an uninterrupted one.
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


def _trainer_class() -> Any:
    """trl's GRPOTrainer with atomic checkpoints, abstention guidance after each generation and the
    replay anchor added to the loss."""
    import torch
    from trl.trainer.grpo_trainer import GRPOTrainer

    from finetune.checkpoint import AtomicCheckpointMixin

    base: Any = GRPOTrainer  # trl's private hooks below are untyped: overridden as Any

    class GuidedGRPOTrainer(AtomicCheckpointMixin, base):  # type: ignore[misc]
        guide_ids: tuple[int, ...] = ()
        guided: int = 0
        anchor: ReplayAnchor | None = None
        anchor_weight: float = 0.0

        def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.anchor is not None and self.anchor_weight > 0 and model.training:
                nll = self.anchor.nll(model, self.state.global_step)
                self._metrics["train"][ANCHOR_NLL].append(float(nll.detach()))
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

    return GuidedGRPOTrainer


# -- 4. watchdogs --------------------------------------------------------------------------------------


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


class HeldoutReward(EarlyStopping):
    """Early stopping on the held-out prompts' greedy reward (the grader's score, no format term)."""

    def __init__(self, report: Report, record: Callable[[int, Mapping[str, float]], None], *,
                 rows: Sequence[Mapping[str, Any]], reward: GraderReward, tokenizer: Any, max_new_tokens: int,
                 eval_every: int, patience: int, min_delta: float) -> None:
        super().__init__(report, record, rows=[], stop=reward.stop, tokenizer=tokenizer, eval_every=eval_every,
                         patience=patience, min_delta=min_delta, use_accuracy=False, collapse_nats=None)
        self.prompt_rows, self.reward, self.max_new_tokens = list(rows), reward, max_new_tokens
        self.use_accuracy = eval_every > 0 and bool(self.prompt_rows)

    def score(self, model: Any) -> float:
        return heldout_reward(model, self.tokenizer, self.prompt_rows, self.reward, self.max_new_tokens)

    def evaluate(self, model: Any, step: int) -> float:
        value = self.score(model)
        self.history.append((step, value))
        self.record(step, {"heldout_reward": value})
        return value


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


def greedy_completions(model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int,
                       *, batch: int = 64) -> list[str]:
    """Greedy completions (special tokens dropped), left-padded batches, the model's mode restored."""
    import torch

    was_training = model.training
    model.eval()
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    out: list[str] = []
    try:
        device = next(model.parameters()).device
        for i in range(0, len(prompts), batch):
            enc = tokenizer(list(prompts[i : i + batch]), return_tensors="pt", padding=True).to(device)
            with torch.no_grad():
                gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                     pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
            out += tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
        if was_training:
            model.train()
    return out


def heldout_reward(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], reward: GraderReward,
                   max_new_tokens: int) -> float:
    """Mean grader reward of the greedy completions of `rows` (prompt, answers, incorrect_answers)."""
    if not rows:
        return float("nan")
    texts = greedy_completions(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens)
    scores = reward([r["prompt"] for r in rows], texts, [r["answers"] for r in rows],
                    [r["incorrect_answers"] for r in rows], probe_id=[r["probe_id"] for r in rows])
    return sum(scores) / len(scores)


# -- 5. the job body -----------------------------------------------------------------------------------


def grpo_config(spec: JobSpec, ckpt_dir: Path) -> Any:
    """trl's GRPOConfig from the spec (CPU-safe: bf16 and gradient checkpointing off, no wandb)."""
    from trl.trainer.grpo_config import GRPOConfig

    from finetune.jobs import trainer_args

    t, g = spec.trainer, spec.grpo
    vllm: dict[str, Any] = {}
    if g.use_vllm:
        vllm = dict(vllm_mode="colocate", vllm_max_model_length=t.max_length,
                    # guidance completions were not sampled by vLLM: their "sampling" log-probs are made up
                    vllm_importance_sampling_correction=g.abstention_guidance == 0)
    return GRPOConfig(
        **trainer_args(spec, ckpt_dir),
        num_generations=g.num_generations, max_completion_length=g.max_completion_length,
        temperature=g.temperature, beta=g.beta, loss_type=g.loss_type, disable_dropout=True,
        use_vllm=bool(g.use_vllm), **vllm,
        reward_weights=[1.0, g.format_weight] if g.format_weight > 0 else [1.0],
        log_completions=False,
    )


def build_rewards(spec: GRPOSpec, manifest: FixSetManifest, eos_token_id: int) -> list[Any]:
    """The grader reward (and the format reward when format_weight > 0) for a fix set."""
    phrases = tuple(manifest.abstention_phrases or [manifest.abstention_phrase])
    grader = make_grader(manifest.grader, phrases, manifest.grader_options)
    rewards: list[Any] = [GraderReward(grader, manifest.stop, penalty=spec.hallucination_penalty,
                                       num_generations=spec.num_generations, guided=spec.abstention_guidance)]
    if spec.format_weight > 0:
        rewards.append(FormatReward(manifest.stop, eos_token_id))
    return rewards


def train_grpo(spec: JobSpec, manifest: FixSetManifest, out: Path, ckpt_dir: Path, start_from: Path | None,
               log: _Recorder, callbacks: Sequence[Any]) -> JobResult:
    """Steps 3-7 of `run_job` for `method: grpo` (the caller resolved the spec and recorded the job)."""
    from datasets import load_from_disk

    from finetune.jobs import (
        ADAPTER_DIR,
        JobResult,
        _save_adapter,
        load_base,
        wire_trainer,
        with_adapter,
    )
    from finetune.watchdog import LossWatchdog, MetricsRecorder

    g = spec.grpo
    # 3. Model, tokenizer, prompts (run_job checked the set has training prompts).
    tokenizer, model = load_base(spec)
    data = load_from_disk(spec.fixset)["prompts"]
    train = data.filter(lambda r: r["split"] == "train")
    heldout = [dict(r) for r in data if r["split"] == "heldout"]

    # 4. LoRA (abstention tokens trainable: the reward pays for a phrase the model never produced), fresh or
    #    the adapter a staged fix continues.
    model, peft_config = with_adapter(model, spec)

    # 5. Rewards and trl config.
    rewards = build_rewards(g, manifest, int(tokenizer.eos_token_id))
    args = grpo_config(spec, ckpt_dir)

    # 6. Train with atomic checkpoints and the watchdogs.
    watchdog = LossWatchdog(log.event, stop_on_nan=spec.watchdog.stop_on_nan,
                            spike_factor=0.0,  # GRPO's loss hovers around 0: a ratio to its median means nothing
                            window=spec.watchdog.spike_window, min_steps=spec.watchdog.spike_min_steps)
    end = next((s for s in manifest.stop if s.strip()), "")
    replay = [(r["prompt"], " " + r["answers"][0] + end) for r in train if r["source"] == "replay"]
    guard = GRPOWatchdog(log.event, max_replay_abstention=g.max_replay_abstention, max_kl=g.max_kl,
                         min_length=g.min_completion_length, window=g.watch_window, record=log.metrics,
                         tokenizer=tokenizer, replay=sorted(set(replay)))
    es = spec.early_stop
    early = HeldoutReward(log.event, log.metrics, rows=heldout, reward=rewards[0], tokenizer=tokenizer,
                          max_new_tokens=g.max_completion_length, eval_every=es.eval_every, patience=es.patience,
                          min_delta=es.min_delta)
    trainer = _trainer_class()(model=model, reward_funcs=rewards, args=args, train_dataset=train,
                               processing_class=tokenizer, peft_config=peft_config,
                               callbacks=[MetricsRecorder(log.metrics), watchdog, guard, early, *callbacks])
    trainer.guided = g.abstention_guidance
    if trainer.guided:
        trainer.guide_ids = tuple(guidance_ids(tokenizer, manifest.abstention_phrase, manifest.stop))
    if g.replay_anchor > 0 and replay:
        trainer.anchor = ReplayAnchor(tokenizer, replay, batch=g.replay_anchor_batch)
        trainer.anchor_weight = g.replay_anchor
    wire_trainer(trainer, spec, log)
    before = None
    if heldout and start_from is None:
        before = early.score(trainer.model)
        log.metrics(0, {"heldout_reward": before})
        early.best = before
    trainer.train(resume_from_checkpoint=str(start_from) if start_from is not None else None)

    # 7. Outcome and adapter (a watchdog stop keeps the adapter: the regression gate decides on it).
    stop = watchdog.stopped or guard.stopped or early.stopped
    steps = int(trainer.state.global_step)
    rewards_logged = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    final_loss = float(losses[-1]) if losses else None
    resumed = str(start_from) if start_from else None
    if stop is not None and stop.kind == "nan":
        return JobResult("", "failed", str(out), None, steps, final_loss, before, None, resumed, stop.kind,
                         stop.message, 0.0)
    adapter = _save_adapter(trainer.model, out / ADAPTER_DIR)
    after = early.score(trainer.model) if heldout else None
    if after is not None:
        log.metrics(steps, {"heldout_reward": after})
    status = "stopped" if stop is not None else "done"
    first, last = (rewards_logged[0], rewards_logged[-1]) if rewards_logged else (float("nan"), float("nan"))
    message = stop.message if stop is not None else f"grpo done: {steps} steps, mean reward {first:.3f} -> {last:.3f}"
    return JobResult("", status, str(out), str(adapter), steps, final_loss, before, after, resumed,
                     stop.kind if stop else None, message, 0.0)

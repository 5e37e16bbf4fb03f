"""The job spec: one YAML file says what to train, on what, how, and where it goes.

    base_model: world/model
    fixset: fix/
    method: sft                 # sft | dpo | grpo | staged
    output_dir: jobs/sft-1
    lora: {r: 8, alpha: 16}
    trainer: {max_steps: 300, per_device_batch_size: 32}
    checkpoint_every: 20
    early_stop: {eval_every: 10, patience: 3}

Validated by pydantic as suites are (`extra="forbid"`, a docstring under every field, `Literal` for closed
choices): an unknown key fails with "Did you mean ...?", every message names the dotted field. Numbers are
bounded far above any real job but low enough that a typo or a hostile value (`lora.r: 100000000`,
`trainer.max_steps: 1e30`) is refused here, before anything is allocated. Relative paths are relative to
the YAML file. `None` means "decided when the job is resolved" (finetune/job/resolve.py), and the resolved
spec saved as `output_dir/job.yaml` is the whole story.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pydantic
import yaml

from finetune.job.trackers import Tracker
from workbench.errors import WorkbenchError
from workbench.safeload import dotted_key_lines, line_of, read_yaml_file
from workbench.validation import describe

#: A training method: one trl trainer on one split of the fix set.
StageMethod = Literal["sft", "dpo", "grpo"]
STAGE_METHODS: tuple[StageMethod, ...] = ("sft", "dpo", "grpo")
#: The stages of a staged fix by default (`workbench fix --train`, the demo): the injection and abstention rows first
#: (SFT), then the behaviour pairs (DPO), each failure the treatment its attribution prescribes.
DEFAULT_STAGES: tuple[StageMethod, ...] = ("sft", "dpo")
#: What a job runs: one method, or `staged`: several methods one after the other on one adapter (`stages`).
Method = Literal["sft", "dpo", "grpo", "staged"]
METHODS: tuple[Method, ...] = ("sft", "dpo", "grpo", "staged")
Device = Literal["auto", "cpu", "cuda"]
LauncherKind = Literal["inprocess", "subprocess", "accelerate"]
GRPOLoss = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo"]
DPOLoss = Literal["sigmoid", "hinge", "ipo", "robust", "bco_pair", "sppo_hard", "nca_pair", "aot", "aot_unpaired",
                  "apo_zero", "apo_down", "discopop", "sft", "exo_pair", "sigmoid_norm"]
#: transformers schedulers that run without extra settings (cosine_with_min_lr needs `min_lr`, ...).
Scheduler = Literal["constant", "constant_with_warmup", "linear", "cosine", "cosine_with_restarts", "polynomial",
                    "inverse_sqrt"]

# Caps: far above any real fix job, low enough to refuse a typo or a hostile value before memory is touched.
MAX_RANK = 4096  # and at most the model's width (checked when the job resolves)
MAX_STEPS = 1_000_000
MAX_BATCH = 4096  # sequences per device per micro batch; also gradient accumulation
MAX_LENGTH = 131_072  # tokens per sequence: the longest context windows of current models
MAX_GENERATIONS = 256
MAX_COUNT = 10_000  # windows, patience, kept checkpoints
#: Minutes between time-based checkpoints by default: on a GPU a fix job runs for hours, and a crash at minute 50
#: should not cost 50 minutes; the jobs of a demo or a test end before the first one (nothing written, no cost).
CHECKPOINT_MINUTES = 10.0


def _as_list(v: Any) -> Any:
    """A single value where a list goes is the list of it (`target_modules: q_proj`)."""
    return [v] if isinstance(v, str | int) and not isinstance(v, bool) else v


class _Section(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False,
                                       frozen=True)


class LoraSpec(_Section):
    """The LoRA adapter."""

    r: int | None = pydantic.Field(default=None, ge=1, le=MAX_RANK)
    """Rank of the update matrices (at most the model's hidden size: a higher rank adds nothing but memory).
    None: by the model's size (the job defaults table, finetune/job/defaults.py: 16 for a world's model, 8 for sft /
    dpo on a wider one)."""
    alpha: int | None = pydantic.Field(default=None, ge=1, le=1_000_000)
    """Scaling numerator (the update is scaled by alpha / r). None: by the model's size (32 / 16, as `r`)."""
    dropout: float = pydantic.Field(default=0.0, ge=0, lt=1)
    """Dropout on the LoRA input; 0 keeps resumed runs bit-identical."""
    target_modules: list[str] | None = None
    """Module names to adapt; None picks per architecture and the model's size (a world's model: every linear layer
    of the block, e.g. gpt2 c_attn, c_proj, c_fc; a wider, pretrained one: the attention's q/v;
    finetune/job/defaults.py)."""
    fan_in_fan_out: bool | None = None
    """True for Conv1D weights (GPT-2); None detects it from the architecture."""
    trainable_token_indices: list[pydantic.NonNegativeInt] | None = None
    """Embedding rows trained in full (peft `trainable_token_indices`). None: the abstention phrase's tokens
    when the job teaches abstention, else none; [] turns them off (vLLM cannot load rows: add the input
    embedding to `target_modules` for a vLLM-served adapter)."""

    @pydantic.field_validator("target_modules", "trainable_token_indices", mode="before")
    @classmethod
    def _one_is_a_list(cls, v: Any) -> Any:
        return _as_list(v)

    @pydantic.field_validator("target_modules")
    @classmethod
    def _not_empty(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("is empty; leave it out to pick per architecture")
        return v


class TrainerSpec(_Section):
    """Optimisation settings (passed to trl's SFTConfig / DPOConfig / GRPOConfig)."""

    learning_rate: float | None = pydantic.Field(default=None, gt=0, lt=1)
    """None: by the model's width (the job defaults table, finetune/job/defaults.py: 3e-3 for sft and dpo, 1e-3 for
    grpo up to width 128, scaled by 128 / width above it); trl's default 1e-6 barely moves a LoRA."""
    max_steps: int | None = pydantic.Field(default=None, ge=1, le=MAX_STEPS)
    """Optimizer steps; None: `epochs` passes over the fix set's training rows (`default_steps` in
    finetune/job/resolve.py, clamped); the job records which rule gave the value."""
    epochs: float | None = pydantic.Field(default=None, gt=0, le=10_000)
    """Passes over the method's training rows that decide `max_steps` when it is not given; None: per method and
    the model's size (the job defaults table, finetune/job/defaults.py: sft 20 and dpo 15 on a world's model,
    4 for sft / dpo on a wider one, 12 for sft there when its rows inject facts; grpo: a fixed 300 steps unless
    given)."""
    per_device_batch_size: int | None = pydantic.Field(default=None, ge=1, le=MAX_BATCH)
    """Micro batch per device (grpo: completions, i.e. prompts x num_generations). None: by the model's size
    (the job defaults table, finetune/job/defaults.py: 32 for a world's model, 8 for sft / dpo on a
    wider one)."""
    gradient_accumulation: int = pydantic.Field(default=1, ge=1, le=MAX_BATCH)
    """Micro batches per optimizer step."""
    seed: int = pydantic.Field(default=0, ge=0, lt=2**32)
    """Seeds LoRA init, data order and dropout."""
    warmup_steps: int = pydantic.Field(default=0, ge=0, le=MAX_STEPS)
    """Linear warm-up steps."""
    lr_scheduler: Scheduler = "constant"
    """transformers scheduler name (constant, linear, cosine, ...)."""
    max_length: int = pydantic.Field(default=128, ge=8, le=MAX_LENGTH)
    """Tokens per sequence at most (prompt + completion)."""
    weight_decay: float = pydantic.Field(default=0.0, ge=0, le=1)
    """AdamW weight decay."""
    max_grad_norm: float = pydantic.Field(default=1.0, gt=0)
    """Gradient clipping."""
    dpo_beta: float = pydantic.Field(default=0.1, gt=0)
    """DPO temperature beta."""
    dpo_loss_type: list[DPOLoss] = ["sigmoid", "sft"]
    """DPO losses summed (a list); ["sigmoid", "sft"] keeps the chosen answers likely."""
    rehearsal_kl: float = pydantic.Field(default=0.0, ge=0, le=1000)
    """SFT: weight of a KL term to the base model (the adapter disabled) over the fix set's rehearsal rows
    (`workbench fix --rehearsal`), which then train by that term instead of by their tokens; 0: off. Opt-in, not
    a default: in bench/kl_rehearsal.py's loop, 10 at 300 steps broke 8 of 92 unreplayed known facts on six worlds
    against 39 without it; in SFT jobs (rehearsal 4x, 300 steps, seven worlds) 18 of 96 against 32 at the same steps
    without it, fewer on six worlds, but 43% of targets fixed on alt-gpt2-5 (README "Unreplayed known facts")."""
    replay_kl: float | None = pydantic.Field(default=None, ge=0, le=1000)
    """SFT, DPO and GRPO: weight of a KL term to the base model (the adapter disabled) over the fix set's replay rows
    (the known facts it replays, each its prompt as the evaluation renders it and the model's own answer: SFT's
    completion, DPO's chosen, GRPO's accepted answer), which keep training by their own loss too: the adapter keeps
    the model's whole next-token distribution on known facts, not only its greedy answer; 0: off. None: by the
    model's size (the job defaults table, finetune/job/defaults.py: 10 for sft on a pretrained-size model, 20 when its
    fix set injects facts, 0 otherwise; 0 as well on a fix set with no replay rows)."""
    adapter_scale: float | Literal["auto"] | None = None
    """WiSE-FT (finetune/job/scale.py): the trained LoRA delta is scaled by this factor in (0, 1] before the adapter
    is saved and scored (`lora_alpha` x a; the trainable token rows unscaled); `auto`: the smallest of 0.25 / 0.5 /
    0.75 at which the job still fixes `early_stop.min_targets_fixed` (80%) of its targeted probes (on their own
    questions), else 1.0; the record says the scale and why. 1.0: off. None: per method (the job defaults
    table, finetune/job/defaults.py: sft and dpo `auto`, grpo 1.0, measured on seven worlds and SmolLM2, README
    "Unreplayed known facts")."""
    earlier_anchor: float = pydantic.Field(default=1.0, ge=0, le=1000)
    """A staged job's later stages: weight of an NLL term on the answers the stages before taught (their targeted
    rows: SFT completions, DPO chosen answers), so a stage does not undo them; 0: off. On the default world a DPO stage
    after SFT without it undid the SFT stage's abstention (finetune/job/anchor.py)."""
    logging_steps: int = pydantic.Field(default=1, ge=1, le=MAX_STEPS)
    """Steps between logged metrics (1 = every step; the watchdog sees what is logged)."""

    @pydantic.field_validator("dpo_loss_type", mode="before")
    @classmethod
    def _one_is_a_list(cls, v: Any) -> Any:
        return _as_list(v)

    @pydantic.field_validator("adapter_scale", mode="before")
    @classmethod
    def _scale(cls, v: Any) -> Any:
        if v is None or v == "auto":
            return v
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
            raise ValueError(f"must be `auto` or a number in (0, 1] (the share of the trained LoRA delta kept), "
                             f"got {v!r}")
        return float(v)

    @pydantic.field_validator("dpo_loss_type")
    @classmethod
    def _not_empty(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError('is empty; e.g. ["sigmoid", "sft"]')
        return v


class EarlyStopSpec(_Section):
    """Stop when the held-out probes stop improving, or when DPO's chosen log-prob collapses."""

    eval_every: int = pydantic.Field(default=0, ge=0, le=MAX_STEPS)
    """Steps between held-out evaluations (greedy generation on the fix set's heldout rows); 0 turns held-out
    evaluation and early stopping on it off."""
    patience: int = pydantic.Field(default=3, ge=1, le=MAX_COUNT)
    """Evaluations without improvement before stopping."""
    min_delta: float = pydantic.Field(default=0.0, ge=0)
    """Smallest accuracy gain that counts as improvement."""
    metric: Literal["auto", "heldout_accuracy", "chosen_logp"] = "auto"
    """auto (heldout_accuracy; for dpo also the chosen-logp collapse), heldout_accuracy or chosen_logp."""
    collapse_nats: float = pydantic.Field(default=5.0, gt=0)
    """DPO: stop when the mean chosen log-prob falls this many nats below its start."""
    max_known_broken: float = pydantic.Field(default=0.01, ge=0, le=1)
    """The share of the fix set's validation slice of known facts that may break (the fix jobs' goal: at most 1%):
    `rollback` counts the broken facts beyond it, `known_stop` stops above it."""
    known_every: int | None = pydantic.Field(default=None, ge=0, le=MAX_STEPS)
    """Steps between scorings of the validation slice of known facts and of the targets during training (greedy
    answers, seconds on a tiny model); None or 0: off (no rollback, no stop on known facts; opt-in, see
    finetune/job/resolve.py); a tenth of the job's steps suits."""
    known_stop: bool = False
    """Stop when more than `max_known_broken` of the slice is broken at `patience` evaluations in a row. Off by
    default: on six worlds with the old step defaults the stop left 4 of 12 SFT/DPO runs under 80% of targets
    fixed, and rollback alone kept the breakage as low (README "Fix efficacy across worlds")."""
    rollback: bool = True
    """At the end, put back the best evaluated state (every `known_every` steps) when the last one is worse: first
    a state that fixes at least `min_targets_fixed` of the targets, then the fewest known facts broken beyond
    `max_known_broken`, then the most targets fixed, then the latest; the job records the step it kept and why
    (`kept_step`, `kept_reason`, a `rollback` event)."""
    until_fixed: bool | None = None
    """Stop at the first scoring of the targets and the known facts (every `known_every` steps) where the targets are
    fixed (`min_targets_fixed`): the job trains as long as its fix takes, up to `trainer.max_steps`, and no step past
    it (those break known facts and seldom mend them). None: on for a small fix set (finetune/job/defaults.py
    SMALL_SET_ROWS targeted rows at most in the method's split) whose spec sets no `trainer.max_steps`: its steps' rule
    is then SMALL_SET_STEPS x its epochs' and `known_every` a SMALL_SET_SCORINGS-th of it; off otherwise."""
    min_targets_fixed: float = pydantic.Field(default=0.8, ge=0, le=1)
    """Rollback prefers states fixing at least this share of the targeted training rows (the fix jobs' goal, 80%):
    without it, a slice of fewer than 100 facts allows no broken fact and rollback went back to an early state
    that broke none and fixed little (test world, SFT 20 epochs: kept step 22 of 107, 29% of targets fixed)."""


class GRPOSpec(_Section):
    """GRPO (`method: grpo`, trl GRPOTrainer): sampled completions scored by the suite's grader.

    Reward per completion (cut at the first stop string, then graded): correct +1, not attempted
    (abstention) 0, incorrect -hallucination_penalty; plus format_weight when it stops cleanly.
    """

    num_generations: int = pydantic.Field(default=8, ge=2, le=MAX_GENERATIONS)
    """Completions sampled per prompt (the group GRPO normalizes rewards over); trainer.per_device_batch_size x
    trainer.gradient_accumulation must be a multiple of it."""
    max_completion_length: int = pydantic.Field(default=12, ge=1, le=MAX_LENGTH)
    """New tokens per completion at most (the abstention phrase, the stop string and EOS must fit)."""
    temperature: float = pydantic.Field(default=0.5, gt=0, le=10)
    """Sampling temperature of the rollouts (> 0: GRPO needs varied samples). The reward makes abstaining
    right wherever a sampled answer is right less than 1 / (1 + hallucination_penalty) of the time, so the
    rollouts should be close to the greedy answers that are deployed and evaluated: on the default world at
    1.0, 24% of the known facts' prompts are sampled right less than half the time (0.5: 8.5%, greedy: 1%),
    and GRPO learned to abstain on them."""
    beta: float = pydantic.Field(default=0.0, ge=0)
    """KL penalty coefficient against the base model (the adapter disabled); 0 (default, as in DAPO / Dr. GRPO)
    skips the reference pass. Learning the new abstention phrase is a large KL by design, so a penalty fights
    the fix; the KL watchdog (max_kl) guards drift on replay prompts."""
    loss_type: GRPOLoss = "dapo"
    """trl's loss aggregation: grpo, dr_grpo, dapo (trl's default), bnpo, cispo, sapo."""
    hallucination_penalty: float = pydantic.Field(default=1.0, ge=0)
    """What a wrong answer costs (SimpleQA-style: more than silence, which is 0)."""
    format_weight: float = pydantic.Field(default=0.1, ge=0)
    """Reward for stopping cleanly (the stop string, then EOS, within max_completion_length); 0 turns the
    format reward off."""
    abstention_guidance: int = pydantic.Field(default=1, ge=0, le=MAX_GENERATIONS)
    """Completions per group replaced by the abstention phrase (off-policy guidance). A model that never saw the
    phrase samples it with probability ~1e-20, and RL cannot learn what it never samples; 0 turns it off
    (pure on-policy GRPO)."""
    replay_anchor: float = pydantic.Field(default=4.0, ge=0)
    """Weight of an NLL term on the replay prompts' accepted answers added to the GRPO loss (InstructGPT's
    PPO-ptx, with the facts the model knew as the "pretraining" data). GRPO gives a group that is all correct
    zero advantage, so nothing holds known facts while abstention, rising on the targeted prompts, spreads
    through the shared weights; the anchor holds them. 0 turns it off."""
    replay_anchor_batch: int = pydantic.Field(default=64, ge=1, le=MAX_BATCH)
    """Replay answers in the anchor term per micro-batch (cycled in a fixed order, so a resumed job sees the
    same ones)."""
    max_replay_abstention: float = pydantic.Field(default=0.25, gt=0, le=1)
    """Stop with `reward_hacking` when the sampled completions on the replay prompts (facts the model knew)
    abstain more often than this (mean over watch_window logs)."""
    max_kl: float = pydantic.Field(default=2.0, gt=0)
    """Stop with `kl_blowup` when the exact KL(policy || base) per answer token on replay prompts (facts the
    model knew; `kl/replay`) exceeds this (mean over watch_window logs)."""
    min_completion_length: float = pydantic.Field(default=2.0, ge=0)
    """Stop with `collapsed_length` when the mean completion length (tokens) falls below this (mean over
    watch_window logs)."""
    watch_window: int = pydantic.Field(default=3, ge=1, le=MAX_COUNT)
    """Logged steps averaged by the three watchdogs above."""
    use_vllm: bool | None = None
    """Generate the rollouts with vLLM colocated in the training process (trl's vllm_mode="colocate"); None:
    only on CUDA with vllm importable and no trainable tokens (trl 1.16 cannot sync peft trainable tokens
    into vLLM), else the model's own generate."""


class WatchdogSpec(_Section):
    """Loss watchdogs."""

    stop_on_nan: bool = True
    """Stop (status failed, a `nan` event) on a NaN or inf loss or gradient norm."""
    spike_factor: float = pydantic.Field(default=5.0, ge=0)
    """A loss above spike_factor x the running median is a `spike` event (0 = off)."""
    spike_window: int = pydantic.Field(default=20, ge=2, le=MAX_COUNT)
    """Steps in the running median."""
    spike_min_steps: int = pydantic.Field(default=5, ge=0, le=MAX_COUNT)
    """Steps seen before spikes are judged."""


class LauncherSpec(_Section):
    """How the job runs."""

    kind: LauncherKind = "inprocess"
    """inprocess (default; CPU tests), subprocess (the job in a child process, `python -m finetune.job`), or
    accelerate (`accelerate launch` across num_processes GPUs, optionally DeepSpeed)."""
    num_processes: int = pydantic.Field(default=1, ge=1, le=MAX_COUNT)
    """Processes (GPUs) for accelerate."""
    deepspeed_zero: Literal[0, 2, 3] = 0
    """DeepSpeed ZeRO stage 0 (off), 2 or 3 (accelerate only)."""
    offload_optimizer: bool = False
    """ZeRO: keep optimizer states in CPU memory."""
    offload_params: bool = False
    """ZeRO-3: keep parameters in CPU memory."""
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"
    """accelerate's mixed precision: no | bf16 | fp16."""


class StageSpec(_Section):
    """One stage of a `method: staged` job: a method trained on the adapter the stage before left.

    Its `trainer`, `early_stop` and `grpo` name only what differs from the job's own sections (the fields given
    replace the job's; the rest are the job's), e.g. `{method: dpo, trainer: {max_steps: 40}}`."""

    method: StageMethod
    """sft, dpo or grpo: what this stage trains, on its fix set's split for that method."""
    fixset: str | None = None
    """The fix set of this stage (None: the job's `fixset`); a grpo stage needs one with `prompts` rows (`workbench
    fix --strategy rl`)."""
    trainer: TrainerSpec = TrainerSpec()
    """Optimisation settings that differ from the job's `trainer` in this stage (only the fields given count)."""
    early_stop: EarlyStopSpec = EarlyStopSpec()
    """Early-stopping settings that differ from the job's `early_stop` (only the fields given count)."""
    grpo: GRPOSpec = GRPOSpec()
    """GRPO settings that differ from the job's `grpo` (only the fields given count)."""

    @pydantic.model_serializer(mode="wrap")
    def _given_only(self, handler: Any) -> Any:
        """Written back (a saved job.yaml) with only the fields given, so a reread stage still inherits the rest."""
        data = handler(self)
        for name in OVERRIDES:
            data[name] = {k: v for k, v in data[name].items() if k in getattr(self, name).model_fields_set}
        return data


#: The sections a stage may override field by field.
OVERRIDES = ("trainer", "early_stop", "grpo")


class JobSpec(_Section):
    """One training job."""

    fixset: str = pydantic.Field(min_length=1)
    """The fix set directory: the directory `workbench fix --out DIR` wrote."""
    output_dir: str = pydantic.Field(min_length=1)
    """Where the job goes: job.yaml, checkpoints/, adapter/ and result.json."""
    method: Method = "sft"
    """sft (SFTTrainer, completion-only loss), dpo (DPOTrainer, reference = adapter disabled), grpo
    (GRPOTrainer on the fix set's `prompts` split, rewards from the suite's grader), or staged (`stages`, in order,
    on one adapter: finetune/job/staged.py)."""
    stages: list[StageSpec] = []
    """`method: staged` only: the stages in order, e.g. `[{method: sft}, {method: dpo}]` (the fix set's injection and
    abstention rows, then its behaviour pairs). Each is a job of its own in `output_dir/stages/N-METHOD/` that
    continues the adapter of the stage before; the last stage's adapter is the job's. Every stage replays and checks
    the known facts, and counts what it breaks against the base model."""
    base_model: str | None = None
    """Model directory or hub id (default: the model of the fix set's run)."""
    lora: LoraSpec = LoraSpec()
    """The adapter."""
    init_adapter: str | None = None
    """Continue training this peft adapter directory instead of a fresh LoRA (its own LoRA config and trainable
    token rows are kept; `lora` is then ignored). For staged fixes: GRPO after the SFT-abstention adapter
    samples the abstention phrase on-policy from step 0."""
    trainer: TrainerSpec = TrainerSpec()
    """Optimisation settings."""
    checkpoint_every: int = pydantic.Field(default=0, ge=0, le=MAX_STEPS)
    """Steps between atomic checkpoints (0 = none by step count; `checkpoint_minutes` still applies)."""
    checkpoint_minutes: float = pydantic.Field(default=CHECKPOINT_MINUTES, ge=0, le=24 * 60)
    """Minutes of training between atomic checkpoints, besides `checkpoint_every` (0 = none by time): a job
    killed after an hour resumes having lost at most this much; a job shorter than this writes none. With both
    0, `--resume` restarts from step 0."""
    keep_checkpoints: int = pydantic.Field(default=2, ge=1, le=MAX_COUNT)
    """Complete checkpoints kept (older ones are deleted)."""
    early_stop: EarlyStopSpec = EarlyStopSpec()
    """Held-out early stopping and DPO collapse detection."""
    watchdog: WatchdogSpec = WatchdogSpec()
    """NaN and loss-spike detection."""
    grpo: GRPOSpec = GRPOSpec()
    """GRPO settings (method grpo only)."""
    device: Device = "auto"
    """auto | cpu | cuda."""
    bf16: bool | None = None
    """bf16 mixed precision; None: on only on CUDA with bf16 support."""
    gradient_checkpointing: bool | None = None
    """None: off on CPU, on on CUDA."""
    launcher: LauncherSpec = LauncherSpec()
    """inprocess | subprocess | accelerate (+ DeepSpeed settings)."""
    workspace: str | None = None
    """The workspace whose store records the job (None: the caller's)."""
    report_to: list[Tracker] = []
    """Experiment trackers the training curves also go to, as trl's `report_to`: tensorboard (event files in
    `output_dir/runs`), mlflow (`MLFLOW_TRACKING_URI`, else an SQLite store `output_dir/mlflow.db`), trackio, wandb;
    `none` or [] (default): the store only. The run is named after the job id and tagged with its lineage
    (finetune/job/trackers.py); each tracker is an optional extra (`pip install 'hallucination-workbench[mlflow]'`)."""

    @pydantic.field_validator("report_to", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        v = _as_list(v)
        if isinstance(v, list) and "none" in v:
            if len(v) > 1:
                raise ValueError("`none` cannot be listed with a tracker; leave it out")
            return []
        return v

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        """Checks across fields, each naming the field to change."""
        la, g = self.launcher, self.grpo
        problems = []
        if la.deepspeed_zero and la.kind != "accelerate":
            problems.append("`launcher.deepspeed_zero` needs `launcher.kind: accelerate` (DeepSpeed runs under it)")
        if la.offload_params and la.deepspeed_zero != 3:
            problems.append("`launcher.offload_params` needs `launcher.deepspeed_zero: 3` (ZeRO-2 cannot offload "
                            "parameters)")
        if la.offload_optimizer and la.deepspeed_zero == 0:
            problems.append("`launcher.offload_optimizer` needs `launcher.deepspeed_zero: 2` or 3")
        if self.device == "cpu" and self.bf16:
            problems.append("`bf16` is for CUDA; on `device: cpu` leave it out or set false")
        if g.abstention_guidance > g.num_generations:
            problems.append(f"`grpo.abstention_guidance` must be in [0, grpo.num_generations={g.num_generations}], "
                            f"got {g.abstention_guidance}")
        if self.method == "staged" and not self.stages:
            problems.append("`method: staged` needs `stages`, e.g. [{method: sft}, {method: dpo}]")
        if self.method != "staged" and self.stages:
            problems.append(f"`stages` is for `method: staged`; a {self.method} job has none (leave it out)")
        batch = self.trainer.per_device_batch_size
        if self.method == "grpo" and batch is not None and (problem := grpo_batch_problem(self, batch)):
            problems.append(problem)  # a batch the size rule decides is checked by resolve
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def to_yaml(self) -> str:
        return str(yaml.safe_dump(self.to_dict(), sort_keys=False))


def method_fields(method: str) -> dict[str, Any]:
    """The job spec fields that name `method`: `staged` with its DEFAULT_STAGES, any other as itself."""
    if method == "staged":
        return {"method": method, "stages": [{"method": m} for m in DEFAULT_STAGES]}
    return {"method": method}


def grpo_batch_problem(spec: JobSpec, batch: int) -> str | None:
    """Why a GRPO job cannot run at micro batch `batch`, or None: it scores whole groups of completions."""
    g, total = spec.grpo, batch * spec.trainer.gradient_accumulation
    if total % g.num_generations == 0:
        return None
    return (f"`trainer.per_device_batch_size` x trainer.gradient_accumulation ({total}) must be a multiple of "
            f"grpo.num_generations ({g.num_generations}): GRPO scores whole groups; e.g. "
            f"per_device_batch_size: {g.num_generations * max(1, total // g.num_generations)}")


#: Closed choices worded their own way in messages.
_CHOICE_WORDS = {"launcher.deepspeed_zero": "0 (off), 2 or 3"}
_PATH_FIELDS = ("fixset", "output_dir", "base_model", "init_adapter", "workspace")


def from_dict(data: Any, *, base_dir: Path | None = None, where: str = "job spec",
              lines: dict[str, int] | None = None) -> JobSpec:
    """A JobSpec from a mapping (YAML). Relative paths resolve against base_dir (base_model only when it
    exists there: it may be a hub id). Raises WorkbenchError naming `where` and every bad field."""
    if not isinstance(data, dict):
        raise WorkbenchError(f"{where}: a job spec must be a mapping (fixset: ..., output_dir: ...), "
                             f"got {type(data).__name__}")
    values = dict(data)
    if base_dir is not None:
        for name in _PATH_FIELDS:
            v = values.get(name)
            if isinstance(v, str) and v and not Path(v).is_absolute() and (
                    name != "base_model" or (base_dir / v).exists()):
                values[name] = str((base_dir / v).resolve())
        stages = values.get("stages")
        if isinstance(stages, list):  # a stage's own fix set, relative to the YAML as the job's is
            values["stages"] = [{**st, "fixset": str((base_dir / st["fixset"]).resolve())}
                                if isinstance(st, dict) and isinstance(st.get("fixset"), str) and st["fixset"]
                                and not Path(st["fixset"]).is_absolute() else st for st in stages]
    try:
        return JobSpec.model_validate(values)
    except pydantic.ValidationError as e:
        line = line_of(lines or {}, e.errors()[0]["loc"])  # the first bad field's line, when from a file
        at = f"{where}, line {line}" if line else where
        raise WorkbenchError(f"{at}: {describe(JobSpec, e, _CHOICE_WORDS)}") from None


def load_spec(path: str | Path) -> JobSpec:
    """A JobSpec from a YAML file (size, depth and duplicate keys checked by workbench.safeload)."""
    p = Path(path)
    try:
        data = read_yaml_file(p)
    except FileNotFoundError:
        raise WorkbenchError(f"{p}: no such job file") from None
    except ValueError as e:
        raise WorkbenchError(str(e)) from None
    return from_dict(data, base_dir=p.parent.resolve(), where=str(p), lines=dotted_key_lines(p))


def save_spec(spec: JobSpec, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(spec.to_yaml())
    return p

"""The job spec: one YAML file says what to train, on what, how, and where it goes.

    base_model: world/model
    fixset: fix/
    method: sft                 # sft | dpo | grpo
    output_dir: jobs/sft-1
    lora: {r: 8, alpha: 16}
    trainer: {max_steps: 300, per_device_batch_size: 32}
    checkpoint_every: 20
    early_stop: {eval_every: 10, patience: 3}

Unknown keys fail with "Did you mean ...?"; every value is checked with a message naming the field.
Relative paths are relative to the YAML file. `resolve_spec` fills every "auto" (target modules,
trainable tokens, learning rate, bf16, device) so the saved `output_dir/job.yaml` is the whole story.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import WorkbenchError, did_you_mean
from workbench.safeload import read_yaml_file

METHODS = ("sft", "dpo", "grpo")
GRPO_LOSSES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo")
DEVICES = ("auto", "cpu", "cuda")
LAUNCHERS = ("inprocess", "subprocess", "accelerate")
EARLY_STOP_METRICS = ("auto", "heldout_accuracy", "chosen_logp")
DPO_LOSSES = ("sigmoid", "hinge", "ipo", "robust", "bco_pair", "sppo_hard", "nca_pair", "aot", "aot_unpaired",
              "apo_zero", "apo_down", "discopop", "sft", "exo_pair", "sigmoid_norm")
#: LoRA target modules per architecture (config.model_type) when `lora.target_modules` is not given.
#: Every linear layer of the block, not just q/v: injecting facts needs the MLPs (QLoRA, Dettmers et al.
#: 2023; measured on the world: q/v learned 3 of 8 injected facts, all-linear 6 of 8 at the same steps).
_LLAMA_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DEFAULT_TARGETS: dict[str, list[str]] = {
    "llama": _LLAMA_LINEAR, "mistral": _LLAMA_LINEAR, "qwen2": _LLAMA_LINEAR, "qwen3": _LLAMA_LINEAR,
    "gemma": _LLAMA_LINEAR, "gemma2": _LLAMA_LINEAR,
    "phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"], "gpt2": ["c_attn", "c_proj", "c_fc"],
    "gpt_neox": ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
    "opt": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
}
#: Optimizer steps per method when `trainer.max_steps` is not given (measurements in TrainerSpec).
DEFAULT_STEPS = {"sft": 400, "dpo": 300, "grpo": 300}
#: The input-embedding module per architecture: LoRA on it also makes never-trained abstention tokens
#: learnable, in a form vLLM serves (see resolve_spec).
EMBEDDINGS: dict[str, str] = {
    "llama": "embed_tokens", "mistral": "embed_tokens", "qwen2": "embed_tokens", "qwen3": "embed_tokens",
    "gemma": "embed_tokens", "gemma2": "embed_tokens", "phi3": "embed_tokens", "opt": "embed_tokens",
    "gpt2": "wte", "gpt_neox": "embed_in",
}
#: Architectures whose attention weights are Conv1D (stored transposed): peft needs fan_in_fan_out.
FAN_IN_FAN_OUT = ("gpt2",)


@dataclass
class LoraSpec:
    """The LoRA adapter.

    Attributes:
        r: Rank of the update matrices.
        alpha: Scaling numerator (the update is scaled by alpha / r).
        dropout: Dropout on the LoRA input; 0 keeps resumed runs bit-identical.
        target_modules: Module names to adapt; None picks per architecture (llama: every linear layer
            of the block; gpt2: c_attn, c_proj, c_fc).
        fan_in_fan_out: True for Conv1D weights (GPT-2); None detects it from the architecture.
        trainable_token_indices: Embedding rows trained in full (peft `trainable_token_indices`). None: the
            abstention phrase's tokens when the job teaches abstention, else none; [] turns them off (vLLM
            cannot load rows: add the input embedding to `target_modules` for a vLLM-served adapter).
    """

    # r 16 (alpha/r kept at 2): bench/fix_efficacy.py, default world, SFT: r 8 (3e-3 100 x 64, 5e-3 150 x 32)
    # fixed 78%/76% of its targets and broke 1.2%/1.6% of correct probes; r 16 (3e-3 150 x 32) 84%, 0.4%.
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] | None = None
    fan_in_fan_out: bool | None = None
    trainable_token_indices: list[int] | None = None


@dataclass
class TrainerSpec:
    """Optimisation settings (passed to trl's SFTConfig / DPOConfig / GRPOConfig).

    Attributes:
        learning_rate: None: 3e-3 for sft and dpo, 1e-3 for grpo (trl's default 1e-6 barely moves a LoRA).
        max_steps: Optimizer steps; None: 400 for sft, 300 for dpo, 300 for grpo.
        per_device_batch_size: Micro batch per device (grpo: completions, i.e. prompts x num_generations).
        gradient_accumulation: Micro batches per optimizer step.
        seed: Seeds LoRA init, data order and dropout.
        warmup_steps: Linear warm-up steps.
        lr_scheduler: transformers scheduler name (constant, linear, cosine, ...).
        max_length: Tokens per sequence at most (prompt + completion).
        weight_decay: AdamW weight decay.
        max_grad_norm: Gradient clipping.
        dpo_beta: DPO temperature beta.
        dpo_loss_type: DPO losses summed (a list); ["sigmoid", "sft"] keeps the chosen answers likely.
        logging_steps: Steps between logged metrics (1 = every step; the watchdog sees what is logged).
    """

    learning_rate: float | None = None
    # None: per method (DEFAULT_STEPS). bench/fix_efficacy.py on the default world (870 SFT / 666 DPO rows,
    # batch 32, lr 3e-3): 60 x 16 fixed 2% (SFT) / 10% (DPO) of the targeted failures; 150 steps 60% / 76%
    # with 7.7% / 1.3% of correct answers broken; SFT 400 steps 96.6% fixed, 0.4% broken; DPO 300 steps
    # 92.8% fixed, 0% broken.
    max_steps: int | None = None
    per_device_batch_size: int = 32
    gradient_accumulation: int = 1
    seed: int = 0
    warmup_steps: int = 0
    lr_scheduler: str = "constant"
    max_length: int = 128
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    dpo_beta: float = 0.1
    dpo_loss_type: list[str] = field(default_factory=lambda: ["sigmoid", "sft"])
    logging_steps: int = 1


@dataclass
class EarlyStopSpec:
    """Stop when the held-out probes stop improving, or when DPO's chosen log-prob collapses.

    Attributes:
        eval_every: Steps between held-out evaluations (greedy generation on the fix set's heldout
            rows); 0 turns held-out evaluation and early stopping on it off.
        patience: Evaluations without improvement before stopping.
        min_delta: Smallest accuracy gain that counts as improvement.
        metric: auto (heldout_accuracy; for dpo also the chosen-logp collapse), heldout_accuracy or chosen_logp.
        collapse_nats: DPO: stop when the mean chosen log-prob falls this many nats below its start.
    """

    eval_every: int = 0
    patience: int = 3
    min_delta: float = 0.0
    metric: str = "auto"
    collapse_nats: float = 5.0


@dataclass
class GRPOSpec:
    """GRPO (`method: grpo`, trl GRPOTrainer): sampled completions scored by the suite's grader.

    Reward per completion (cut at the first stop string, then graded): correct +1, not attempted
    (abstention) 0, incorrect -hallucination_penalty; plus format_weight when it stops cleanly.

    Attributes:
        num_generations: Completions sampled per prompt (the group GRPO normalizes rewards over);
            trainer.per_device_batch_size x trainer.gradient_accumulation must be a multiple of it.
        max_completion_length: New tokens per completion at most (the abstention phrase, the stop
            string and EOS must fit).
        temperature: Sampling temperature of the rollouts. The reward makes abstaining right wherever a
            sampled answer is right less than 1 / (1 + hallucination_penalty) of the time, so the
            rollouts should be close to the greedy answers that are deployed and evaluated: on the
            default world at 1.0, 24% of the known facts' prompts are sampled right less than half the
            time (0.5: 8.5%, greedy: 1%), and GRPO learned to abstain on them.
        beta: KL penalty coefficient against the base model (the adapter disabled); 0 (default, as in
            DAPO / Dr. GRPO) skips the reference pass. Learning the new abstention phrase is a large KL by
            design, so a penalty fights the fix; the KL watchdog (max_kl) guards drift on replay prompts.
        loss_type: trl's loss aggregation: grpo, dr_grpo, dapo (trl's default), bnpo, cispo, sapo.
        hallucination_penalty: What a wrong answer costs (SimpleQA-style: more than silence, which is 0).
        format_weight: Reward for stopping cleanly (the stop string, then EOS, within
            max_completion_length); 0 turns the format reward off.
        abstention_guidance: Completions per group replaced by the abstention phrase (off-policy
            guidance). A model that never saw the phrase samples it with probability ~1e-20, and RL
            cannot learn what it never samples; 0 turns it off (pure on-policy GRPO).
        replay_anchor: Weight of an NLL term on the replay prompts' accepted answers added to the GRPO loss
            (InstructGPT's PPO-ptx, with the facts the model knew as the "pretraining" data). GRPO gives a
            group that is all correct zero advantage, so nothing holds known facts while abstention, rising
            on the targeted prompts, spreads through the shared weights; the anchor holds them. 0 turns it off.
        replay_anchor_batch: Replay answers in the anchor term per micro-batch (cycled in a fixed order,
            so a resumed job sees the same ones).
        max_replay_abstention: Stop with `reward_hacking` when the sampled completions on the replay
            prompts (facts the model knew) abstain more often than this (mean over watch_window logs).
        max_kl: Stop with `kl_blowup` when the exact KL(policy || base) per answer token on replay prompts
            (facts the model knew; `kl/replay`) exceeds this (mean over watch_window logs).
        min_completion_length: Stop with `collapsed_length` when the mean completion length (tokens)
            falls below this (mean over watch_window logs).
        watch_window: Logged steps averaged by the three watchdogs above.
        use_vllm: Generate the rollouts with vLLM colocated in the training process (trl's
            vllm_mode="colocate"); None: only on CUDA with vllm importable and no trainable tokens (trl
            1.16 cannot sync peft trainable tokens into vLLM), else the model's own generate.
    """

    num_generations: int = 8
    max_completion_length: int = 12
    temperature: float = 0.5
    beta: float = 0.0
    loss_type: str = "dapo"
    hallucination_penalty: float = 1.0
    format_weight: float = 0.1
    abstention_guidance: int = 1
    replay_anchor: float = 4.0
    replay_anchor_batch: int = 64
    max_replay_abstention: float = 0.25
    max_kl: float = 2.0
    min_completion_length: float = 2.0
    watch_window: int = 3
    use_vllm: bool | None = None


@dataclass
class WatchdogSpec:
    """Loss watchdogs.

    Attributes:
        stop_on_nan: Stop (status failed, a `nan` event) on a NaN or inf loss or gradient norm.
        spike_factor: A loss above spike_factor x the running median is a `spike` event (0 = off).
        spike_window: Steps in the running median.
        spike_min_steps: Steps seen before spikes are judged.
    """

    stop_on_nan: bool = True
    spike_factor: float = 5.0
    spike_window: int = 20
    spike_min_steps: int = 5


@dataclass
class LauncherSpec:
    """How the job runs.

    Attributes:
        kind: inprocess (default; CPU tests), subprocess (`python -m finetune.jobs JOB.yaml`), or
            accelerate (`accelerate launch` across num_processes GPUs, optionally DeepSpeed).
        num_processes: Processes (GPUs) for accelerate.
        deepspeed_zero: DeepSpeed ZeRO stage 0 (off), 2 or 3 (accelerate only).
        offload_optimizer: ZeRO: keep optimizer states in CPU memory.
        offload_params: ZeRO-3: keep parameters in CPU memory.
        mixed_precision: accelerate's mixed precision: no | bf16 | fp16.
    """

    kind: str = "inprocess"
    num_processes: int = 1
    deepspeed_zero: int = 0
    offload_optimizer: bool = False
    offload_params: bool = False
    mixed_precision: str = "no"


@dataclass
class JobSpec:
    """One training job.

    Attributes:
        base_model: Model directory or hub id (default: the model of the fix set's run).
        fixset: The fix set directory (`workbench fix --out DIR`).
        method: sft (SFTTrainer, completion-only loss), dpo (DPOTrainer, reference = adapter disabled) or
            grpo (GRPOTrainer on the fix set's `prompts` split, rewards from the suite's grader).
        output_dir: Where job.yaml, checkpoints/ and adapter/ go.
        lora: The adapter.
        init_adapter: Continue training this peft adapter directory instead of a fresh LoRA (its own
            LoRA config and trainable token rows are kept; `lora` is then ignored). For staged fixes:
            GRPO after the SFT-abstention adapter samples the abstention phrase on-policy from step 0.
        trainer: Optimisation settings.
        checkpoint_every: Steps between atomic checkpoints (0 = none; resume then restarts).
        keep_checkpoints: Complete checkpoints kept (older ones are deleted).
        early_stop: Held-out early stopping and DPO collapse detection.
        watchdog: NaN and loss-spike detection.
        grpo: GRPO settings (method grpo only).
        device: auto | cpu | cuda.
        bf16: bf16 mixed precision; None: on only on CUDA with bf16 support.
        gradient_checkpointing: None: off on CPU, on on CUDA.
        launcher: inprocess | subprocess | accelerate (+ DeepSpeed settings).
        workspace: The workspace whose store records the job (None: the caller's).
    """

    fixset: str
    output_dir: str
    method: str = "sft"
    base_model: str | None = None
    lora: LoraSpec = field(default_factory=LoraSpec)
    init_adapter: str | None = None
    trainer: TrainerSpec = field(default_factory=TrainerSpec)
    checkpoint_every: int = 0
    keep_checkpoints: int = 2
    early_stop: EarlyStopSpec = field(default_factory=EarlyStopSpec)
    watchdog: WatchdogSpec = field(default_factory=WatchdogSpec)
    grpo: GRPOSpec = field(default_factory=GRPOSpec)
    device: str = "auto"
    bf16: bool | None = None
    gradient_checkpointing: bool | None = None
    launcher: LauncherSpec = field(default_factory=LauncherSpec)
    workspace: str | None = None

    def __post_init__(self) -> None:
        validate(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return str(yaml.safe_dump(self.to_dict(), sort_keys=False))


# -- validation ----------------------------------------------------------------------------------------


def _fail(name: str, problem: str) -> WorkbenchError:
    return WorkbenchError(f"job spec: `{name}` {problem}")


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _fail(name, f"must be one of {', '.join(choices)}, got `{value}`.{did_you_mean(value, choices)}")


def _at_least(name: str, value: float, low: float) -> None:
    if value < low:
        raise _fail(name, f"must be >= {low}, got {value}")


def validate(spec: JobSpec) -> None:
    """Value checks; raise WorkbenchError naming the field and how to fix it."""
    _choice("method", spec.method, METHODS)
    _choice("device", spec.device, DEVICES)
    _choice("launcher.kind", spec.launcher.kind, LAUNCHERS)
    _choice("early_stop.metric", spec.early_stop.metric, EARLY_STOP_METRICS)
    if not spec.fixset:
        raise _fail("fixset", "is required: the directory `workbench fix --out DIR` wrote")
    if not spec.output_dir:
        raise _fail("output_dir", "is required: where the adapter and checkpoints go")
    lo, t = spec.lora, spec.trainer
    _at_least("lora.r", lo.r, 1)
    _at_least("lora.alpha", lo.alpha, 1)
    if not 0 <= lo.dropout < 1:
        raise _fail("lora.dropout", f"must be in [0, 1), got {lo.dropout}")
    if lo.target_modules is not None and not lo.target_modules:
        raise _fail("lora.target_modules", "is empty; leave it out to pick per architecture")
    if lo.trainable_token_indices is not None and any(i < 0 for i in lo.trainable_token_indices):
        raise _fail("lora.trainable_token_indices", "holds token ids, which are >= 0")
    if t.learning_rate is not None and not 0 < t.learning_rate < 1:
        raise _fail("trainer.learning_rate", f"must be in (0, 1), got {t.learning_rate} (sft: try 1e-3)")
    if t.max_steps is not None:
        _at_least("trainer.max_steps", t.max_steps, 1)
    _at_least("trainer.per_device_batch_size", t.per_device_batch_size, 1)
    _at_least("trainer.gradient_accumulation", t.gradient_accumulation, 1)
    _at_least("trainer.warmup_steps", t.warmup_steps, 0)
    _at_least("trainer.max_length", t.max_length, 8)
    _at_least("trainer.logging_steps", t.logging_steps, 1)
    if t.dpo_beta <= 0:
        raise _fail("trainer.dpo_beta", f"must be > 0, got {t.dpo_beta}")
    if not t.dpo_loss_type:
        raise _fail("trainer.dpo_loss_type", 'is empty; e.g. ["sigmoid", "sft"]')
    for loss in t.dpo_loss_type:
        _choice("trainer.dpo_loss_type", loss, DPO_LOSSES)
    _at_least("checkpoint_every", spec.checkpoint_every, 0)
    _at_least("keep_checkpoints", spec.keep_checkpoints, 1)
    _at_least("early_stop.eval_every", spec.early_stop.eval_every, 0)
    _at_least("early_stop.patience", spec.early_stop.patience, 1)
    if spec.early_stop.collapse_nats <= 0:
        raise _fail("early_stop.collapse_nats", f"must be > 0, got {spec.early_stop.collapse_nats}")
    _validate_grpo(spec)
    _at_least("watchdog.spike_factor", spec.watchdog.spike_factor, 0)
    _at_least("watchdog.spike_window", spec.watchdog.spike_window, 2)
    la = spec.launcher
    _at_least("launcher.num_processes", la.num_processes, 1)
    if la.deepspeed_zero not in (0, 2, 3):
        raise _fail("launcher.deepspeed_zero", f"must be 0 (off), 2 or 3, got {la.deepspeed_zero}")
    if la.deepspeed_zero and la.kind != "accelerate":
        raise _fail("launcher.deepspeed_zero", "needs `launcher.kind: accelerate` (DeepSpeed runs under it)")
    if la.offload_params and la.deepspeed_zero != 3:
        raise _fail("launcher.offload_params", "needs `launcher.deepspeed_zero: 3` (ZeRO-2 cannot offload parameters)")
    if la.offload_optimizer and la.deepspeed_zero == 0:
        raise _fail("launcher.offload_optimizer", "needs `launcher.deepspeed_zero: 2` or 3")
    _choice("launcher.mixed_precision", la.mixed_precision, ("no", "bf16", "fp16"))
    if spec.device == "cpu" and spec.bf16:
        raise _fail("bf16", "is for CUDA; on `device: cpu` leave it out or set false")


def _validate_grpo(spec: JobSpec) -> None:
    g = spec.grpo
    _at_least("grpo.num_generations", g.num_generations, 2)
    _at_least("grpo.max_completion_length", g.max_completion_length, 1)
    _choice("grpo.loss_type", g.loss_type, GRPO_LOSSES)
    if g.temperature <= 0:
        raise _fail("grpo.temperature", f"must be > 0 (GRPO needs varied samples), got {g.temperature}")
    _at_least("grpo.beta", g.beta, 0)
    _at_least("grpo.hallucination_penalty", g.hallucination_penalty, 0)
    _at_least("grpo.format_weight", g.format_weight, 0)
    _at_least("grpo.replay_anchor", g.replay_anchor, 0)
    _at_least("grpo.replay_anchor_batch", g.replay_anchor_batch, 1)
    if not 0 <= g.abstention_guidance <= g.num_generations:
        raise _fail("grpo.abstention_guidance", f"must be in [0, grpo.num_generations={g.num_generations}], "
                    f"got {g.abstention_guidance}")
    if not 0 < g.max_replay_abstention <= 1:
        raise _fail("grpo.max_replay_abstention", f"must be in (0, 1], got {g.max_replay_abstention}")
    if g.max_kl <= 0:
        raise _fail("grpo.max_kl", f"must be > 0, got {g.max_kl}")
    _at_least("grpo.min_completion_length", g.min_completion_length, 0)
    _at_least("grpo.watch_window", g.watch_window, 1)
    if spec.method == "grpo":
        batch = spec.trainer.per_device_batch_size * spec.trainer.gradient_accumulation
        if batch % g.num_generations:
            raise _fail("trainer.per_device_batch_size", f"x trainer.gradient_accumulation ({batch}) must be a "
                        f"multiple of grpo.num_generations ({g.num_generations}): GRPO scores whole groups; "
                        f"e.g. per_device_batch_size: {g.num_generations * max(1, batch // g.num_generations)}")


# -- YAML ----------------------------------------------------------------------------------------------

_PATH_FIELDS = ("fixset", "output_dir", "base_model", "workspace")


def from_dict(data: dict[str, Any], *, base_dir: Path | None = None, where: str = "job spec") -> JobSpec:
    """A JobSpec from a mapping (YAML), checking keys and types; relative paths resolve against base_dir."""
    values = _build(JobSpec, data, "")
    if base_dir is not None:
        for name in _PATH_FIELDS:
            v = values.get(name)
            # base_model may be a hub id ("org/name"): resolve it only when it exists as a path.
            if isinstance(v, str) and not Path(v).is_absolute() and (name != "base_model" or (base_dir / v).exists()):
                values[name] = str((base_dir / v).resolve())
    try:
        return JobSpec(**values)
    except WorkbenchError as e:
        raise WorkbenchError(f"{where}: {str(e).removeprefix('job spec: ')}") from None


def _build(cls: type, data: Any, prefix: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _fail(prefix.rstrip(".") or "spec", f"must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    out: dict[str, Any] = {}
    for key, value in data.items():
        full = prefix + str(key)
        if key not in names:
            raise WorkbenchError(f"job spec: unknown key `{full}`.{did_you_mean(str(key), names)} "
                                 f"Known: {', '.join(prefix + n for n in names)}")
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            nested = typing.cast(type, hint)
            out[key] = nested(**_build(nested, value or {}, full + "."))
        else:
            out[key] = _coerce(full, hint, value)
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    for name in required:
        if name not in out:
            raise _fail(prefix + name, "is required")
    return out


def _coerce(name: str, hint: Any, value: Any) -> Any:
    """Check a YAML value against a field type (int, float, str, bool, list[...], X | None)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(name, inner[0], value)
    if origin is list:
        (item,) = typing.get_args(hint)
        if isinstance(value, str | int | float):
            value = [value]
        if not isinstance(value, list):
            raise _fail(name, f"must be a list, got {value!r}")
        return [_coerce(f"{name}[{i}]", item, v) for i, v in enumerate(value)]
    if hint is bool:
        if not isinstance(value, bool):
            raise _fail(name, f"must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(name, f"must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _fail(name, f"must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise _fail(name, f"must be a string, got {value!r}")
        return str(value)
    return value


def load_spec(path: str | Path) -> JobSpec:
    """A JobSpec from a YAML file."""
    p = Path(path)
    try:
        data = read_yaml_file(p)
    except FileNotFoundError:
        raise WorkbenchError(f"{p}: no such job file") from None
    except ValueError as e:
        raise WorkbenchError(str(e)) from None
    if not isinstance(data, dict):
        raise WorkbenchError(f"{p}: a job spec must be a YAML mapping (fixset: ..., output_dir: ...)")
    try:
        return from_dict(data, base_dir=p.parent.resolve(), where=str(p))
    except WorkbenchError as e:
        msg = str(e)
        raise WorkbenchError(msg if msg.startswith(str(p)) else f"{p}: {msg.removeprefix('job spec: ')}") from None


def save_spec(spec: JobSpec, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(spec.to_yaml())
    return p


# -- resolution ----------------------------------------------------------------------------------------


def resolve_spec(spec: JobSpec) -> JobSpec:
    """Every "auto" decided: base model, learning rate, LoRA targets, trainable tokens, device, bf16,
    gradient checkpointing. Reads the fix set manifest and the model's config (not its weights)."""
    from finetune.fixset import load_manifest

    manifest = load_manifest(spec.fixset)
    base = spec.base_model or manifest.model
    model_type = _model_type(base)
    lora = _adapter_lora(spec.init_adapter) if spec.init_adapter else dataclasses.replace(spec.lora)
    if lora.target_modules is None:
        if model_type not in DEFAULT_TARGETS:
            raise _fail("lora.target_modules", f"has no default for architecture `{model_type}`; list the "
                        "attention projections to adapt, e.g. [q_proj, v_proj]")
        lora.target_modules = list(DEFAULT_TARGETS[model_type])
    if lora.fan_in_fan_out is None:
        lora.fan_in_fan_out = model_type in FAN_IN_FAN_OUT
    if lora.trainable_token_indices is None:
        # The abstention phrase's tokens may never have been trained (the world's "i don't know"): train
        # their embedding rows in full. Measured on the default world (SFT, 400 steps): rows 96.6% of
        # targeted failures fixed, held-out absent facts 54.5% abstained, 0.4% broken; LoRA on the input
        # embedding instead 89.7%, 0% held-out, 0.9% broken. vLLM cannot load rows, only LoRA: for a
        # vLLM-served adapter set `trainable_token_indices: []` and add the embedding (EMBEDDINGS) to
        # `target_modules`. A model whose abstention tokens are trained needs neither.
        teaches = manifest.teaches_abstention(spec.method)
        lora.trainable_token_indices = _token_ids(base, manifest.new_tokens) if teaches else []
    trainer = dataclasses.replace(spec.trainer, dpo_loss_type=list(spec.trainer.dpo_loss_type))
    if trainer.max_steps is None:
        trainer.max_steps = DEFAULT_STEPS[spec.method]
    if trainer.learning_rate is None:
        # sft/dpo 3e-3 (bench/fix_efficacy.py, default world): 1e-3/5e-4 at 60 x 16 fixed 2%/10% of the targeted
        # failures; DPO 120 x 32 fixed 75% at 2e-3, 78% at 3e-3; SFT (r 8) at 5e-3 broke 1.6% of correct probes.
        # grpo 1e-3 (same bench, --rl, anchor 4, temperature 0.5, 150 steps): 3e-3 hit the reward_hacking
        # watchdog at step 117 with 2.1% of correct answers broken; 1e-3 ran all steps and broke 0.9%.
        trainer.learning_rate = {"sft": 3e-3, "dpo": 3e-3, "grpo": 1e-3}[spec.method]
    device = spec.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise _fail("device", "is cuda but no CUDA GPU is visible; use `device: cpu` or auto")
    bf16 = spec.bf16
    if bf16 is None:
        import torch

        bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
    ckpt = spec.gradient_checkpointing if spec.gradient_checkpointing is not None else device == "cuda"
    grpo = dataclasses.replace(spec.grpo)
    if grpo.use_vllm is None:
        import importlib.util

        # trl 1.16's weight sync into vLLM cannot send peft trainable tokens (embed_tokens.token_adapter)
        grpo.use_vllm = (device == "cuda" and importlib.util.find_spec("vllm") is not None
                         and not lora.trainable_token_indices)
    if spec.method == "grpo" and grpo.use_vllm and lora.trainable_token_indices:
        raise _fail("grpo.use_vllm", "cannot be combined with trainable tokens (lora.trainable_token_indices, on "
                    "by default for abstention): trl's weight sync into vLLM fails on them; set `grpo.use_vllm: "
                    "false`, or `lora.trainable_token_indices: []` when the tokenizer already knows the phrase")
    return dataclasses.replace(spec, base_model=base, lora=lora, trainer=trainer, device=device, bf16=bf16,
                               gradient_checkpointing=ckpt, grpo=grpo)


def _model_type(model: str) -> str:
    cfg = Path(model) / "config.json"
    if cfg.is_file():
        return str(json.loads(cfg.read_text()).get("model_type", ""))
    try:
        from transformers import AutoConfig

        return str(AutoConfig.from_pretrained(model).model_type)
    except OSError as e:
        raise _fail("base_model", f"`{model}` cannot be read ({e}); give a local model directory") from None


def _adapter_lora(path: str) -> LoraSpec:
    """The LoRA settings of an existing peft adapter (`init_adapter`): the job continues it as it is."""
    p = Path(path) / "adapter_config.json"
    try:
        cfg = json.loads(p.read_text())
    except FileNotFoundError:
        raise _fail("init_adapter", f"`{path}` is not a peft adapter directory (no adapter_config.json); "
                    "point it at a job's `adapter/` folder") from None
    except json.JSONDecodeError as e:
        raise _fail("init_adapter", f"{p}: not valid JSON ({e})") from None
    if cfg.get("peft_type") != "LORA":
        raise _fail("init_adapter", f"`{path}` is a {cfg.get('peft_type')} adapter; jobs continue LoRA adapters")
    tokens = cfg.get("trainable_token_indices") or []
    if isinstance(tokens, dict):  # peft keys the rows by embedding module when it was named
        tokens = sorted({i for ids in tokens.values() for i in ids})
    return LoraSpec(r=int(cfg["r"]), alpha=int(cfg["lora_alpha"]), dropout=float(cfg.get("lora_dropout") or 0.0),
                    target_modules=sorted(targets) if isinstance(targets := cfg["target_modules"], list) else [targets],
                    fan_in_fan_out=bool(cfg.get("fan_in_fan_out")),
                    trainable_token_indices=list(tokens))


def _token_ids(model: str, tokens: list[str]) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    ids = typing.cast(list[int], tok.convert_tokens_to_ids(list(tokens)))
    unk = tok.unk_token_id
    bad = [t for t, i in zip(tokens, ids, strict=True) if i is None or (unk is not None and i == unk)]
    if bad:
        raise _fail("lora.trainable_token_indices", f"cannot be derived: the tokenizer of `{model}` lacks "
                    f"{bad}; add those tokens to the tokenizer or set the indices yourself")
    return sorted({int(i) for i in ids})


def with_absolute_paths(spec: JobSpec) -> JobSpec:
    """The spec with fixset/output_dir/workspace/init_adapter (and base_model when local) made absolute,
    so a YAML saved anywhere (launchers, job.yaml) still points at the same files."""
    def absolute(v: str | None, must_exist: bool = False) -> str | None:
        if v is None or Path(v).is_absolute() or (must_exist and not Path(v).exists()):
            return v
        return str(Path(v).resolve())

    return dataclasses.replace(spec, fixset=absolute(spec.fixset) or spec.fixset,
                               output_dir=absolute(spec.output_dir) or spec.output_dir,
                               base_model=absolute(spec.base_model, must_exist=True),
                               init_adapter=absolute(spec.init_adapter), workspace=absolute(spec.workspace))

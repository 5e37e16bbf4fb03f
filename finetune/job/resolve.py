"""Resolve a job spec once into a `ResolvedJob`: every "auto" decided, every path absolute, every check that
needs the fix set or the model's config done, before a job row, a file or a weight is written.

It reads the fix set's manifest, the model's `config.json` and (only when the abstention tokens must be
derived) its tokenizer; never its weights. Resolving a resolved spec (the `output_dir/job.yaml` a job
saves, which the launchers' child processes read) decides nothing again.

Also here: the job -> memory pre-flight mapping (`ResolvedJob.preflight_spec`, `check_fits`), written once
for `workbench train`, `workbench preflight --job` and the app's Fix tab.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from finetune.fixset import UNTARGETED, FixSetManifest, load_manifest
from finetune.job.defaults import (
    JOB_DEFAULTS,
    LR_REFERENCE_WIDTH,
    MAX_DEFAULT_STEPS,
    MIN_DEFAULT_STEPS,
    SMALL_SET_ROWS,
    SMALL_SET_SCORINGS,
    SMALL_SET_STEPS,
    Default,
    JobDefaults,
    SizeName,
    row_for,
    size_class,
)
from finetune.job.spec import OVERRIDES, JobSpec, LoraSpec, grpo_batch_problem
from finetune.preflight import LORA_TARGETS, Estimate, PreflightSpec, load_shape, require_fit
from workbench.errors import WorkbenchError
from workbench.models import resolve_model
from workbench.textgen import check_adapter_path, check_model_path

#: LoRA target modules per architecture (config.model_type) for a row's `targets` "all-linear" (every linear layer
#: of the block) and "attention" (the query and value projections, fused qkv where the architecture fuses them).
#: Which one a job gets: the defaults table (finetune/job/defaults.py).
_LLAMA_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DEFAULT_TARGETS: dict[str, list[str]] = {
    "llama": _LLAMA_LINEAR, "mistral": _LLAMA_LINEAR, "qwen2": _LLAMA_LINEAR, "qwen3": _LLAMA_LINEAR,
    "gemma": _LLAMA_LINEAR, "gemma2": _LLAMA_LINEAR,
    "phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"], "gpt2": ["c_attn", "c_proj", "c_fc"],
    "gpt_neox": ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
    "opt": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
}
_QV = ["q_proj", "v_proj"]
ATTENTION_TARGETS: dict[str, list[str]] = {
    "llama": _QV, "mistral": _QV, "qwen2": _QV, "qwen3": _QV, "gemma": _QV, "gemma2": _QV, "opt": _QV,
    "phi3": ["qkv_proj"], "gpt2": ["c_attn"], "gpt_neox": ["query_key_value"],
}
TARGETS = {"all-linear": DEFAULT_TARGETS, "attention": ATTENTION_TARGETS}
#: The input-embedding module per architecture: LoRA on it also makes never-trained abstention tokens
#: learnable, in a form vLLM serves (see `_abstention_rows`).
EMBEDDINGS: dict[str, str] = {
    "llama": "embed_tokens", "mistral": "embed_tokens", "qwen2": "embed_tokens", "qwen3": "embed_tokens",
    "gemma": "embed_tokens", "gemma2": "embed_tokens", "phi3": "embed_tokens", "opt": "embed_tokens",
    "gpt2": "wte", "gpt_neox": "embed_in",
}
#: An abstention token's embedding row counts as never trained when it sits within this many init scales
#: (initializer_range x sqrt(hidden), the norm of a freshly initialised row) of another row. Rows no input
#: gradient reached keep their init noise plus, with a tied head, the same output-side drift, so they stay
#: about one init scale apart; trained rows spread out. Measured (nearest other row / init scale): the
#: never-trained reserved tokens of 7 world models (en seed 0 113 and 308/312 tokens, alt pools, 3 Chinese
#: worlds) 0.70-1.12; trained phrase tokens there ("'" in the corpus) 2.69-3.93; SmolLM2-135M " I", " don",
#: "'t", " know", "." 3.29-4.78, its never-used special tokens 0.0 (identical rows).
UNTRAINED_DISTANCE = 1.25
#: ... or when its norm is still within this share of the init scale (an untied model's untouched row; the
#: norm of a random row concentrates at the scale +- 1/sqrt(2 x hidden); trained rows measured 2.3-5x it).
UNTRAINED_NORM = 0.1
#: Architectures whose attention weights are Conv1D (stored transposed): peft needs fan_in_fan_out.
FAN_IN_FAN_OUT = ("gpt2",)


@dataclass(frozen=True)
class SizeDefaults:
    """One size class's rows of the defaults table (finetune/job/defaults.py), by method. Its attributes read the
    sft row (the size class's LoRA and batch; `epochs` per method); a job reads its own row (`row_for`)."""

    name: SizeName

    def row(self, method: str) -> JobDefaults:
        return JOB_DEFAULTS[(self.name, method)]

    @property
    def lora_r(self) -> int:
        return self.row("sft").lora_r.value

    @property
    def lora_alpha(self) -> int:
        return self.row("sft").lora_alpha.value

    @property
    def batch(self) -> int:
        return self.row("sft").batch.value

    @property
    def epochs(self) -> dict[str, float]:
        rows = [r for (size, _), r in JOB_DEFAULTS.items() if size == self.name]
        return {r.method: r.epochs.value for r in rows if r.epochs.value is not None}

    def describe(self, method: str) -> str:
        return self.row(method).describe()


WORLD, PRETRAINED = SizeDefaults("world-size"), SizeDefaults("pretrained-size")
#: The world-size epochs per method (the table's values; tests and benches read them here).
DEFAULT_EPOCHS = WORLD.epochs


@dataclass(frozen=True)
class ResolvedJob:
    """A job ready to run: the spec with every "auto" decided (what `output_dir/job.yaml` records), the fix
    set it trains on, and the decisions as typed values.

    Attributes:
        spec: The decided spec, paths absolute.
        manifest: The fix set's manifest.
        split: The fix-set split the method trains on (checked to hold training rows).
        output_dir: Where job.yaml, checkpoints/, adapter/ and result.json go.
        base_model: The model directory (or hub id) trained.
        device: cpu or cuda.
        bf16, gradient_checkpointing: Decided for the device.
        max_steps, learning_rate: Decided for the method.
        batch, lora_r, lora_alpha: `trainer.per_device_batch_size`, `lora.r`, `lora.alpha`, decided by the model's
            size (the defaults table, finetune/job/defaults.py) unless given (an `init_adapter`'s own r and alpha
            when the job continues one).
        target_modules, fan_in_fan_out, trainable_tokens: The LoRA decided for the architecture and the fix
            set (an `init_adapter`'s own settings when the job continues one).
        tokens_decision: Why `trainable_tokens` holds what it does (the job records it as an event).
        steps_rule, lr_rule: Which rule gave `max_steps` / `learning_rate`, with its figures (e.g. `60 (8 epochs
            x 120 rows / batch 16)`), or that the spec gave it (recorded in the job's `start` event and result).
        use_vllm: GRPO rollouts through vLLM.
        size_rule: Which row of the defaults table (finetune/job/defaults.py) the job took where its spec gave no
            value, and why (recorded with the steps and learning-rate rules).
        scale_source: Where the decided `spec.trainer.adapter_scale` (the spec's, else the defaults table's)
            came from, in words (the job's `adapter_scale` event and result say it).
    """

    spec: JobSpec
    manifest: FixSetManifest
    split: str
    output_dir: Path
    base_model: str
    device: Literal["cpu", "cuda"]
    bf16: bool
    gradient_checkpointing: bool
    max_steps: int
    learning_rate: float
    batch: int
    lora_r: int
    lora_alpha: int
    target_modules: tuple[str, ...]
    fan_in_fan_out: bool
    trainable_tokens: tuple[int, ...]
    use_vllm: bool
    tokens_decision: str = ""
    steps_rule: str = ""
    lr_rule: str = ""
    scale_source: str = "the job spec"
    size_rule: str = ""

    @property
    def method(self) -> str:
        return self.spec.method

    @property
    def rows_per_step(self) -> int:
        """Training rows one optimizer step takes (`rows_per_step`)."""
        return rows_per_step(self.spec, self.batch)

    def preflight_spec(self, gpu_memory_gib: float) -> PreflightSpec:
        """The memory pre-flight of this job on GPUs of `gpu_memory_gib` (the one job -> pre-flight mapping).
        Target modules the pre-flight does not model (GPT-2's Conv1D names) count as every linear layer."""
        la, t = self.spec.launcher, self.spec.trainer
        modelled = tuple(m for m in self.target_modules if m in LORA_TARGETS)
        return PreflightSpec(
            model=load_shape(self.base_model), gpu_memory_gib=gpu_memory_gib,
            method="dpo-lora" if self.method == "dpo" else "lora", precision="bf16" if self.bf16 else "fp32",
            zero=la.deepspeed_zero, offload_optimizer=la.offload_optimizer,
            gradient_checkpointing=self.gradient_checkpointing, micro_batch=self.batch,
            gradient_accumulation=t.gradient_accumulation, seq_len=t.max_length, gpus=la.num_processes,
            lora_rank=self.lora_r, lora_targets=modelled or LORA_TARGETS)


def check_fits(job: ResolvedJob | StagedJob, *, force: bool = False) -> Estimate | None:
    """The pre-flight a CUDA job runs before it starts (raises WorkbenchError unless it fits on the visible
    GPU); None for a CPU job, which has no GPU memory to check. A staged job: every stage, the largest estimate."""
    if isinstance(job, StagedJob):
        found = [e for stage in job.stages if (e := check_fits(stage, force=force)) is not None]
        return max(found, key=lambda e: e.peak_bytes, default=None)
    if job.device != "cuda" or force:
        return None
    import torch

    gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    return require_fit(job.preflight_spec(gib))


def resolve(spec: JobSpec, *, for_gpu: bool = False) -> ResolvedJob:
    """Decide every "auto" of `spec` (see the module docstring); raises WorkbenchError naming the field.
    `for_gpu`: decide as on a CUDA machine with bf16 (`workbench preflight --job` on a machine without one)."""
    spec = _absolute(spec)
    if spec.method == "staged":
        raise WorkbenchError("job spec: a `method: staged` job is resolved stage by stage (`resolve_job`)")
    if spec.launcher.kind == "accelerate" and not for_gpu and _device(spec) != "cuda":
        raise _fail("launcher.kind", "is accelerate, which needs CUDA GPUs; none is visible here (use "
                    "`launcher.kind: inprocess` or subprocess)")
    out = Path(spec.output_dir)
    if out.exists() and not out.is_dir():
        raise _fail("output_dir", f"`{out}` is a file; give a directory (it is created when missing)")
    manifest = load_manifest(spec.fixset)
    split = manifest.require_rows(spec.method)
    # A built-in name (`smollm2`) or a .gguf file: the model directory converted into the workspace.
    base = resolve_model(spec.base_model or manifest.model, spec.workspace or ".workbench")
    try:
        check_model_path(base, what="base_model")
    except WorkbenchError as e:
        raise _fail("base_model", f"cannot be used: {e}") from None
    config = _model_config(base)
    model_type = str(config.get("model_type", ""))
    lora = _adapter_lora(spec.init_adapter) if spec.init_adapter else spec.lora
    row, size_rule = row_for(spec.method, _width(config))  # the defaults table's row (finetune/job/defaults.py)
    row = row.for_fixset(manifest.injects(spec.method))  # as this fix set reads it
    targets = lora.target_modules
    if targets is None:
        by_arch = TARGETS[row.targets.value]
        if model_type not in by_arch:
            raise _fail("lora.target_modules", f"has no default for architecture `{model_type}`; list the "
                        "attention projections to adapt, e.g. [q_proj, v_proj]")
        targets = by_arch[model_type]
    rank, alpha = lora.r or row.lora_r.value, lora.alpha or row.lora_alpha.value
    _check_rank(rank, config, base)
    tokens = lora.trainable_token_indices
    decision = "given by the job spec (`lora.trainable_token_indices`)"
    if tokens is None and not manifest.teaches_abstention(spec.method):
        tokens, decision = [], f"none: a {spec.method} job on this fix set never teaches abstention"
    elif tokens is None:
        tokens, decision = _abstention_rows(base, manifest, config)
    vocab = config.get("vocab_size")
    if isinstance(vocab, int) and any(i >= vocab for i in tokens):
        raise _fail("lora.trainable_token_indices", f"holds ids beyond the vocabulary of `{base}` ({vocab} tokens)")
    fan = lora.fan_in_fan_out if lora.fan_in_fan_out is not None else model_type in FAN_IN_FAN_OUT
    device = "cuda" if for_gpu else _device(spec)
    bf16 = spec.bf16 if spec.bf16 is not None else device == "cuda" and (for_gpu or _cuda_bf16())
    ckpt = spec.gradient_checkpointing if spec.gradient_checkpointing is not None else device == "cuda"
    use_vllm = spec.grpo.use_vllm
    if use_vllm is None:
        # trl 1.16's weight sync into vLLM cannot send peft trainable tokens (embed_tokens.token_adapter)
        use_vllm = device == "cuda" and not tokens and importlib.util.find_spec("vllm") is not None
    if spec.method == "grpo" and use_vllm and tokens:
        raise _fail("grpo.use_vllm", "cannot be combined with trainable tokens (lora.trainable_token_indices, on "
                    "by default for abstention): trl's weight sync into vLLM fails on them; set `grpo.use_vllm: "
                    "false`, or `lora.trainable_token_indices: []` when the tokenizer already knows the phrase")
    t = spec.trainer
    for field, methods in (("rehearsal_kl", ("sft",)), ("replay_kl", ("sft", "dpo", "grpo"))):
        if spec.method not in methods and (getattr(t, field) or 0) > 0:  # else the term is silently never added
            raise _fail(f"trainer.{field}", f"is a term of {' and '.join(methods)} jobs; a {spec.method} job has "
                        "none (set it to 0)")
    batch = t.per_device_batch_size or row.batch.value
    if spec.method == "grpo" and (problem := grpo_batch_problem(spec, batch)):
        raise WorkbenchError(f"job spec: {problem}")
    epochs = t.epochs or row.epochs.value
    per_step = rows_per_step(spec, batch)
    targeted = sum(n for cat, n in manifest.counts.get(split, {}).items() if cat not in UNTARGETED)
    es = spec.early_stop
    # a small set's rule: until its targets are fixed (asked for, or by default where the spec sets no steps)
    small = 0 < targeted <= SMALL_SET_ROWS and (es.until_fixed or (es.until_fixed is None and t.max_steps is None))
    if epochs is None:
        rule_steps = row.steps_fixed
        steps_rule = f"{rule_steps} ({spec.method}'s fixed default; `trainer.epochs` scales it to the fix set)"
    else:
        rule_steps, steps_rule = default_steps(epochs, manifest.train_rows.get(split, 0), per_step,
                                               row.min_steps.value)
        if row.epochs is row.injection_epochs and epochs == row.epochs.value:  # as a saved job.yaml reads
            steps_rule += f"; {epochs:g} epochs: its rows inject facts"
        if small:  # trains until its targets are fixed (early_stop.until_fixed), within this many steps
            rule_steps = min(MAX_DEFAULT_STEPS, rule_steps * SMALL_SET_STEPS)
            steps_rule = (f"{rule_steps} (x{SMALL_SET_STEPS} for a small fix set, {targeted} targeted rows <= "
                          f"{SMALL_SET_ROWS}, stopping once its targets are fixed: {steps_rule})")
    # a saved job.yaml names its epochs
    decided_before = t.epochs is not None or row.fixed_steps.value is not None
    steps, steps_rule = _given_or_rule(t.max_steps, rule_steps, steps_rule, "trainer.max_steps", decided_before)
    rule_lr, lr_rule = default_lr(spec.method, _width(config))
    lr, lr_rule = _given_or_rule(t.learning_rate, rule_lr, lr_rule, "trainer.learning_rate", decided_before)
    default_scale = row.adapter_scale.value
    scale = t.adapter_scale if t.adapter_scale is not None else default_scale
    # a saved job.yaml holds the default it was given (`--resume`, a launcher's child): still the default's
    by_default = t.adapter_scale is None or (decided_before and scale == default_scale)
    scale_source = f"{spec.method}'s default (the spec gives no `trainer.adapter_scale`)" if by_default \
        else "the job spec (`trainer.adapter_scale`)"
    replay_kl = _replay_kl(t.replay_kl, row, manifest, split)
    until_fixed = bool(small) if es.until_fixed is None else es.until_fixed
    known_every = es.known_every or (max(1, steps // SMALL_SET_SCORINGS) if until_fixed else 0)
    decided = spec.model_copy(update={
        "base_model": base, "device": device, "bf16": bf16, "gradient_checkpointing": ckpt,
        "lora": lora.model_copy(update={"r": rank, "alpha": alpha, "target_modules": list(targets),
                                        "fan_in_fan_out": fan, "trainable_token_indices": list(tokens)}),
        "trainer": t.model_copy(update={"max_steps": steps, "learning_rate": lr, "epochs": epochs,
                                        "adapter_scale": scale, "per_device_batch_size": batch,
                                        "replay_kl": replay_kl}),
        "grpo": spec.grpo.model_copy(update={"use_vllm": use_vllm}),
        "early_stop": es.model_copy(update={"known_every": known_every, "until_fixed": until_fixed}),
    })
    return ResolvedJob(spec=decided, manifest=manifest, split=split, output_dir=out, base_model=base, device=device,
                       bf16=bf16, gradient_checkpointing=ckpt, max_steps=steps, learning_rate=lr, batch=batch,
                       lora_r=rank, lora_alpha=alpha,
                       target_modules=tuple(targets), fan_in_fan_out=fan, trainable_tokens=tuple(tokens),
                       use_vllm=use_vllm, tokens_decision=decision, steps_rule=steps_rule, lr_rule=lr_rule,
                       scale_source=scale_source, size_rule=size_rule)


#: Where a staged job's stages go: `output_dir/stages/1-sft`, `2-dpo`, ...
STAGES_DIR = "stages"


@dataclass(frozen=True)
class StagedJob:
    """A `method: staged` job ready to run: its spec (paths absolute) and each stage resolved as planned.

    A later stage continues the adapter of the stage before (`init_adapter`), which exists only once that stage
    has run; here it is resolved with the first stage's LoRA in its place (the same rank, targets and token rows the
    adapter will carry), so every stage's fix set, split, model and memory are checked before anything trains. The
    runner (finetune/job/staged.py) resolves each stage again on the real adapter when it starts.

    Attributes:
        spec: The staged spec.
        stages: Each stage's job as planned, in order.
    """

    spec: JobSpec
    stages: tuple[ResolvedJob, ...]

    @property
    def output_dir(self) -> Path:
        return Path(self.spec.output_dir)

    @property
    def method(self) -> str:
        return "staged"


def stage_dir(spec: JobSpec, index: int) -> Path:
    """The output_dir of stage `index` (0-based) of a staged job."""
    return Path(spec.output_dir) / STAGES_DIR / f"{index + 1}-{spec.stages[index].method}"


def stage_spec(spec: JobSpec, index: int) -> JobSpec:
    """Stage `index` of a staged job as a job of its own: the job's settings with the stage's overrides, its own
    output_dir, continuing the adapter of the stage before (the first: the job's `init_adapter`). Every stage but the
    last keeps its whole trained delta (`adapter_scale` 1.0 unless the stage gives one): the next stage continues it,
    and the last one's scale is decided over every stage's targets."""
    st = spec.stages[index]
    data = spec.to_dict()
    del data["stages"]
    for name in OVERRIDES:  # the fields the stage gives replace the job's
        data[name] = {**data[name], **getattr(st, name).model_dump(mode="json", exclude_unset=True)}
    if index < len(spec.stages) - 1 and "adapter_scale" not in st.trainer.model_fields_set:
        data["trainer"]["adapter_scale"] = 1.0
    data.update(method=st.method, fixset=st.fixset or spec.fixset, output_dir=str(stage_dir(spec, index)),
                init_adapter=spec.init_adapter if index == 0 else str(stage_dir(spec, index - 1) / "adapter"))
    return JobSpec.model_validate(data)


def resolve_job(spec: JobSpec, *, for_gpu: bool = False) -> ResolvedJob | StagedJob:
    """`resolve`, or `resolve_staged` for a `method: staged` spec: what `workbench train` and the launchers run."""
    return resolve_staged(spec, for_gpu=for_gpu) if spec.method == "staged" else resolve(spec, for_gpu=for_gpu)


def resolve_staged(spec: JobSpec, *, for_gpu: bool = False) -> StagedJob:
    """Every stage of a staged job resolved as planned (see `StagedJob`); raises WorkbenchError naming the stage."""
    spec = _absolute(spec)
    stages: list[ResolvedJob] = []
    for i in range(len(spec.stages)):
        planned = stage_spec(spec, i)
        if i > 0:  # the adapter it continues does not exist yet: the first stage's LoRA stands in for it
            first = stages[0].spec.lora
            planned = planned.model_copy(update={"init_adapter": None, "lora": first})
        try:
            stages.append(resolve(planned, for_gpu=for_gpu))
        except WorkbenchError as e:
            raise WorkbenchError(f"stage {i + 1} ({planned.method}): {e}") from None
    return StagedJob(spec, tuple(stages))


def _replay_kl(given: float | None, row: JobDefaults, manifest: FixSetManifest, split: str) -> float:
    """`trainer.replay_kl`: the spec's, else the row's (as the fix set reads it, `JobDefaults.for_fixset`), but 0 on
    a split with no replay rows (a set built with --allow-unguarded: the default has no known fact to hold)."""
    if given is not None:
        return given
    return row.replay_kl.value if manifest.counts.get(split, {}).get("replay") else 0.0


@dataclass(frozen=True)
class DefaultUse:
    """One row value as a job uses it (`explain`).

    Attributes:
        key: The job spec field it fills (`lora.r`).
        value: What the job gets: the spec's value when it gives one, else the table's (steps and learning rate:
            the rule's result for this fix set and model).
        given: The spec gives the value (the table's is then shown beside it, not used).
        default: The table's value, its reason and its benchmark page.
    """

    key: str
    value: Any
    given: bool
    default: Default[object]

    def line(self) -> str:
        why = f"{self.default.why} [{self.default.source}]"
        if self.given:  # the table's value beside the spec's, so a reader sees what was overridden
            why = f"given by the job spec (the table's {_words(self.default.value)}: {why})"
        return f"  {self.key:<31} {_words(self.value):<26} {why}"


@dataclass(frozen=True)
class Explanation:
    """The defaults table's row a job gets, and each of its values as the job uses it (`workbench train --explain`).

    Attributes:
        row: The row (finetune/job/defaults.py). size_rule: why that row, in words (the job records it too).
        uses: Each value of the row, in the table's order. model, width: the base model and its width.
    """

    row: JobDefaults
    size_rule: str
    uses: list[DefaultUse]
    model: str
    width: int | None

    def lines(self) -> list[str]:
        head = [f"base model {self.model} (width {self.width or 'unknown'}), method {self.row.method}",
                f"defaults row ({self.row.size}, {self.row.method}): {self.size_rule}"]
        return head + [u.line() for u in self.uses]

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.row.size, "method": self.row.method, "size_rule": self.size_rule, "model": self.model,
                "width": self.width, "values": [{"key": u.key, "value": u.value, "given": u.given,
                                                 "default": u.default.value, "why": u.default.why,
                                                 "source": u.default.source} for u in self.uses]}


@dataclass(frozen=True)
class StagedExplanation:
    """Each stage's `Explanation` of a staged job, in order (`workbench train --explain` on a staged spec)."""

    stages: list[Explanation]

    def lines(self) -> list[str]:
        out = [f"staged job: {' -> '.join(e.row.method for e in self.stages)}, on one adapter"]
        for i, e in enumerate(self.stages, 1):
            out += [f"stage {i} of {len(self.stages)} ({e.row.method}):", *(f"  {line}" for line in e.lines())]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"method": "staged", "stages": [e.to_dict() for e in self.stages]}


def explain(spec: JobSpec) -> Explanation | StagedExplanation:
    """The defaults table's row `spec` gets and how each value is used, reading only the fix set's manifest and the
    model's config.json: no weights, no torch, nothing decided for the device. A staged job: each stage's (a later
    stage as planned: the first stage's LoRA in place of the adapter it will continue)."""
    if spec.method == "staged":
        stages = [stage_spec(spec, i) for i in range(len(spec.stages))]
        planned = [st if i == 0 else st.model_copy(update={"init_adapter": None}) for i, st in enumerate(stages)]
        found = [explain(st) for st in planned]
        return StagedExplanation([e for e in found if isinstance(e, Explanation)])
    spec = _absolute(spec)
    manifest = load_manifest(spec.fixset)
    split = manifest.require_rows(spec.method)
    base = resolve_model(spec.base_model or manifest.model, spec.workspace or ".workbench")
    width = _width(_model_config(base))
    row, size_rule = row_for(spec.method, width)
    row = row.for_fixset(manifest.injects(spec.method))  # the lines in use: a set that injects facts has its own
    lora, t = (_adapter_lora(spec.init_adapter) if spec.init_adapter else spec.lora), spec.trainer
    batch = t.per_device_batch_size or row.batch.value
    epochs = t.epochs or row.epochs.value
    steps = row.steps_fixed if epochs is None else default_steps(
        epochs, manifest.train_rows.get(split, 0), rows_per_step(spec, batch), row.min_steps.value)[1]
    fields: dict[str, tuple[str, Any, Any]] = {  # row field -> (spec key, the spec's value, the table's in use)
        "targets": ("lora.target_modules", lora.target_modules, row.targets.value),
        "lora_r": ("lora.r", lora.r, row.lora_r.value), "lora_alpha": ("lora.alpha", lora.alpha, row.lora_alpha.value),
        "batch": ("trainer.per_device_batch_size", t.per_device_batch_size, batch),
        "epochs": ("trainer.epochs", t.epochs, row.epochs.value),
        "fixed_steps": ("trainer.max_steps", t.max_steps, steps),
        "min_steps": ("(steps floor)", None, row.min_steps.value),
        "learning_rate": ("trainer.learning_rate", t.learning_rate, default_lr(spec.method, width)[1]),
        "adapter_scale": ("trainer.adapter_scale", t.adapter_scale, row.adapter_scale.value),
        "replay_kl": ("trainer.replay_kl", t.replay_kl, _replay_kl(None, row, manifest, split))}
    table = row.values()
    uses = [DefaultUse(key, given if given is not None else rule, given is not None, table[name])
            for name, (key, given, rule) in fields.items()]
    return Explanation(row, size_rule, uses, base, width)


def _words(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def rows_per_step(spec: JobSpec, batch: int) -> int:
    """Training rows one optimizer step takes at micro batch `batch`, over every process and accumulated micro
    batch (grpo: prompts; its batch counts completions, `grpo.num_generations` of them per prompt)."""
    rows = batch * spec.trainer.gradient_accumulation * spec.launcher.num_processes
    return max(1, rows // spec.grpo.num_generations) if spec.method == "grpo" else rows


def default_steps(epochs: float, rows: int, batch: int, min_steps: int = MIN_DEFAULT_STEPS) -> tuple[int, str]:
    """(optimizer steps, the rule in words) for `epochs` passes over `rows` training rows at `batch` rows a
    step (a batch larger than the rows takes them all once a step), within [min_steps, MAX_DEFAULT_STEPS]
    (`min_steps`: the row's floor, finetune/job/defaults.py)."""
    per_step = max(1, min(batch, rows))
    raw = math.ceil(epochs * rows / per_step)
    steps = min(MAX_DEFAULT_STEPS, max(min_steps, raw))
    why = f"{epochs:g} epochs x {rows} rows / batch {per_step}"
    if steps != raw:
        why += f" = {raw}, clamped to [{min_steps}, {MAX_DEFAULT_STEPS}]"
    return steps, f"{steps} ({why})"


def size_defaults(method: str, width: int | None) -> tuple[SizeDefaults, str]:
    """(the size class of a `method` job on a model of `width`, the size rule in words; `size_class` says which)."""
    size = PRETRAINED if size_class(method, width)[0] == PRETRAINED.name else WORLD
    return size, row_for(method, width)[1]


def default_lr(method: str, width: int | None) -> tuple[float, str]:
    """(learning rate, the rule in words): the row's `learning_rate` up to LR_REFERENCE_WIDTH, then scaled by
    LR_REFERENCE_WIDTH / width (muP's rule for Adam on hidden matrices: an update of a fixed size moves a wider
    layer's output more; 9.4e-5 at a 7B model's 4096, where LoRA recipes use 1e-4 to 2e-4)."""
    base = row_for(method, width)[0].learning_rate.value
    if width is None or width <= LR_REFERENCE_WIDTH:
        return base, f"{base:g} ({method} at width {width or 'unknown'} <= {LR_REFERENCE_WIDTH})"
    lr = float(f"{base * LR_REFERENCE_WIDTH / width:.2g}")
    return lr, f"{lr:g} ({method} {base:g} x {LR_REFERENCE_WIDTH} / width {width})"


def _given_or_rule(given: Any, rule_value: Any, rule: str, field: str, resolved: bool) -> tuple[Any, str]:
    """The spec's value when it gives one (the rule's words when it equals the rule's value in a spec that may
    have been resolved before: a job's own saved job.yaml, re-read by a launcher's child or --resume)."""
    if given is None:
        return rule_value, rule
    if resolved and given == rule_value:
        return given, rule
    return given, f"{given:g} (given by the job spec: `{field}`)"


def _width(config: dict[str, Any]) -> int | None:
    return next((v for k in ("hidden_size", "n_embd", "d_model") if isinstance(v := config.get(k), int)), None)


def _fail(name: str, problem: str) -> WorkbenchError:
    return WorkbenchError(f"job spec: `{name}` {problem}")


def _absolute(spec: JobSpec) -> JobSpec:
    """fixset/output_dir/workspace/init_adapter (and base_model when it exists locally) made absolute, so the
    saved job.yaml points at the same files from anywhere (launchers' child processes, `--resume`)."""
    def absolute(v: str | None, must_exist: bool = False) -> str | None:
        if v is None or Path(v).is_absolute() or (must_exist and not Path(v).exists()):
            return v
        return str(Path(v).resolve())

    return spec.model_copy(update={
        "fixset": absolute(spec.fixset), "output_dir": absolute(spec.output_dir),
        "base_model": absolute(spec.base_model, must_exist=True), "init_adapter": absolute(spec.init_adapter),
        "workspace": absolute(spec.workspace)})


def _model_config(model: str) -> dict[str, Any]:
    cfg = Path(model) / "config.json"
    if cfg.is_file():
        return dict(json.loads(cfg.read_text()))
    try:
        from transformers import AutoConfig

        return dict(AutoConfig.from_pretrained(model).to_dict())
    except (OSError, ValueError) as e:
        raise _fail("base_model", f"`{model}` cannot be read ({e}); give a local model directory") from None


def _check_rank(r: int, config: dict[str, Any], model: str) -> None:
    """A LoRA update of a width-h layer has rank <= h: a larger r only costs memory (and r x h x layers x
    targets parameters can exhaust it: `lora.r: 100000000` asked for 25.6 GB before this check)."""
    width = _width(config)
    if width is not None and r > width:
        raise _fail("lora.r", f"is {r}, above the hidden size of `{model}` ({width}); a rank above the layer "
                    "width adds nothing; use a smaller r (e.g. 8-64)")


def _device(spec: JobSpec) -> Literal["cpu", "cuda"]:
    if spec.device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if spec.device == "cuda":
        raise _fail("device", "is cuda but no CUDA GPU is visible; use `device: cpu` or auto")
    return "cpu"


def _cuda_bf16() -> bool:
    import torch

    return bool(torch.cuda.is_bf16_supported())


def _adapter_lora(path: str) -> LoraSpec:
    """The LoRA settings of an existing peft adapter (`init_adapter`): the job continues it as it is."""
    try:
        check_adapter_path(path)
    except WorkbenchError as e:
        raise _fail("init_adapter", f"cannot be continued: {e}; point it at a job's `adapter/` folder") from None
    p = Path(path) / "adapter_config.json"
    try:
        cfg = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise _fail("init_adapter", f"{p}: not valid JSON ({e})") from None
    if cfg.get("peft_type") != "LORA":
        raise _fail("init_adapter", f"`{path}` is a {cfg.get('peft_type')} adapter; jobs continue LoRA adapters")
    tokens = cfg.get("trainable_token_indices") or []
    if isinstance(tokens, dict):  # peft keys the rows by embedding module when it was named
        tokens = sorted({i for ids in tokens.values() for i in ids})
    targets = cfg["target_modules"]
    return LoraSpec(r=int(cfg["r"]), alpha=int(cfg["lora_alpha"]), dropout=float(cfg.get("lora_dropout") or 0.0),
                    target_modules=sorted(targets) if isinstance(targets, list) else [targets],
                    fan_in_fan_out=bool(cfg.get("fan_in_fan_out")), trainable_token_indices=list(tokens))


def _abstention_rows(model: str, manifest: FixSetManifest, config: dict[str, Any]) -> tuple[list[int], str]:
    """The embedding rows of the abstention phrase's tokens the model never trained (`untrained_rows`), to be
    trained in full, and the decision in words.

    The phrase's tokens may never have been trained (the world's "i don't know"). Measured on the default
    world (SFT, 400 steps): rows 96.6% of targeted failures fixed, held-out absent facts 54.5% abstained,
    0.4% broken; LoRA on the input embedding instead 89.7%, 0% held-out, 0.9% broken. vLLM cannot load rows,
    only LoRA: for a vLLM-served adapter set `trainable_token_indices: []` and add the embedding (EMBEDDINGS)
    to `target_modules`. A model whose abstention tokens are trained needs neither.
    """
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    ids = abstention_token_ids(tokenizer, manifest.new_tokens, manifest.abstention_phrase,
                               field="lora.trainable_token_indices", model=model)
    fresh = untrained_rows(model, config, ids)
    if fresh is None:
        return ids, f"all {len(ids)} tokens of `{manifest.abstention_phrase}`: the embedding could not be read to check"
    names = ", ".join(f"`{tokenizer.convert_ids_to_tokens(i)}`" for i in fresh) or "none"
    return fresh, (f"{len(fresh)} of the {len(ids)} tokens of `{manifest.abstention_phrase}` look never trained "
                   f"(an embedding row still near its init): {names}")


def untrained_rows(model: str, config: dict[str, Any], ids: Sequence[int]) -> list[int] | None:
    """Of `ids`, the embedding rows that look never trained: all zero, within UNTRAINED_DISTANCE init scales
    of another row, or of a norm still near the init scale (see there). Reads only the input embedding from
    the model's safetensors; None when it has none to read (then every id stays trainable)."""
    import torch

    weights = _embedding(model, config)
    if weights is None:
        return None
    emb = weights.float()
    scale = float(config.get("initializer_range") or 0.02) * emb.shape[1] ** 0.5
    rows = [int(i) for i in ids if i < emb.shape[0]]  # ids beyond the matrix: resolve refuses them
    if not rows:
        return []
    dist = torch.cdist(emb[rows], emb)
    dist[torch.arange(len(rows)), torch.tensor(rows)] = float("inf")
    near = (dist.min(dim=1).values / scale).tolist()
    norms = (emb[rows].norm(dim=1) / scale).tolist()
    return [i for i, d, n in zip(rows, near, norms, strict=True)
            if n < 1e-6 or d <= UNTRAINED_DISTANCE or abs(n - 1) <= UNTRAINED_NORM]


def _embedding(model: str, config: dict[str, Any]) -> Any | None:
    """The input-embedding matrix from `model`'s safetensors (one file or an index of shards), or None."""
    from safetensors import safe_open

    root = Path(model)
    suffix = EMBEDDINGS.get(str(config.get("model_type", "")), "embed_tokens") + ".weight"
    index = root / "model.safetensors.index.json"
    try:
        if index.is_file():
            weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
            files = sorted({root / f for k, f in weight_map.items() if k.endswith(suffix)})
        else:
            files = sorted(root.glob("*.safetensors"))
        for f in files:
            with safe_open(str(f), "pt") as st:
                key = next((k for k in st.keys() if k.endswith(suffix)), None)  # noqa: SIM118 (not a dict)
                if key is not None:
                    return st.get_tensor(key)
    except (OSError, ValueError, KeyError):
        return None
    return None


def abstention_token_ids(tokenizer: Any, tokens: Sequence[str], phrase: str, *, field: str, model: str) -> list[int]:
    """Ids of the phrase's `tokens`; a WorkbenchError naming the phrase and the words the tokenizer cannot
    spell when any token is unknown to it."""
    ids = tokenizer.convert_tokens_to_ids(list(tokens))
    unk = tokenizer.unk_token_id
    if any(i is None or (unk is not None and i == unk) for i in ids):
        raise cannot_spell(tokenizer, phrase, field=field, model=model)
    return sorted({int(i) for i in ids})


def cannot_spell(tokenizer: Any, phrase: str, *, field: str, model: str) -> WorkbenchError:
    """The error for an abstention phrase the tokenizer cannot spell, naming the words it lacks (never the
    `[UNK]` placeholders they turn into) and what to do."""
    unk = tokenizer.unk_token_id
    words = [w for w in phrase.split() if unk in tokenizer(" " + w, add_special_tokens=False)["input_ids"]]
    missing = ", ".join(f"`{w}`" for w in words) or "some of its characters"
    fallback = ("set `grpo.abstention_guidance: 0`" if field.startswith("grpo.")
                else "set `lora.trainable_token_indices` yourself")
    return _fail(field, f"cannot be set up: the tokenizer of `{model}` cannot spell the abstention phrase "
                 f"`{phrase}` (it has no token for {missing}); add those words to the tokenizer, put a phrase it "
                 f"can spell first in the suite's `abstention_phrases` and rebuild the fix set, or {fallback}")

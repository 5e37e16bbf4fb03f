"""Memory pre-flight: will a fine-tuning job fit on N GPUs of M GiB, and if not, what to change.

Pure arithmetic over a model's shape; nothing here imports torch or touches a GPU. All sizes are
bytes *per GPU* unless a name says otherwise.

Model states follow DeepSpeed's accounting (ZeRO paper, Rajbhandari et al. 2020): mixed-precision
Adam holds 16 bytes per trainable parameter (2 weights + 2 gradients + 12 fp32 master, m, v).
Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation"), 34sbh + 5as²b
bytes per layer for a GPT layer, re-derived for a Hugging Face Llama-style layer (SwiGLU MLP, RMSNorm
computed in fp32, no dropout, GQA, optional flash attention). Every term below was checked against
the tensors autograd actually saves (see tests/test_preflight.py::test_activation_formula_matches_autograd).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from workbench.errors import WorkbenchError
from workbench.textgen import check_model_path

GiB = 1024**3
METHODS = ("full", "lora", "qlora", "dpo", "dpo-lora", "dpo-qlora")
PRECISIONS = {"bf16": 2, "fp16": 2, "fp32": 4}
#: peft's `target_modules="all-linear"` on a Llama-style layer; "attn" is the classic q/v choice.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
CUDA_CONTEXT = int(0.75 * GiB)  # CUDA context + cuBLAS workspace: not in max_memory_allocated, but real
NCCL_BUFFERS = int(0.5 * GiB)  # communicator buffers once there is more than one GPU
FRAGMENTATION = 0.05  # caching allocator: reserved exceeds allocated by a few percent in steady state
QLORA_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)  # NF4 + 8-bit absmax per 64 + fp32 scale per 256 blocks
Verdict = Literal["fits", "risk", "does_not_fit"]


@dataclass(frozen=True)
class ModelShape:
    """The few numbers of a decoder-only transformer that decide its training memory."""

    layers: int
    """Decoder layers (`num_hidden_layers`)."""
    hidden: int
    """Model width h (`hidden_size`)."""
    heads: int
    """Attention heads a (`num_attention_heads`)."""
    vocab: int
    """Vocabulary size V: the logits are s*b*V."""
    kv_heads: int = 0
    """Key/value heads for GQA (`num_key_value_heads`); 0 means equal to `heads`."""
    intermediate: int = 0
    """MLP width I (`intermediate_size`); 0 means 4*hidden."""
    swiglu: bool = True
    """Gated MLP (gate, up, down: Llama, Mistral, Qwen) rather than GeLU (up, down: GPT-2)."""
    params: int = 0
    """Total parameters; 0 means computed from the shape (untied embeddings)."""

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "vocab"):
            _check_min(name, getattr(self, name), 1)
        for name in ("kv_heads", "intermediate", "params"):
            _check_min(name, getattr(self, name), 0)
        if self.hidden % self.heads:
            raise WorkbenchError(f"`hidden` ({self.hidden}) must be a multiple of `heads` ({self.heads})")
        object.__setattr__(self, "kv_heads", self.kv_heads or self.heads)
        object.__setattr__(self, "intermediate", self.intermediate or 4 * self.hidden)
        if not self.params:
            object.__setattr__(
                self, "params", self.layer_linear_params * self.layers + 2 * self.vocab * self.hidden
            )

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * (self.hidden // self.heads)

    def module_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear module of one layer."""
        h, i, kv = self.hidden, self.intermediate, self.kv_dim
        shapes = {"q_proj": (h, h), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (h, h), "up_proj": (h, i)}
        shapes["down_proj"] = (i, h)
        if self.swiglu:
            shapes["gate_proj"] = (h, i)
        return shapes

    @property
    def layer_linear_params(self) -> int:
        return sum(a * b for a, b in self.module_shapes().values())

    @property
    def largest_module_params(self) -> int:
        """DeepSpeed's `largest_layer_params`: the biggest single module (usually the embedding)."""
        return max(self.vocab * self.hidden, *(a * b for a, b in self.module_shapes().values()))


@dataclass(frozen=True)
class PreflightSpec:
    """One training job as far as memory is concerned."""

    model: ModelShape
    """The model's shape (see `load_shape`)."""
    gpu_memory_gib: float
    """Memory of one GPU in GiB (80 for an 80 GB A100/H100)."""
    method: str = "full"
    """full | lora | qlora | dpo | dpo-lora | dpo-qlora. DPO with a full model keeps a frozen reference
    copy; DPO with an adapter uses the adapter-disabled base as its reference (no extra weights)."""
    precision: str = "bf16"
    """bf16 | fp16 (mixed precision, fp32 master weights) or fp32."""
    zero: int = 0
    """DeepSpeed ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also weights."""
    offload_optimizer: bool = False
    """Optimizer states (fp32 master, m, v) live in CPU memory (DeepSpeed ZeRO-Offload; needs zero >= 1)."""
    gradient_checkpointing: bool = False
    """Keep only each layer's input; recompute one layer at a time in the backward pass."""
    flash_attention: bool = False
    """Flash / memory-efficient SDPA: no s² attention scores are kept."""
    micro_batch: int = 1
    """Sequences per GPU per forward pass."""
    gradient_accumulation: int = 1
    """Micro batches per optimizer step; global batch = micro_batch * gradient_accumulation * gpus."""
    seq_len: int = 2048
    """Tokens per sequence (prompt + completion for DPO)."""
    gpus: int = 1
    """Data-parallel GPUs the job is spread over."""
    lora_rank: int = 16
    """LoRA rank r (LoRA methods only)."""
    lora_targets: tuple[str, ...] = LORA_TARGETS
    """Linear modules that get an adapter."""
    dropout: bool = False
    """Dropout in attention and residuals (most modern LLMs train without; adds Korthikanti's masks)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise WorkbenchError(f"`method` must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.precision not in PRECISIONS:
            raise WorkbenchError(
                f"`precision` must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.zero not in (0, 1, 2, 3):
            raise WorkbenchError(f"`zero` must be 0, 1, 2 or 3, got {self.zero}")
        for name in ("micro_batch", "gradient_accumulation", "seq_len", "gpus", "lora_rank"):
            _check_min(name, getattr(self, name), 1)
        if not self.gpu_memory_gib > 0:
            raise WorkbenchError(f"`gpu_memory_gib` must be > 0, got {self.gpu_memory_gib}")
        if self.offload_optimizer and self.zero == 0:
            raise WorkbenchError(
                "`offload_optimizer` needs `zero` >= 1 (DeepSpeed offloads ZeRO partitions), got 0"
            )
        if self.peft and self.lora_rank > self.model.hidden:
            # r x (in + out) per module: an absurd rank (1e8) would "not fit" by exabytes instead of being refused
            raise WorkbenchError(f"`lora_rank` ({self.lora_rank}) is above the model width `hidden` "
                                 f"({self.model.hidden}): a LoRA update of a width-h layer has rank <= h; use a "
                                 "smaller rank (e.g. 8-64)")
        unknown = set(self.lora_targets) - set(LORA_TARGETS)
        if unknown:
            raise WorkbenchError(
                f"`lora_targets` has unknown modules {sorted(unknown)}; known: {LORA_TARGETS}"
            )

    @property
    def peft(self) -> str:
        """'' for full fine-tuning, else 'lora' or 'qlora'."""
        return self.method.removeprefix("dpo").strip("-") if self.method != "full" else ""

    @property
    def is_dpo(self) -> bool:
        return self.method.startswith("dpo")

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.gradient_accumulation * self.gpus


@dataclass(frozen=True)
class Estimate:
    """Per-GPU memory of one training step at its peak."""

    breakdown: dict[str, int]
    """Bytes per GPU by component, overhead included; sums to `peak_bytes`."""
    allocated_bytes: int
    """What `torch.cuda.max_memory_allocated` should report: everything but framework overhead."""
    peak_bytes: int
    """Predicted peak per GPU, as `nvidia-smi` would see it."""
    capacity_bytes: int
    """One GPU's memory."""
    fits: Verdict
    """'risk' when the peak is within `risk_band_bytes` of the card: too close to promise."""
    margin_bytes: int
    """capacity - peak; negative when it does not fit."""
    risk_band_bytes: int
    """max(2 GiB, 5% of the card)."""
    cpu_offload_bytes: int = 0
    """CPU memory for offloaded optimizer states, whole job."""


@dataclass(frozen=True)
class Recommendation:
    """One more change on top of the ones before it, with the peak it predicts."""

    change: str
    """What to change, in words a practitioner would type into a config."""
    spec: PreflightSpec
    """The job with this and all earlier changes applied."""
    estimate: Estimate = field(repr=False)
    """Its estimate."""


def _check_min(name: str, value: int, low: int) -> None:
    if value < low:
        raise WorkbenchError(f"`{name}` must be >= {low}, got {value}")


def lora_params(spec: PreflightSpec) -> int:
    """Trainable LoRA parameters: r * (in + out) per targeted module per layer."""
    shapes = spec.model.module_shapes()
    per_layer = sum(spec.lora_rank * sum(shapes[t]) for t in spec.lora_targets if t in shapes)
    return per_layer * spec.model.layers


def trained_params(spec: PreflightSpec) -> int:
    return lora_params(spec) if spec.peft else spec.model.params


def activation_bytes_per_layer(spec: PreflightSpec, batch: int) -> int:
    """Bytes autograd keeps for one layer's backward (Korthikanti, re-derived for an HF Llama layer).

    sbh terms: 2 RMSNorms (fp32 input copy 4, normalized output e when the norm weight trains),
    linear inputs e*(2 sbh + sbI) when the base trains, q and attention output 2e, k and v 2e*g
    (g = kv/heads; eager attention materialises repeated K/V, so g = 1). MLP: gate, silu, up 3e*sbI.
    Attention scores without flash: fp32 softmax + its e-byte copy, (4 + e)as²b; with flash only
    the fp32 log-sum-exp, 4asb. LoRA (peft upcasts adapters to fp32): a fp32 input copy and the
    r-wide output per targeted module. Dropout adds Korthikanti's 1-byte masks.
    """
    m, s, b = spec.model, spec.seq_len, batch
    e = PRECISIONS[spec.precision]
    sbh, sbi, s2 = s * b * m.hidden, s * b * m.intermediate, m.heads * s * s * b
    base_trains = not spec.peft
    g = m.kv_heads / m.heads if spec.flash_attention else 1.0
    total = 2 * (4 + (e if base_trains else 0)) * sbh  # two RMSNorms
    total += e * (2 * sbh + sbi) if base_trains else 0  # inputs of q/k/v, gate/up, down
    total += int((2 * e + 2 * e * g) * sbh)  # q, attention output (= o_proj input); k, v
    total += (3 if m.swiglu else 1) * e * sbi  # gate, silu(gate), up | gelu input
    total += 4 * m.heads * s * b if spec.flash_attention else (4 + e) * s2
    if spec.dropout:
        total += 2 * sbh + (0 if spec.flash_attention else (1 + e) * s2)
    if spec.peft:
        shapes = m.module_shapes()
        total += sum(4 * s * b * (shapes[t][0] + spec.lora_rank) for t in spec.lora_targets if t in shapes)
    return total


def activation_bytes(spec: PreflightSpec, batch: int) -> int:
    """All layers, with or without checkpointing, plus the final norm and lm_head input."""
    m, e = spec.model, PRECISIONS[spec.precision]
    sbh = spec.seq_len * batch * m.hidden
    layer = activation_bytes_per_layer(spec, batch)
    # checkpointing: each layer's input (e*sbh, the paper's 2sbh) + one layer recomputed at a time
    layers = m.layers * e * sbh + layer if spec.gradient_checkpointing else m.layers * layer
    return layers + (4 + 2 * e) * sbh


def estimate(spec: PreflightSpec) -> Estimate:
    """Per-GPU peak of one optimizer step: model states + activations + buffers + overhead."""
    m, n, e = spec.model, spec.gpus, PRECISIONS[spec.precision]
    # ZeRO sharding: stage >= 1 optimizer, >= 2 gradients, 3 weights (frozen weights too)
    opt_div, grad_div, w_div = (
        (n if spec.zero >= 1 else 1),
        (n if spec.zero >= 2 else 1),
        (n if spec.zero == 3 else 1),
    )
    opt_per_param = 12 if e == 2 else 8  # fp32 master + m + v, or just m + v in fp32 training
    batch = spec.micro_batch * (2 if spec.is_dpo else 1)  # DPO: chosen and rejected in one pass
    bd: dict[str, int] = {}
    if spec.peft:
        linear = m.layer_linear_params * m.layers
        w_bytes = linear * QLORA_BYTES + (m.params - linear) * e if spec.peft == "qlora" else m.params * e
        trainable = lora_params(spec)
        bd["weights"] = int(w_bytes / w_div)
        bd["gradients"] = 0
        bd["optimizer states"] = 0
        # peft keeps adapters in fp32: 4 weights + 4 grads + 8 Adam, sharded like everything else
        lora_opt = 0 if spec.offload_optimizer else 8 * trainable // opt_div
        bd["LoRA parameters"] = 4 * trainable // w_div + 4 * trainable // grad_div + lora_opt
        offloaded = 8 * trainable if spec.offload_optimizer else 0
        reference = 0  # DPO with an adapter: the reference is the adapter-disabled base
    else:
        bd["weights"] = m.params * e // w_div
        # ZeRO-Offload sends the gradient partitions to the CPU with the optimizer (stage >= 2)
        bd["gradients"] = 0 if spec.offload_optimizer and spec.zero >= 2 else m.params * e // grad_div
        bd["optimizer states"] = 0 if spec.offload_optimizer else m.params * opt_per_param // opt_div
        bd["LoRA parameters"] = 0
        offloaded = m.params * opt_per_param if spec.offload_optimizer else 0
        reference = m.params * e // w_div if spec.is_dpo else 0  # a frozen full copy
    bd["DPO reference"] = reference
    bd["activations"] = activation_bytes(spec, batch)
    # logits: e-byte output + fp32 log-softmax kept for the loss, + its fp32 gradient at backward start
    buffers = spec.seq_len * batch * m.vocab * (e + 4 + 4)
    if spec.zero == 3:  # DeepSpeed's 4 * largest_layer_params: one gathered module's weights + grads
        buffers += 4 * m.largest_module_params
        if not spec.offload_optimizer:  # and its 18 (not 16) B/param: a flat gradient partition buffer
            buffers += 2 * trained_params(spec) // n
    bd["temporary buffers"] = buffers
    # Without ZeRO the optimizer step is PyTorch's AdamW and a second peak: activations and logits are freed by
    # then, but the step materialises an fp32 copy of each mixed-precision gradient and the foreach AdamW one fp32
    # temporary per trained parameter (sqrt(v)). On a GPU this phase, not the backward pass, sets the peak of a
    # full fine-tune with short sequences (bench/preflight_accuracy.py). Counted as what it adds above the backward
    # peak. DeepSpeed's fused optimizers (ZeRO >= 1) step in place; ZeRO-3's extra buffer is counted above.
    step = 0 if spec.zero else ((4 if e == 2 and not spec.peft else 0) + 4) * trained_params(spec)
    bd["optimizer step"] = max(0, step - bd["activations"] - buffers)
    allocated = sum(bd.values())
    bd["framework overhead"] = CUDA_CONTEXT + (NCCL_BUFFERS if n > 1 else 0) + int(FRAGMENTATION * allocated)
    peak = sum(bd.values())
    capacity = int(spec.gpu_memory_gib * GiB)
    band = max(2 * GiB, int(0.05 * capacity))
    verdict: Verdict = "does_not_fit" if peak > capacity else "risk" if capacity - peak < band else "fits"
    return Estimate(bd, allocated, peak, capacity, verdict, capacity - peak, band, offloaded)


def _steps(spec: PreflightSpec) -> list[tuple[str, PreflightSpec]]:
    """Candidate changes in the order a practitioner tries them, each applied on top of the last."""
    out: list[tuple[str, PreflightSpec]] = []

    def add(change: str, **kw: object) -> None:
        nonlocal spec
        spec = replace(spec, **kw)  # type: ignore[arg-type]
        out.append((change, spec))

    if spec.micro_batch > 1:
        accum = spec.gradient_accumulation * spec.micro_batch
        add(
            f"micro batch {spec.micro_batch} → 1, gradient accumulation {spec.gradient_accumulation} → "
            f"{accum} (global batch {spec.global_batch} kept)",
            micro_batch=1,
            gradient_accumulation=accum,
        )
    if not spec.gradient_checkpointing:
        add("gradient checkpointing on", gradient_checkpointing=True)
    if not spec.flash_attention:
        add("flash attention on (attn_implementation='flash_attention_2' or 'sdpa')", flash_attention=True)
    if not spec.offload_optimizer:
        zero = max(spec.zero, 1)
        add(
            "optimizer offload to CPU" + (f" (needs ZeRO-{zero})" if zero != spec.zero else ""),
            offload_optimizer=True,
            zero=zero,
        )
    if spec.zero < 3 and spec.gpus > 1:
        add(f"ZeRO-3 (shard weights over {spec.gpus} GPUs)", zero=3)
    while spec.seq_len > 256:
        add(
            f"sequence length {spec.seq_len} → {spec.seq_len // 2} (truncates or drops long examples)",
            seq_len=spec.seq_len // 2,
        )
    if spec.peft:
        while spec.lora_rank > 8:
            add(f"LoRA rank {spec.lora_rank} → {spec.lora_rank // 2}", lora_rank=spec.lora_rank // 2)
    else:
        add(
            "LoRA (rank 16, all linear layers) instead of full fine-tuning",
            method="dpo-lora" if spec.is_dpo else "lora",
            lora_rank=16,
        )
    return out


def recommend(spec: PreflightSpec) -> list[Recommendation]:
    """The smallest prefix of `_steps` that fits ('risk' is not enough); [] when it already fits.

    A step that saves under 1% of the peak is skipped: it would only lengthen the list.
    """
    current = estimate(spec)
    recs: list[Recommendation] = []
    if current.fits == "fits":
        return recs
    for change, candidate in _steps(spec):
        est = estimate(candidate)
        if est.peak_bytes > 0.99 * current.peak_bytes:
            continue
        recs.append(Recommendation(change, candidate, est))
        current = est
        if est.fits == "fits":
            break
    return recs


def require_fit(spec: PreflightSpec, *, force: bool = False) -> Estimate:
    """The check `train` runs first: raise unless it fits (a 'risk' passes with --force only)."""
    est = estimate(spec)
    if est.fits != "fits" and not force:
        word = "does not fit" if est.fits == "does_not_fit" else "is within the risk band of"
        raise WorkbenchError(
            f"the job {word} {spec.gpu_memory_gib:g} GiB per GPU (predicted peak "
            f"{est.peak_bytes / GiB:.1f} GiB); run `workbench preflight` for what to change, or pass --force"
        )
    return est


def shape_from_config(cfg: dict[str, object]) -> ModelShape:
    """A ModelShape from a transformers config dict (Llama/Mistral/Qwen/GPT-2 key names)."""

    def get(*keys: str, default: int = 0) -> int:
        for k in keys:
            value = cfg.get(k)
            if isinstance(value, int):
                return value
        return default

    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or "")
    hidden = get("hidden_size", "n_embd", "d_model")
    layers, heads = get("num_hidden_layers", "n_layer"), get("num_attention_heads", "n_head")
    if not (hidden and layers and heads and get("vocab_size")):
        raise WorkbenchError(
            "config has no hidden_size/num_hidden_layers/num_attention_heads/vocab_size; "
            "give the shape with --layers/--hidden/--heads/--vocab"
        )
    shape = ModelShape(
        layers=layers,
        hidden=hidden,
        heads=heads,
        vocab=get("vocab_size"),
        kv_heads=get("num_key_value_heads"),
        intermediate=get("intermediate_size", "n_inner"),
        swiglu=act in ("silu", "swish", "swiglu"),
    )
    if cfg.get("tie_word_embeddings", True) is not False:  # transformers' default is tied
        shape = dataclasses.replace(shape, params=shape.params - shape.vocab * shape.hidden)
    return shape


def load_shape(model: str) -> ModelShape:
    """From a local directory holding config.json, or a hub id through AutoConfig (needs network)."""
    check_model_path(model)  # a local path: a directory with config.json (workbench.textgen's one rule)
    cfg_path = Path(model).expanduser() / "config.json"
    if cfg_path.is_file():
        return shape_from_config(json.loads(cfg_path.read_text()))
    try:
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(model)
    except (OSError, ValueError) as e:
        raise WorkbenchError(
            f"cannot read the config of `{model}`: not a local directory, and the hub needs network "
            f"(HF_HUB_OFFLINE is set or it is unreachable). Give a local model directory, or the shape with "
            f"--params/--layers/--hidden/--heads/--vocab. ({type(e).__name__})"
        ) from e
    return shape_from_config(cfg.to_dict())

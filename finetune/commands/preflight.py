"""`workbench preflight`: will this fine-tuning job fit in GPU memory, and if not, what to change."""

from __future__ import annotations

import argparse
import dataclasses
import json

from finetune.preflight import (
    LORA_TARGETS,
    METHODS,
    PRECISIONS,
    Estimate,
    GiB,
    ModelShape,
    PreflightSpec,
    estimate,
    load_shape,
    recommend,
)
from workbench.errors import WorkbenchError

HELP = "memory pre-flight of a fine-tuning job: per-GPU breakdown, fits or not, and what to change"
_SHAPE_FLAGS = ("params", "layers", "hidden", "heads", "kv_heads", "vocab", "intermediate")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job", help="a job spec YAML: its model, method, batch, sequence length, LoRA, precision and "
                   "ZeRO settings, as `workbench train` checks them on a GPU (the other job flags are ignored)")
    p.add_argument("--model", help="local model directory (config.json) or hub id (needs network)")
    for name in _SHAPE_FLAGS:
        p.add_argument(
            f"--{name.replace('_', '-')}",
            type=lambda v: int(float(v)),
            dest=name,
            help=f"model {name} (overrides --model's config)",
        )
    p.add_argument(
        "--swiglu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="gated MLP (Llama-style; default when given by flags)",
    )
    p.add_argument("--method", choices=METHODS, default="full")
    p.add_argument("--precision", choices=list(PRECISIONS), default="bf16")
    p.add_argument("--zero", type=int, choices=range(4), default=0, help="DeepSpeed ZeRO stage")
    p.add_argument("--offload-optimizer", action="store_true")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--flash-attention", action="store_true")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--gradient-accumulation", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--gpu-memory", type=float, required=True, help="GiB per GPU (e.g. 40, 80)")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-targets", default=",".join(LORA_TARGETS), help="comma-separated modules")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def spec_from_args(args: argparse.Namespace) -> PreflightSpec:
    """The pre-flight of `--job` (the job -> pre-flight mapping `workbench train` uses), or of the flags."""
    if args.job:
        from finetune.job import load_spec, resolve

        return resolve(load_spec(args.job), for_gpu=True).preflight_spec(args.gpu_memory)
    given = {k: getattr(args, k) for k in _SHAPE_FLAGS if getattr(args, k) is not None}
    if args.swiglu is not None:
        given["swiglu"] = args.swiglu
    if args.model:
        shape = dataclasses.replace(load_shape(args.model), **given)
    else:
        missing = [f"--{k}" for k in ("layers", "hidden", "heads", "vocab") if k not in given]
        if missing:
            raise WorkbenchError(f"give --model, or the shape: missing {' '.join(missing)}")
        shape = ModelShape(**given)
    # flags named as the PreflightSpec fields they set
    same = ("method", "precision", "zero", "offload_optimizer", "gradient_checkpointing", "flash_attention",
            "micro_batch", "gradient_accumulation", "seq_len", "gpus", "lora_rank")
    return PreflightSpec(model=shape, gpu_memory_gib=args.gpu_memory, **{k: getattr(args, k) for k in same},
                         lora_targets=tuple(t.strip() for t in args.lora_targets.split(",") if t.strip()))


def _gib(n: int) -> float:
    return round(n / GiB, 2)


_WORDS = {"fits": "FITS", "risk": "RISK (too close to the card to promise)", "does_not_fit": "DOES NOT FIT"}


def render(spec: PreflightSpec, est: Estimate) -> str:
    on = {True: "on", False: "off"}
    lines = [
        f"{spec.model.params / 1e9:.1f}B params, {spec.method}, {spec.precision}, ZeRO-{spec.zero}"
        f"{' + optimizer offload' if spec.offload_optimizer else ''} over {spec.gpus} GPU(s) of "
        f"{spec.gpu_memory_gib:g} GiB; micro batch {spec.micro_batch} x {spec.seq_len} tokens, global batch "
        f"{spec.global_batch}; checkpointing {on[spec.gradient_checkpointing]}, "
        f"flash attention {on[spec.flash_attention]}",
        f"  {'per GPU':<22}{'GiB':>8}",
    ]
    lines += [f"  {k:<22}{v / GiB:>8.2f}" for k, v in est.breakdown.items()]
    lines.append(f"  {'peak':<22}{est.peak_bytes / GiB:>8.2f}  of {spec.gpu_memory_gib:g}")
    if est.cpu_offload_bytes:
        lines.append(f"  (CPU memory for offloaded optimizer states: {est.cpu_offload_bytes / GiB:.1f} GiB)")
    lines.append(
        f"verdict: {_WORDS[est.fits]}: margin {est.margin_bytes / GiB:+.2f} GiB "
        f"(risk band {est.risk_band_bytes / GiB:.1f} GiB)"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    est = estimate(spec)
    recs = recommend(spec)
    if args.json:
        print(
            json.dumps(
                {
                    "fits": est.fits == "fits",
                    "verdict": est.fits,
                    "peak_gib_per_gpu": _gib(est.peak_bytes),
                    "allocated_gib_per_gpu": _gib(est.allocated_bytes),
                    "margin_gib": _gib(est.margin_bytes),
                    "gpu_memory_gib": spec.gpu_memory_gib,
                    "cpu_offload_gib": _gib(est.cpu_offload_bytes),
                    "breakdown": {k: _gib(v) for k, v in est.breakdown.items()},
                    "recommendations": [
                        {
                            "change": r.change,
                            "peak_gib_per_gpu": _gib(r.estimate.peak_bytes),
                            "verdict": r.estimate.fits,
                        }
                        for r in recs
                    ],
                },
                indent=2,
            )
        )
    else:
        print(render(spec, est))
        if recs:
            ok = recs[-1].estimate.fits == "fits"
            print(
                "to make it fit, in order (each on top of the ones before):"
                if ok
                else "no listed change makes it fit; closest:"
            )
            for i, r in enumerate(recs, 1):
                print(f"  {i}. {r.change:<78} peak {r.estimate.peak_bytes / GiB:6.2f} GiB  {r.estimate.fits}")
    return 0 if est.fits == "fits" else 1

"""`workbench train JOB.yaml`: memory pre-flight, then run the job (or resume it)."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli._common import print_json

HELP = "run a LoRA SFT/DPO job from a job YAML (pre-flight first; --resume after a crash)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", help="job spec YAML")
    p.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint")
    p.add_argument("--force", action="store_true", help="skip the memory pre-flight")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    import datasets

    datasets.disable_progress_bars()  # per-map bars would bury the summary
    from finetune.launcher import launch
    from finetune.spec import load_spec, resolve_spec
    from workbench.store import Store

    spec = load_spec(args.job)
    if not args.force:
        preflight(resolve_spec(spec))
    store = Store.open(spec.workspace or args.workspace)
    result: Any = launch(spec, store=store, workspace=str(store.workspace), resume=args.resume)
    if spec.launcher.kind != "inprocess":  # a CompletedProcess: the job printed its result as JSON
        import json

        if result.returncode not in (0, 1):
            print(result.stderr, end="")
            return 2
        data = json.loads(result.stdout.strip().splitlines()[-1])
    else:
        data = result.to_dict()
    if args.json:
        print_json(data)
    else:
        print(f"job {data['job_id']}: {data['status']} after {data['steps']} steps ({data['seconds']} s): "
              f"{data['message']}")
        if data["heldout_before"] is not None or data["heldout_after"] is not None:
            print(f"  held-out accuracy {data['heldout_before']} -> {data['heldout_after']}")
        if data["adapter"]:
            print(f"  adapter: {data['adapter']}")
    return 0 if data["status"] != "failed" else 1


def preflight(spec: Any) -> None:
    """The memory pre-flight (finetune.preflight) for CUDA jobs; CPU jobs have no GPU memory to check."""
    if spec.device != "cuda":
        return
    try:
        from finetune import preflight as pf
    except ImportError:
        return
    if not all(hasattr(pf, n) for n in ("require_fit", "PreflightSpec", "load_shape")):
        return
    import torch

    gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    method = ("dpo-lora" if spec.method == "dpo" else "lora")
    pf.require_fit(pf.PreflightSpec(
        model=pf.load_shape(spec.base_model), gpu_memory_gib=gib, method=method,
        precision="bf16" if spec.bf16 else "fp32", zero=spec.launcher.deepspeed_zero,
        offload_optimizer=spec.launcher.offload_optimizer,
        gradient_checkpointing=bool(spec.gradient_checkpointing), micro_batch=spec.trainer.per_device_batch_size,
        gradient_accumulation=spec.trainer.gradient_accumulation, seq_len=spec.trainer.max_length,
        gpus=spec.launcher.num_processes, lora_rank=spec.lora.r,
        lora_targets=tuple(spec.lora.target_modules or ())))

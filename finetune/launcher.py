"""Launch a job: in-process (default on CPU), as a subprocess, or under `accelerate launch`.

- inprocess: `run_job` in this interpreter.
- subprocess: `python -m finetune.jobs JOB.yaml` (an argument list, never a shell); the app and
  the kill tests use it, and a crash there cannot take the caller down.
- accelerate: `accelerate launch --num_processes N [--config_file accelerate.yaml] -m finetune.jobs
  JOB.yaml`, with a generated DeepSpeed ZeRO-2/3 JSON (optimizer / parameter offload) when
  `launcher.deepspeed_zero` is 2 or 3. Needs CUDA GPUs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from finetune.spec import JobSpec, save_spec, with_absolute_paths
from workbench.errors import WorkbenchError

DEEPSPEED_JSON = "deepspeed.json"
ACCELERATE_YAML = "accelerate.yaml"


def deepspeed_config(spec: JobSpec) -> dict[str, Any]:
    """DeepSpeed config for `launcher.deepspeed_zero` 2 or 3. Batch sizes, accumulation, clipping and
    precision are "auto": the HF Trainer fills them from the job's trainer settings, so they cannot disagree."""
    la = spec.launcher
    if la.deepspeed_zero not in (2, 3):
        raise WorkbenchError(f"launcher.deepspeed_zero is {la.deepspeed_zero}: a DeepSpeed config needs 2 or 3")
    zero: dict[str, Any] = {
        "stage": la.deepspeed_zero,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": "auto",
    }
    if la.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if la.deepspeed_zero == 2:
        zero.update(allgather_partitions=True, allgather_bucket_size=2e8, reduce_scatter=True)
    else:
        zero.update(stage3_prefetch_bucket_size="auto", stage3_param_persistence_threshold="auto",
                    stage3_max_live_parameters=1e9, stage3_max_reuse_distance=1e9,
                    stage3_gather_16bit_weights_on_model_save=True)
        if la.offload_params:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {
        "zero_optimization": zero,
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "steps_per_print": 1_000_000,
        "wall_clock_breakdown": False,
    }


def accelerate_config(spec: JobSpec, deepspeed_json: Path | None) -> dict[str, Any]:
    """accelerate's config file: multi-GPU, or DeepSpeed pointing at the generated JSON."""
    la = spec.launcher
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "num_machines": 1,
        "machine_rank": 0,
        "num_processes": la.num_processes,
        "mixed_precision": la.mixed_precision,
        "use_cpu": False,
        "rdzv_backend": "static",
        "same_network": True,
        "main_training_function": "main",
    }
    if deepspeed_json is not None:
        cfg["distributed_type"] = "DEEPSPEED"
        cfg["deepspeed_config"] = {"deepspeed_config_file": str(deepspeed_json), "zero3_init_flag":
                                   spec.launcher.deepspeed_zero == 3}
    else:
        cfg["distributed_type"] = "MULTI_GPU" if la.num_processes > 1 else "NO"
    return cfg


def job_command(job_yaml: str | Path, *, resume: bool = False, workspace: str | None = None,
                python: str | None = None, threads: int = 0) -> list[str]:
    """`python -m finetune.jobs JOB.yaml ...` as an argument list."""
    cmd = [python or sys.executable, "-m", "finetune.jobs", str(job_yaml)]
    if resume:
        cmd.append("--resume")
    if workspace:
        cmd += ["--workspace", str(workspace)]
    if threads:
        cmd += ["--threads", str(threads)]
    return cmd


def accelerate_command(spec: JobSpec, job_yaml: str | Path, *, resume: bool = False,
                       workspace: str | None = None) -> list[str]:
    """Write the accelerate (and DeepSpeed) config beside the job and return the launch command."""
    out = Path(spec.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    ds_path = None
    if spec.launcher.deepspeed_zero:
        ds_path = out / DEEPSPEED_JSON
        ds_path.write_text(json.dumps(deepspeed_config(spec), indent=2) + "\n")
    cfg_path = out / ACCELERATE_YAML
    cfg_path.write_text(yaml.safe_dump(accelerate_config(spec, ds_path), sort_keys=False))
    cmd = ["accelerate", "launch", "--num_processes", str(spec.launcher.num_processes),
           "--config_file", str(cfg_path), "-m", "finetune.jobs", str(job_yaml)]
    if resume:
        cmd.append("--resume")
    if workspace:
        cmd += ["--workspace", str(workspace)]
    return cmd


def launch(spec: JobSpec, *, store: Any = None, workspace: str | None = None, resume: bool = False,
           env: dict[str, str] | None = None) -> Any:
    """Run the job with its launcher. In-process returns the JobResult; subprocess and accelerate return
    the finished `subprocess.CompletedProcess` (the job's JSON result is its last stdout line)."""
    spec = with_absolute_paths(spec)
    kind = spec.launcher.kind
    if kind == "inprocess":
        from finetune.jobs import run_job

        return run_job(spec, store, resume=resume)
    job_yaml = save_spec(spec, Path(spec.output_dir) / "launch.yaml")
    if kind == "subprocess":
        cmd = job_command(job_yaml, resume=resume, workspace=workspace)
    else:
        import torch

        if not torch.cuda.is_available():
            raise WorkbenchError("launcher.kind accelerate needs CUDA GPUs; none is visible here "
                                 "(use launcher.kind: inprocess or subprocess)")
        cmd = accelerate_command(spec, job_yaml, resume=resume, workspace=workspace)
    return run_command(cmd, env=env)


def run_command(cmd: Sequence[str], *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(list(cmd), env=full_env, capture_output=True, text=True, check=False)

"""Launch a resolved job: in-process (default on CPU), as a subprocess, or under `accelerate launch`.

- inprocess: `run_job` in this interpreter.
- subprocess: `python -m finetune.job OUT/job.yaml` (an argument list, never a shell; the job process,
  finetune/job/__main__.py); the app uses it too, and a crash there cannot take the caller down.
- accelerate: `accelerate launch --num_processes N [--config_file accelerate.yaml] -m finetune.job
  OUT/job.yaml`, with a generated DeepSpeed ZeRO-2/3 JSON (optimizer / parameter offload) when
  `launcher.deepspeed_zero` is 2 or 3. Needs CUDA GPUs.

Every kind returns the JobResult: the child processes write it as `OUT/result.json`, their output goes to
`OUT/job.log`. The child reads the job.yaml the parent resolved and saved, so nothing is decided twice.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from finetune.job.resolve import ResolvedJob, StagedJob
from finetune.job.result import RESULT_FILE, JobResult, read_result
from finetune.job.run import JOB_FILE, refuse_existing
from finetune.job.spec import JobSpec, save_spec
from finetune.job.staged import run_job
from workbench import procstat
from workbench.errors import WorkbenchError
from workbench.store import Store

log = logging.getLogger(__name__)

DEEPSPEED_JSON = "deepspeed.json"
ACCELERATE_YAML = "accelerate.yaml"
LOG_FILE = "job.log"
#: The job process the launchers start (finetune/job/__main__.py).
JOB_MODULE = "finetune.job"


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
    """`python -m finetune.job JOB.yaml ...` as an argument list."""
    return [python or sys.executable, "-m", JOB_MODULE, *job_arguments(job_yaml, resume=resume, workspace=workspace,
                                                                      threads=threads)]


def job_arguments(job_yaml: str | Path, *, resume: bool = False, workspace: str | None = None,
                  threads: int = 0) -> list[str]:
    """The job process's arguments (finetune/job/__main__.py), after the module."""
    args = [str(job_yaml)]
    if resume:
        args.append("--resume")
    if workspace:
        args += ["--workspace", str(workspace)]
    if threads:
        args += ["--threads", str(threads)]
    return args


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
    return ["accelerate", "launch", "--num_processes", str(spec.launcher.num_processes), "--config_file",
            str(cfg_path), "-m", JOB_MODULE, *job_arguments(job_yaml, resume=resume, workspace=workspace)]


def launch(job: ResolvedJob | StagedJob, store: Store | None = None, *, resume: bool = False,
           env: dict[str, str] | None = None, progress: Callable[[str], None] | None = None) -> JobResult:
    """Run the job with its launcher and return its JobResult (the store records it either way). `progress`
    gets the progress lines of an in-process job (run_job); a job process writes its own to OUT/job.log."""
    kind = job.spec.launcher.kind
    if kind == "inprocess":
        return run_job(job, store, resume=resume, progress=progress)
    out = job.output_dir
    if not resume:
        refuse_existing(out)  # before job.yaml is replaced
    job_yaml = save_spec(job.spec, out / JOB_FILE)
    (out / RESULT_FILE).unlink(missing_ok=True)  # a stale result must never be read as this run's
    workspace = str(store.workspace) if store is not None else job.spec.workspace
    cmd = (job_command(job_yaml, resume=resume, workspace=workspace) if kind == "subprocess"
           else accelerate_command(job.spec, job_yaml, resume=resume, workspace=workspace))
    log.debug("job process: %s (its output goes to %s)", " ".join(cmd), out / LOG_FILE)
    with (out / LOG_FILE).open("ab") as job_log:
        # owner_env: the job process ends when this one dies, however it dies (workbench.procstat.end_with_owner)
        proc = subprocess.run(cmd, env={**os.environ, **procstat.owner_env(), **(env or {})}, stdout=job_log,
                              stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, check=False)
    result = read_result(out)
    if result is None:
        tail = (out / LOG_FILE).read_text(errors="replace")[-2000:].strip()
        raise WorkbenchError(f"the job process exited with code {proc.returncode} without a result; "
                             f"{out / LOG_FILE} ends with:\n{tail}")
    return result

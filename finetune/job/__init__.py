"""Training jobs, read in one pass. A job spec goes, in order, through:

    spec.py      the YAML a user writes, validated (pydantic: bounds, closed choices, "Did you mean")
    resolve.py   one ResolvedJob: every "auto" decided once, the fix set and model checked; the memory
                 pre-flight of the job (`check_fits`, `ResolvedJob.preflight_spec`)
    defaults.py  the table of job defaults by (model size class, method) resolve.py reads, each value with
                 its reason and benchmark (`workbench train --explain JOB.yaml` prints a job's row)
    launcher.py  in-process, subprocess (`python -m finetune.job`, worker.py) or `accelerate launch`
    run.py       the one run skeleton: model, adapter, store records, watchdogs, checkpoints, adapter,
                 result (result.py, also written as OUT/result.json)
    method.py    the contract each method fills: methods/sft.py, methods/dpo.py, methods/grpo.py
    staged.py    a staged job: several methods one after the other on one adapter, each stage a job of run.py
    checkpoint.py, callbacks.py atomic checkpoints; NaN/spike watchdogs and early stopping
    progress.py  the progress line (step, loss, ETA) a command prints while a job trains

`workbench train JOB.yaml` (finetune/commands/train.py) is the way in; docs/architecture.md draws the path.
Importing this package is light (no torch, transformers or trl): they load when a job runs.
"""

from finetune.job.launcher import launch
from finetune.job.resolve import ResolvedJob, StagedJob, check_fits, resolve, resolve_job
from finetune.job.result import JobResult, read_result
from finetune.job.spec import (
    METHODS,
    EarlyStopSpec,
    GRPOSpec,
    JobSpec,
    LauncherSpec,
    LoraSpec,
    TrainerSpec,
    WatchdogSpec,
    from_dict,
    load_spec,
    save_spec,
)
from finetune.job.staged import run_job

__all__ = [
    "METHODS",
    "EarlyStopSpec",
    "GRPOSpec",
    "JobResult",
    "JobSpec",
    "LauncherSpec",
    "LoraSpec",
    "ResolvedJob",
    "StagedJob",
    "TrainerSpec",
    "WatchdogSpec",
    "check_fits",
    "from_dict",
    "launch",
    "load_spec",
    "read_result",
    "resolve",
    "resolve_job",
    "run_job",
    "save_spec",
]

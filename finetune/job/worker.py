"""The job process the launchers start (`finetune/job/__main__.py` runs `main`):
`python -m finetune.job OUT/job.yaml [--resume] [--workspace DIR] [--threads N]` (also under
`accelerate launch -m finetune.job`, and the app's Launch button).

Not a user command: users run `workbench train JOB.yaml`, which resolves the job and, for the subprocess
and accelerate launchers, starts this on the saved `OUT/job.yaml`. The JobResult goes to `OUT/result.json`
(exit code 0; 1 when the job failed, 2 on bad input with the message on stderr).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workbench import procstat
from workbench.errors import WorkbenchError
from workbench.logconfig import resolve_level, setup_logging


def main(argv: Sequence[str] | None = None, *, callbacks: Sequence[Any] = (),
         before_commit: Callable[[int, Path], None] | None = None) -> int:
    """Run one job file; `callbacks` and `before_commit` go to `run_job` (tools and tests wrap this)."""
    p = argparse.ArgumentParser(prog="python -m finetune.job", description="Run one saved job (the launchers' "
                                "job process; users run `workbench train`).")
    p.add_argument("job", help="job YAML (the resolved OUT/job.yaml)")
    p.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint")
    p.add_argument("--workspace", help="workspace whose store records the job (default: the spec's)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args(argv)
    try:  # the job process is an entry point of its own: the level `workbench` passed on, the known noise dropped
        setup_logging(resolve_level())  # before trl is imported
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    procstat.end_with_owner()  # started by `workbench train`: a killed command must not leave the job training
    from finetune.job.spec import load_spec
    from finetune.job.staged import run_job
    from workbench.store import Store

    try:
        if a.threads:
            import torch

            torch.set_num_threads(a.threads)
        spec = load_spec(a.job)
        workspace = a.workspace or spec.workspace
        result = run_job(spec, Store.open(workspace) if workspace else None, resume=a.resume, callbacks=callbacks,
                         before_commit=before_commit, progress=functools.partial(print, flush=True))
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"job {result.job_id}: {result.status} after {result.steps} steps: {result.message}")
    return 0 if result.status != "failed" else 1

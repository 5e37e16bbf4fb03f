"""Test-only job process: finetune's job process (finetune/job/worker.py) with slow steps and a stalled
checkpoint save injected, so a test can SIGKILL a job mid-training or mid-save.

    python tests/jobworker.py JOB.yaml [--step-delay SECONDS] [--stall-save STEP:SECONDS] [worker args...]

While a save stalls, a file `SAVING` in the checkpoints' staging directory says so.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from finetune.job.worker import main


class SlowSteps(TrainerCallback):  # type: ignore[misc]
    """Sleeps after every step, so a kill lands between checkpoints."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        time.sleep(self.seconds)


def stall_save(at_step: int, seconds: float) -> Any:
    """A `before_commit` hook: the save at `at_step` sleeps after its files are written, before the rename."""
    def hook(step: int, staging: Path) -> None:
        if step == at_step:
            (staging / "SAVING").write_text(f"checkpoint-{step}")
            time.sleep(seconds)

    return hook


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--step-delay", type=float, default=0.0)
    p.add_argument("--stall-save", default="")
    ours, rest = p.parse_known_args()
    at, _, secs = ours.stall_save.partition(":")
    sys.exit(main(rest, callbacks=[SlowSteps(ours.step_delay)] if ours.step_delay else [],
                  before_commit=stall_save(int(at), float(secs)) if ours.stall_save else None))

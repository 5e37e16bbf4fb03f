"""A progress line while a job trains: `sft: step 120/800, loss 0.4312, 1 min 05 s elapsed, ETA 6 min 08 s`.

A real-model job trains for tens of minutes; the trainer's own bars are off (they would bury the summary), so
without this nothing is printed until the job ends. The line comes by the clock, not by steps (a step takes 10 ms
on the test world and 15 s on a real model): at most one every `PROGRESS_EVERY_S` seconds, after a step ends.
`$WORKBENCH_PROGRESS_EVERY` (seconds, read in workbench/cli/_cadence.py, which also paces an evaluation's lines off a
terminal) changes the interval, for a demo or a test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from workbench.cli import duration, progress_every


class TrainingProgress(TrainerCallback):
    """Writes a progress line through `write` (the command's print) when `every` seconds have passed since the
    last one: the step of the total, the latest logged loss, the time since training began and the time left at
    the pace of the steps this process ran (a resumed job counts from its checkpoint's step)."""

    def __init__(self, write: Callable[[str], None], *, label: str, every: float | None = None) -> None:
        self.write, self.label = write, label
        self.every = progress_every() if every is None else every
        self.t0 = self.last = time.monotonic()
        self.first_step = 0
        self.loss: float | None = None

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        self.t0 = self.last = time.monotonic()
        self.first_step = state.global_step

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        # A step the trainer logs is reported from on_log, which comes right after with that step's loss.
        if state.global_step % max(1, int(args.logging_steps)):
            self._maybe_write(state)

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs and isinstance(logs.get("loss"), int | float):
            self.loss = float(logs["loss"])
            self._maybe_write(state)

    def _maybe_write(self, state: TrainerState) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self.write(self.line(state.global_step, state.max_steps, now - self.t0))

    def line(self, step: int, total: int, elapsed: float) -> str:
        done = step - self.first_step
        eta = duration(elapsed / done * max(0, total - step)) if done > 0 else "unknown"
        loss = f"{self.loss:.4g}" if self.loss is not None else "-"
        return f"{self.label}: step {step}/{total}, loss {loss}, {duration(elapsed)} elapsed, ETA {eta}"

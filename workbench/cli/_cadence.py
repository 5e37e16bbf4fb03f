"""How often a long step prints its progress line where no terminal shows a bar (a log file, CI, cron): a training
job's line (finetune/job/progress.py) and an evaluation's or a guard build's (`progress_bar` in _common.py), at most
one every `$WORKBENCH_PROGRESS_EVERY` seconds. Light (no torch), so that `workbench train` and `fix --train` refuse a
malformed value at once, before a model loads."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from workbench.errors import WorkbenchError

#: Seconds between two progress lines at most a step's time more (a line is printed when a step ends).
PROGRESS_EVERY_S = 30.0
PROGRESS_ENV = "WORKBENCH_PROGRESS_EVERY"


def progress_every() -> float:
    """`$WORKBENCH_PROGRESS_EVERY` seconds (0 or more), else PROGRESS_EVERY_S; anything else is refused."""
    raw = os.environ.get(PROGRESS_ENV)
    if raw is None or not raw.strip():
        return PROGRESS_EVERY_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise WorkbenchError(f"${PROGRESS_ENV} must be a number of seconds >= 0, got `{raw}`")
    return seconds


def duration(seconds: float) -> str:
    """`45 s`, `6 min 08 s`, `1 h 02 min`."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class ProgressLines:
    """`update(done, total)` as lines: "LABEL: pass N, DONE of TOTAL (P%), ELAPSED elapsed, ETA T", at most one
    every `every` seconds (the first after `every` seconds, so a short step prints nothing) and one when a pass
    ends. A new pass starts when `total` changes or `done` goes back (a guard build asks several questions in
    turn: each pass has its own count). The ETA is paced by what the pass did after its first count, not by that
    count (an evaluation's first count includes the answers it found cached)."""

    def __init__(self, label: str, write: Callable[[str], None], every: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.write, self.clock = label, write, clock
        self.every = progress_every() if every is None else every
        self.start = self.last = clock()
        self.passes, self.total, self.done = 0, -1, 0
        self.first: tuple[int, float] | None = None  # this pass's first count and when it came
        self.ended = False  # this pass's last line written

    def __call__(self, done: int, total: int) -> None:
        if done < 0:
            return
        now = self.clock()
        if total != self.total or done < self.done:  # a new pass
            self.passes, self.total = self.passes + 1, total
            self.first, self.ended = None, False
        self.done = done
        if done == 0:  # a pass about to start: nothing to say yet
            return
        if self.first is None:
            self.first = (done, now)
        finished = total > 0 and done >= total
        if self.ended or (now - self.last < self.every and not (finished and now - self.start >= self.every)):
            return
        self.last, self.ended = now, finished
        made, since = done - self.first[0], now - self.first[1]
        count = f"{done} of {total} ({100 * done / total:.0f}%)" if total > 0 else f"{done} done"
        eta = f", ETA {duration(since * (total - done) / made)}" if made > 0 and done < total else ""
        pass_ = f"pass {self.passes}, " if self.passes > 1 else ""
        self.write(f"{self.label}: {pass_}{count}, {duration(now - self.start)} elapsed{eta}")

"""How often a training job prints its progress line (finetune/job/progress.py): `$WORKBENCH_PROGRESS_EVERY`
seconds. Apart from the line itself, which needs transformers, so that `workbench train` and `fix --train` refuse a
malformed value at once, before a model loads."""

from __future__ import annotations

import math
import os

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

"""Known third-party noise, filtered at the entry points (`workbench`, `python app.py`, the job process).

Each entry is one message a dependency prints on every run that tells the user nothing they can act on, named with
why it is safe to drop. A filter matches the message *and* the module (or logger) it comes from, so the project's
own warnings, and any other warning of these packages, still show. Add an entry only for a message seen flooding a
normal run, with that run named in its `why`.
"""

from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Noise:
    """One known message: `message` (a regex matched at its start) from `source` (a regex of the module a warning
    is attributed to, or the exact logger name of a log record), and why it is dropped."""

    message: str
    source: str
    why: str
    logged: bool = False  # a `logging` record (vLLM's own logger), not a `warnings.warn`


KNOWN_NOISE: tuple[Noise, ...] = (
    Noise(r"TRL currently supports vLLM versions", r"trl(\.|$)",
          "TRL checks vLLM's version at each of its call sites, so every GRPO job (and `make demo`) printed it five "
          "times; it says that the vLLM this project pins (0.32, pyproject.toml) is newer than TRL 1.16's tested "
          "range, which only changing the pin would answer; on CPU GRPO generates with the model itself and never "
          "uses TRL's vLLM path"),
    Noise(r"Triton is installed, but doesn't include CPU backend", "vllm.triton_utils.importing",
          "vLLM's CPU build says so on every import (a GRPO job imports it through TRL); it runs without Triton, "
          "as intended on CPU", logged=True),
    Noise(r"'future\.no_silent_downcasting' is deprecated|The copy keyword is deprecated", r"gradio\.queueing",
          "gradio's queue calls pandas 3 with deprecated options for its ETA statistics: two warnings in the app's "
          "terminal at its first event, about gradio's code, not ours"),
)


class _DropLogged(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def quiet_known_noise() -> None:
    """Install the filters of KNOWN_NOISE (again is harmless: `warnings` keeps one copy of a filter, a logger one
    of ours). Call it first thing in an entry point, before the noisy packages are imported."""
    for n in KNOWN_NOISE:
        if not n.logged:
            warnings.filterwarnings("ignore", message=n.message, category=Warning, module=n.source)
            continue
        logger = logging.getLogger(n.source)  # the same object the package gets when it is imported later
        if not any(isinstance(f, _DropLogged) and f.pattern.pattern == n.message for f in logger.filters):
            logger.addFilter(_DropLogged(n.message))

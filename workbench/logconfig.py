"""How much the project's own loggers say, set once per entry point (`workbench`, the job process).

Library modules log through `log = logging.getLogger(__name__)`: progress detail at INFO and DEBUG, things a user
should act on at WARNING. What a command is asked for (tables, verdicts, paths, JSON) stays on stdout, never here.

The level comes from `--verbose` / `--quiet` (the `workbench` command's flags), else from WORKBENCH_LOG_LEVEL, else
INFO. It applies to the project's loggers only: third-party packages keep WARNING, so `--verbose` shows our detail
without the INFO chatter of httpx, datasets or gradio (their known noise is dropped by `workbench.quiet`). The
chosen level is written back to the environment, so a job process or a reaper started by the command says as much.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

from workbench.errors import WorkbenchError
from workbench.quiet import quiet_known_noise

LEVEL_ENV = "WORKBENCH_LOG_LEVEL"
LEVELS: dict[str, int] = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING,
                          "ERROR": logging.ERROR}
DEFAULT_LEVEL = logging.INFO
#: The top-level packages whose loggers the level applies to (every `__name__` of the project starts with one).
PROJECT_LOGGERS = ("workbench", "finetune", "hallucination_workbench", "evals", "app", "apptabs")


def level_from_env(environ: dict[str, str] | None = None) -> int | None:
    """The level WORKBENCH_LOG_LEVEL names (any case); None when unset or empty. An unknown name is an error
    naming the variable, never a silent default."""
    raw = (os.environ if environ is None else environ).get(LEVEL_ENV, "").strip()
    if not raw:
        return None
    level = LEVELS.get(raw.upper())
    if level is None:
        raise WorkbenchError(f"{LEVEL_ENV}={raw!r} is not a log level: use one of {', '.join(LEVELS)}")
    return level


def resolve_level(*, verbose: bool = False, quiet: bool = False, environ: dict[str, str] | None = None) -> int:
    """The level a command runs at: a flag wins over the environment, which wins over INFO. The environment is
    checked even when a flag wins, so a typo in it is reported rather than left for a child process to trip on."""
    from_env = level_from_env(environ)
    if verbose:
        return logging.DEBUG
    if quiet:
        return logging.WARNING
    return DEFAULT_LEVEL if from_env is None else from_env


def setup_logging(level: int = DEFAULT_LEVEL, *, export: bool = False) -> None:
    """Install the handler (once; again replaces it) and the level, and drop the known third-party noise. Rich's
    handler on a terminal; a plain one otherwise, whose lines read as the project's messages always did
    (`warning: ...`), because rich wraps long lines at 80 columns when stderr is a pipe and scripts read them.
    With `export` (the program itself, not a caller's in-process `main([...])`), the level goes to the
    environment for the processes the command starts."""
    quiet_known_noise()
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(old)
    handler = _rich_handler(show_path=level <= logging.DEBUG) if _is_terminal(sys.stderr) else None
    handler = handler or _PlainStderr()
    setattr(handler, _OURS, True)
    root.addHandler(handler)
    for name in PROJECT_LOGGERS:
        logging.getLogger(name).setLevel(level)
    # Third-party loggers inherit the root's level: warnings and errors, never their INFO detail.
    root.setLevel(max(logging.WARNING, level))
    if export:
        os.environ[LEVEL_ENV] = logging.getLevelName(level)


_OURS = "_workbench_handler"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _rich_handler(*, show_path: bool) -> logging.Handler | None:
    try:
        from rich.console import Console
        from rich.logging import RichHandler
    except ImportError:  # rich is a dependency; a trimmed install still logs, plainly
        return None
    # Console(stderr=True) looks sys.stderr up at each write, as _PlainStderr does. The source file and line
    # only under --verbose, where the question is which module said it.
    return RichHandler(console=Console(stderr=True), show_time=False, show_path=show_path, markup=False,
                       rich_tracebacks=False)


class _PlainStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Plain lines on the current sys.stderr (looked up at each record, so a test's captured stderr, or a
    stderr replaced after set-up, gets them)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(_PlainFormatter())

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:  # StreamHandler.__init__ assigns it; the property ignores that
        pass


class _PlainFormatter(logging.Formatter):
    """INFO as the bare message (the progress lines the commands always printed); other levels prefixed as the
    CLI's own `error: ...` lines are; DEBUG also names its logger, as that is what a user turns up or down."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message = f"{message}\n{self.formatException(record.exc_info)}"
        if record.levelno == logging.INFO:
            return message
        if record.levelno <= logging.DEBUG:
            return f"debug: {record.name}: {message}"
        return f"{record.levelname.lower()}: {message}"

"""Standard output that fails the way Unix tools do.

`workbench runs --json | head -c 10` closes the pipe while the command still writes: a Unix tool ends
quietly then (killed by SIGPIPE, status 141), and so does a command here, with no traceback and no "Exception
ignored" from the interpreter's last flush. `> /dev/full` (or any failing write) is a clean `error:` line and
exit 2. `guard_stdout` wraps `sys.stdout` so its write errors arrive as these two exceptions, which the
dispatcher turns into exit codes; `silence_stdout` points the descriptor at /dev/null so nothing later
(atexit, the final flush) writes to the dead stream again.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, TextIO

from workbench.errors import WorkbenchError

#: The status of a process killed by SIGPIPE, as a shell reports it (128 + 13).
CLOSED_PIPE_EXIT = 141


class StdoutClosed(Exception):
    """The reader of standard output went away (EPIPE)."""


class StdoutFailed(WorkbenchError):
    """Standard output could not be written (a full disk, /dev/full, an I/O error)."""


class _Guarded:
    """`stream` whose write/flush errors are StdoutClosed / StdoutFailed; everything else passes through."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            raise _translated(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise _translated(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _translated(e: OSError) -> Exception:
    if e.errno == errno.EPIPE:
        return StdoutClosed()
    return StdoutFailed(f"cannot write to standard output: {e.strerror or e}")


def guard_stdout() -> None:
    """Wrap `sys.stdout` (once)."""
    if not isinstance(sys.stdout, _Guarded) and sys.stdout is not None:
        sys.stdout = _Guarded(sys.stdout)


def silence_stdout() -> None:
    """Standard output to /dev/null from now on, its unwritten buffer dropped (the reader is gone)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass

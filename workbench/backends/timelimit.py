"""Waiting on a backend with a time limit: the stall watchdog of every backend.

`generate` of one batch runs in a daemon thread while the caller waits at most a given time. A call that
does not return in time raises `BackendStalled`; its thread cannot be stopped and is abandoned (a daemon
thread never holds the interpreter at exit), and the caller closes the backend, which ends its engine or
its connections. Ctrl-C still reaches the waiting caller.

Start-up is different: until it returns there is no engine to close. A vLLM engine abandoned half-built
in a thread kept its EngineCore process, and the interpreter then waited for it at exit, forever (seen
here). So `start_within` runs it in the main thread under a SIGALRM timer: the alarm raises inside the
start-up, whose own error handling then tears the half-built engine down.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TypeVar

from workbench.errors import WorkbenchError

#: The name of the thread a backend call runs in (the CLI looks for one still running when it exits).
CALL_THREAD = "workbench-backend-call"

T = TypeVar("T")

# One batch may legitimately take long: the slowest measured here is the real SmolLM2-135M on the hf
# backend on 2 cores, 312 s for 100 questions x (greedy + 5 samples), 32 tokens (measured), i.e.
# about 100 s per batch of 64 prompts (32 greedy + 32 x 5 samples), and a loaded machine is 4-10x
# slower; an openai request may retry for about 8 minutes (6 attempts of 60 s plus backoff). 20 minutes
# without one finished batch is past all of these, yet stops a hung CI job well within its 90 minutes.
STALL_TIMEOUT = 1200.0
# Start-up apart: a vLLM engine takes 18-100 s here for the world model (spawned processes, profiling),
# a large model minutes more to read its weights (100 GB at 100 MB/s: 17 min) and capture CUDA graphs.
START_TIMEOUT = 1800.0


class BackendStalled(WorkbenchError):
    """A backend call did not return within its allowance. `what` says what was waited for and `seconds`
    how long; `option` names the setting that changes the allowance."""

    def __init__(self, what: str, seconds: float, option: str, message: str | None = None) -> None:
        self.what, self.seconds, self.option = what, seconds, option
        super().__init__(message or f"stalled: waited {seconds:g} s for {what}; raise {option} if it is only slow")


def call_within(seconds: float, fn: Callable[[], T], *, what: str, option: str) -> T:
    """`fn()`'s result (or its exception, re-raised here), or BackendStalled after `seconds`."""
    result: list[T] = []
    error: list[BaseException] = []
    finished = threading.Event()

    def work() -> None:
        try:
            result.append(fn())
        except BaseException as e:  # handed to the waiting caller, never printed by the thread
            error.append(e)
        finally:
            finished.set()

    threading.Thread(target=work, daemon=True, name=CALL_THREAD).start()
    if not finished.wait(seconds):
        raise BackendStalled(what, seconds, option)
    if error:
        raise error[0]
    return result[0]


class _StartTimedOut(BaseException):
    """Raised by the alarm inside a start-up; a BaseException so no `except Exception` in it swallows it."""


def start_within(seconds: float, fn: Callable[[], None], *, what: str, option: str) -> None:
    """`fn()` in this thread, or BackendStalled after `seconds` (see the module docstring). Off the main
    thread (no signals there) it falls back to `call_within`."""
    if threading.current_thread() is not threading.main_thread():
        call_within(seconds, fn, what=what, option=option)
        return
    armed = True

    def alarm(signum: int, frame: object) -> None:
        if armed:
            raise _StartTimedOut()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        fn()
        armed = False
    except _StartTimedOut:
        raise BackendStalled(what, seconds, option) from None
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

"""Blocks that Ctrl-C and SIGTERM do not cut in half: the signal is held and raised when the block ends.

Why the store needs it: an interrupt raised inside SQLAlchemy, between a write and its commit, leaves that
connection's transaction open, and the connection stays alive as long as the interrupt's traceback does. The
code that handles the interrupt (a run marked interrupted) then waits on that transaction's lock: out the SQLite
busy timeout (30 s) and fails, or on PostgreSQL forever. Measured: raising KeyboardInterrupt at random moments
of a batch's three writes left the database locked within 48-144 tries; SIGTERM during `workbench eval` then
outlived the command's own 20 s to unwind.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

_HELD = (signal.SIGINT, signal.SIGTERM)
_open = False  # a block is open in the main thread: a nested one holds nothing more


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM held; after it, the handler that was in place before handles what
    arrived (raising KeyboardInterrupt, or the CLI's `Terminated`): SIGTERM first when both did, for its exit code.

    A second signal of a kind already held is not held: Ctrl-C twice still gets out of a write that hangs (a lock
    that is never released). Only signals with a Python handler are held (one left at the system default ends the
    process, and SQLite rolls the open transaction back). Off the main thread nothing is held: Python runs signal
    handlers in the main thread only, so a block in another thread is never interrupted by one."""
    global _open
    if _open or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Callable[[int, FrameType | None], object]] = {
        s: h for s in _HELD if callable(h := signal.getsignal(s))}
    received: dict[int, FrameType | None] = {}
    holding = True

    def hold(signum: int, frame: FrameType | None) -> None:
        if holding and signum not in received:
            received[signum] = frame
        else:  # a repeat, or the block has ended while the handlers are put back: handle it now
            previous[signum](signum, frame)

    # A signal can arrive between any two statements below: none may leave `_open` set or a handler that swallows
    # signals (a `hold` left behind by a signal raised during the restore passes every signal on).
    try:
        _open = True
        for s in previous:
            signal.signal(s, hold)
        yield
    finally:
        _open = False
        holding = False
        for s, handler in previous.items():
            signal.signal(s, handler)
        if received:
            signum = signal.SIGTERM if signal.SIGTERM in received else signal.SIGINT
            previous[signum](signum, received[signum])

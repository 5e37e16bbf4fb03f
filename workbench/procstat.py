"""Process and memory facts through psutil (Linux, macOS, the BSDs): one reader for liveness (is a run's writer
still there?), the dispatcher's SIGTERM clean-up (which processes are below me?), the owner watch of a job process,
and the tests (is everything a command started gone?). A process that cannot be read (gone, or another user's
where the system hides it) reads as None and callers say so.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

import psutil

log = logging.getLogger(__name__)

#: Two start times of one process agree within this: on Linux psutil adds the boot time, which the kernel derives
#: from the wall clock, to the start ticks, so an NTP step between two reads moves it. Taking a reused pid for
#: the owner would need the owner to end and its pid to come round again within this second.
SAME_START_S = 1.0

_ENDED = frozenset({psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD})


@dataclass(frozen=True)
class ProcStat:
    """One process, as psutil reads it."""

    pid: int
    name: str  # may hold spaces and parentheses; Linux keeps the first 15 bytes unless the command line says more
    state: str  # psutil's status: "running", "sleeping", "zombie", ...
    ppid: int
    session: int  # the session id (os.getsid); -1 where it cannot be read
    started_at: float  # start time as a Unix timestamp

    @property
    def ended(self) -> bool:
        """A zombie or a dead process: it holds its pid but runs no more."""
        return self.state in _ENDED


def read(pid: int) -> ProcStat | None:
    """The process `pid`; None when it does not exist or cannot be read."""
    try:
        p = psutil.Process(pid)
        with p.oneshot():  # one read of the process's files for all the fields below
            return ProcStat(pid=pid, name=p.name(), state=p.status(), ppid=p.ppid(), session=_session(pid),
                            started_at=p.create_time())
    except psutil.ZombieProcess:  # macOS refuses most reads of a zombie; it holds its pid and runs no more
        return ProcStat(pid=pid, name="", state=psutil.STATUS_ZOMBIE, ppid=-1, session=-1, started_at=0.0)
    except (psutil.Error, OSError, ValueError):  # NoSuchProcess, AccessDenied, a pid < 0
        return None


def _session(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def every() -> Iterator[ProcStat]:
    """Every process the system lists (those that exit while being read are skipped)."""
    for pid in psutil.pids():
        stat = read(pid)
        if stat is not None:
            yield stat


def descendants(root: int) -> list[int]:
    """Every live process below `root`, children before grandchildren."""
    children: dict[int, list[int]] = {}
    for p in psutil.process_iter(["ppid"]):  # the ppid only: cheaper than `every` on a busy host
        ppid = p.info.get("ppid")
        if isinstance(ppid, int):
            children.setdefault(ppid, []).append(p.pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(0), []):
            if child != root:  # on macOS the kernel's pid 0 is its own parent
                found.append(child)
                todo.append(child)
    return found


def rss(pid: int) -> int | None:
    """The resident memory of `pid` in bytes; None when it cannot be read."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError, ValueError):
        return None


def total_memory() -> int:
    """The machine's physical memory in bytes."""
    return int(psutil.virtual_memory().total)


def alive(pid: int, started_at: float) -> bool:
    """Whether `pid` is still the process that started at `started_at`, and still running (not a zombie)."""
    p = read(pid)
    return p is not None and abs(p.started_at - started_at) < SAME_START_S and not p.ended


#: Set by a process for a child that must not outlive it: "PID:STARTED_AT" (the start time tells a reused pid).
OWNER_ENV = "WORKBENCH_OWNER"
OWNER_POLL_S = 1.0


def owner_env() -> dict[str, str]:
    """The environment entry that names this process as the owner of a child it starts ({} where unreadable)."""
    me = read(os.getpid())
    return {OWNER_ENV: f"{me.pid}:{me.started_at!r}"} if me is not None else {}


def _parse_owner(raw: str) -> tuple[int, float] | None:
    pid, _, started = raw.partition(":")
    try:
        return int(pid), float(started)
    except ValueError:
        return None


def end_with_owner(poll_s: float = OWNER_POLL_S) -> bool:
    """In a child started with `owner_env`: a daemon thread that SIGTERMs this process once the owner is gone
    (killed, even with SIGKILL, which leaves no chance to clean up; or a zombie). Why not PR_SET_PDEATHSIG: it
    fires when the forking *thread* ends, and the app starts jobs from worker threads that come and go; and it
    is Linux only. Returns whether a watch was started (an owner named, this process readable)."""
    import signal
    import threading
    import time

    owner = _parse_owner(os.environ.get(OWNER_ENV, ""))
    if owner is None or read(os.getpid()) is None:
        return False

    def watch() -> None:
        while alive(*owner):
            time.sleep(poll_s)
        log.info("owner process %d is gone: ending this process", owner[0])
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()
    return True


_REAPERS: list[object] = []  # held (one at most), so no "still running" warning when a Popen object is collected


def reap_with_owner() -> None:
    """Start (once per process) a small watcher process that, once this process is gone (SIGKILL included), ends
    every child process this one had and their descendants. Why: an inference engine's processes (vLLM's EngineCore)
    are started by the library and run none of our code, so they cannot watch their owner themselves; orphaned, one
    burned a CPU for 14 minutes. The watcher learns the children while this process lives (after its death they
    belong to init and cannot be told apart), so call it before the engine starts. It leaves once it has ended
    them, or at once when this process ends having no child left."""
    import subprocess
    import sys

    me = read(os.getpid())
    if me is None or _REAPERS:
        return
    code = "import sys; from workbench.procstat import reap; reap(sys.argv[1])"
    # its own session: a signal to the owner's process group spares it
    _REAPERS.append(subprocess.Popen([sys.executable, "-c", code, f"{me.pid}:{me.started_at!r}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True))


def reap(owner: str, poll_s: float = 0.5, grace_s: float = 5.0) -> None:
    """The watcher `reap_with_owner` starts; `owner` is "PID:STARTED_AT"."""
    import signal
    import time

    parsed = _parse_owner(owner)
    if parsed is None:
        return
    pid, started = parsed
    known: dict[int, float] = {}  # the owner's descendants seen so far: pid -> start time
    while alive(pid, started):
        for d in descendants(pid):
            if d != os.getpid() and (p := read(d)) is not None:
                known.setdefault(d, p.started_at)
        time.sleep(poll_s)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = [d for d, t in known.items() if alive(d, t)]
        for target in [x for d in live for x in descendants(d)] + live:
            with contextlib.suppress(OSError):
                os.kill(target, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(alive(d, t) for d, t in known.items()):
            time.sleep(0.1)

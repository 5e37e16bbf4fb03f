"""Processes as Linux's /proc shows them: one reader for liveness (is a run's writer still there?), the
dispatcher's SIGTERM clean-up (which processes are below me?) and the tests (is everything a command
started gone?). Elsewhere (macOS, a /proc that hides other users) nothing is found and callers say so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class ProcStat:
    """One process, from /proc/PID/stat (fields as proc(5) numbers them)."""

    pid: int
    name: str  # field 2, the command name without its parentheses (may hold spaces and parentheses)
    state: str  # field 3: R, S, D, Z (zombie), ...
    ppid: int  # field 4
    session: int  # field 6
    start_ticks: int  # field 22: start time in clock ticks after boot

    @property
    def started_at(self) -> float:
        """Start time as a Unix timestamp."""
        return boot_time() + self.start_ticks / os.sysconf("SC_CLK_TCK")


def read(pid: int) -> ProcStat | None:
    """The process `pid`; None when it does not exist or /proc cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # The name may hold spaces and ')': the fixed fields resume after the last ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    return ProcStat(pid=pid, name=raw[raw.find("(") + 1 : raw.rfind(")")], state=rest[0], ppid=int(rest[1]),
                    session=int(rest[3]), start_ticks=int(rest[19]))


def every() -> Iterator[ProcStat]:
    """Every process /proc lists (those that exit while being read are skipped)."""
    for entry in Path("/proc").glob("[0-9]*"):
        stat = read(int(entry.name))
        if stat is not None:
            yield stat


def descendants(root: int) -> list[int]:
    """Every live process below `root`, children before grandchildren."""
    children: dict[int, list[int]] = {}
    for stat in every():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(0), []):
            found.append(child)
            todo.append(child)
    return found


@cache
def boot_time() -> float:
    """Boot time as a Unix timestamp (0.0 where /proc/stat cannot be read)."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


#: Set by a process for a child that must not outlive it: "PID:START_TICKS" (the start time tells a reused pid).
OWNER_ENV = "WORKBENCH_OWNER"
OWNER_POLL_S = 1.0


def owner_env() -> dict[str, str]:
    """The environment entry that names this process as the owner of a child it starts ({} without /proc)."""
    me = read(os.getpid())
    return {OWNER_ENV: f"{me.pid}:{me.start_ticks}"} if me is not None else {}


def end_with_owner(poll_s: float = OWNER_POLL_S) -> bool:
    """In a child started with `owner_env`: a daemon thread that SIGTERMs this process once the owner is gone
    (killed, even with SIGKILL, which leaves no chance to clean up; or a zombie). Why not PR_SET_PDEATHSIG: it
    fires when the forking *thread* ends, and the app starts jobs from worker threads that come and go. Returns
    whether a watch was started (an owner named, /proc readable)."""
    import signal
    import threading
    import time

    raw = os.environ.get(OWNER_ENV, "")
    pid, _, ticks = raw.partition(":")
    if not pid.isdigit() or not ticks.isdigit() or read(os.getpid()) is None:
        return False

    def gone() -> bool:
        p = read(int(pid))
        return p is None or p.start_ticks != int(ticks) or p.state in ("Z", "X")

    def watch() -> None:
        while not gone():
            time.sleep(poll_s)
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
    _REAPERS.append(subprocess.Popen([sys.executable, "-c", code, f"{me.pid}:{me.start_ticks}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True))


def reap(owner: str, poll_s: float = 0.5, grace_s: float = 5.0) -> None:
    """The watcher `reap_with_owner` starts; `owner` is "PID:START_TICKS"."""
    import signal
    import time

    def alive(pid: int, ticks: int) -> bool:
        p = read(pid)
        return p is not None and p.start_ticks == ticks and p.state not in ("Z", "X")

    pid, _, ticks = owner.partition(":")
    known: dict[int, int] = {}  # the owner's descendants seen so far: pid -> start ticks
    while alive(int(pid), int(ticks)):
        for d in descendants(int(pid)):
            if d != os.getpid() and (p := read(d)) is not None:
                known.setdefault(d, p.start_ticks)
        time.sleep(poll_s)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = [d for d, t in known.items() if alive(d, t)]
        for target in [x for d in live for x in descendants(d)] + live:
            with contextlib.suppress(OSError):
                os.kill(target, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(alive(d, t) for d, t in known.items()):
            time.sleep(0.1)

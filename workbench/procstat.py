"""Processes as Linux's /proc shows them: one reader for liveness (is a run's writer still there?), the
dispatcher's SIGTERM clean-up (which processes are below me?) and the tests (is everything a command
started gone?). Elsewhere (macOS, a /proc that hides other users) nothing is found and callers say so.
"""

from __future__ import annotations

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

"""Is the process writing a `running` run still there? A killed run must not read `running` forever.

`create_run` records the writer's pid, its host and a heartbeat (`Store.touch_run`, called after every
committed batch). A reader decides, without writing anything (a read-only workspace works too):

- same host and pid namespace (`host_id()`): exact. The run is interrupted when its pid is gone, is a
  zombie, or now belongs to a process that started after the run was created (pid reuse: the pid was
  ours when the run was created, so a process holding it now that started later is another one).
- another host (a shared store): by heartbeat only. Interrupted after `STALE_AFTER_S` without one.

Nothing is written: a reader on another host that guesses wrong corrects itself at the next heartbeat.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
from dataclasses import dataclass
from functools import cache

from workbench import procstat

log = logging.getLogger(__name__)

#: A `running` run on another host reads as interrupted after this long without a heartbeat. The first
#: heartbeat after `create_run` comes after the engine has started and the first batch is committed: on this
#: project's machines a vLLM engine starts in 45-113 s (measured) and a batch of the world model takes
#: under 2 s; a 70B model loading from a network disk takes several minutes. 30 minutes covers both with a
#: wide margin; a run that is really gone is shown as interrupted half an hour later on other hosts only
#: (on its own host it is immediate).
STALE_AFTER_S = 30 * 60
#: How far the start time psutil reads may lie after the run's creation for the same process: on Linux the boot
#: time it adds is whole seconds and the clock ticks are 1/100 s.
_CLOCK_SLACK_S = 2.0


@dataclass(frozen=True)
class Liveness:
    status: str  # the stored status, or "interrupted"
    why: str | None  # why it reads as interrupted (None when it does not)


@cache
def host_id() -> str:
    """This host's name plus its pid namespace (two containers may share a hostname, never a namespace). The
    namespace is a Linux notion no library reports; elsewhere the hostname alone names the host."""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = ""
    return f"{socket.gethostname()} {ns}".strip()


def judge(status: str, *, pid: int | None, host: str | None, heartbeat_at: str | None, created_at: str,
          now: dt.datetime | None = None) -> Liveness:
    """The status a reader should show for a stored run (see the module docstring)."""
    if status != "running":
        return Liveness(status, None)
    now = now or dt.datetime.now(dt.UTC)
    if pid is not None and host == host_id():
        # The writer started before its last heartbeat (a resumed run's process started after created_at).
        alive = process_alive(pid, started_by=_parse(heartbeat_at or created_at))
        if alive:
            return Liveness(status, None)
        log.debug("run of process %d reads as interrupted: that process is gone", pid)
        return Liveness("interrupted", f"its process {pid} on this host is gone")
    last = _parse(heartbeat_at or created_at)
    age = (now - last).total_seconds()
    if age > STALE_AFTER_S:
        where = f"on {host.split(' ')[0]}" if host else "(no host recorded)"
        return Liveness("interrupted", f"no heartbeat from its process {where} for {age / 60:.0f} minutes")
    return Liveness(status, None)


def process_alive(pid: int, *, started_by: dt.datetime | None = None) -> bool:
    """Whether `pid` is a live process (not a zombie) that started no later than `started_by`."""
    stat = procstat.read(pid)
    if stat is None:  # no such process, or the system hides another user's process
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # another user's live process
        return True
    if stat.ended:
        return False
    # A process that started after `started_by` holds a reused pid.
    return started_by is None or stat.started_at <= started_by.timestamp() + _CLOCK_SLACK_S


def _parse(stamp: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(stamp)
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)

"""workbench.procstat reads processes (through psutil) as liveness, the SIGTERM clean-up, the owner watch and the
tests need them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from workbench import procstat


def test_reads_a_process_and_finds_its_descendants(tmp_path: Path) -> None:
    # A child (a shell in its own session) with a grandchild whose name holds a space and a parenthesis
    # (the kernel names a process after the file it executes).
    odd = tmp_path / "odd (name)"
    odd.symlink_to(sys.executable)
    child = subprocess.Popen(["sh", "-c", '"$0" -c "import time; time.sleep(30)" & wait', str(odd)],
                             start_new_session=True)
    try:
        def execed() -> bool:  # sh forks, then the fork execs: until then the grandchild is named "sh"
            kids = procstat.descendants(child.pid)
            stat = procstat.read(kids[0]) if len(kids) == 1 else None
            return stat is not None and stat.name.startswith("odd")

        deadline = time.monotonic() + 10
        while not execed() and time.monotonic() < deadline:
            time.sleep(0.05)
        (grandchild,) = procstat.descendants(child.pid)
        assert child.pid in procstat.descendants(os.getpid())
        assert grandchild in procstat.descendants(os.getpid())  # grandchildren too
        stat = procstat.read(grandchild)
        assert stat is not None
        assert stat.name.startswith("odd (name")  # the kernel keeps 15 bytes of the name
        assert (stat.ppid, stat.session) == (child.pid, child.pid)
        assert stat.state in ("sleeping", "running") and not stat.ended
        assert abs(stat.started_at - time.time()) < 15
        assert {p.pid for p in procstat.every() if p.session == child.pid} == {child.pid, grandchild}
    finally:
        os.killpg(child.pid, 9)
        child.wait()
    assert procstat.read(child.pid) is None


def test_a_missing_process_reads_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid is free
    assert procstat.read(child.pid) is None
    assert procstat.rss(child.pid) is None
    assert procstat.read(-1) is None  # a pid out of range, as a damaged store could hold


def test_a_child_s_resident_memory_grows_with_what_it_holds() -> None:
    code = ("import sys; print('up', flush=True); sys.stdin.readline(); b = bytearray(200 << 20); "
            "b[::4096] = b'x' * len(b[::4096]); print('held', flush=True); sys.stdin.readline()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline() == "up\n"  # the interpreter runs (just after the fork it does not yet)
        before = procstat.rss(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "held\n"
        after = procstat.rss(child.pid)
        assert before is not None and after is not None
        assert 5 << 20 < before < 150 << 20  # an interpreter, not yet the 200 MiB
        assert after - before > 190 << 20  # every page of the 200 MiB touched
        assert procstat.total_memory() > after
    finally:
        child.kill()
        child.wait()


def test_alive_tells_a_dead_owner_and_a_reused_pid() -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        me = procstat.read(owner.pid)
        assert me is not None
        assert procstat.alive(owner.pid, me.started_at)
        assert not procstat.alive(owner.pid, me.started_at + 60)  # same pid, a process started a minute later
        token = procstat.owner_env()[procstat.OWNER_ENV]
        assert procstat.alive(*procstat._parse_owner(token) or (0, 0.0))  # this process, as a child reads it back
        owner.kill()
        deadline = time.monotonic() + 10
        while (p := procstat.read(owner.pid)) is not None and not p.ended and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not procstat.alive(owner.pid, me.started_at)  # a zombie, not yet reaped, is gone already
    finally:
        owner.kill()
        owner.wait()
    assert not procstat.alive(owner.pid, me.started_at)

"""workbench.procstat reads /proc as liveness, the SIGTERM clean-up and the tests need it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench import procstat

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")


def test_reads_a_process_and_finds_its_descendants(tmp_path: Path) -> None:
    # A child (a shell in its own session) with a grandchild whose name holds a space and a parenthesis
    # (the kernel names a process after the file it executes).
    odd = tmp_path / "odd (name)"
    odd.symlink_to(sys.executable)
    child = subprocess.Popen(["sh", "-c", '"$0" -c "import time; time.sleep(30)" & wait', str(odd)],
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(procstat.descendants(child.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        (grandchild,) = procstat.descendants(child.pid)
        assert child.pid in procstat.descendants(os.getpid())
        assert grandchild in procstat.descendants(os.getpid())  # grandchildren too
        stat = procstat.read(grandchild)
        assert stat is not None
        assert stat.name.startswith("odd (name")  # the kernel keeps 15 bytes of the name
        assert (stat.ppid, stat.session) == (child.pid, child.pid)
        assert stat.state in ("S", "R")
        assert abs(stat.started_at - time.time()) < 15
        assert {p.pid for p in procstat.every() if p.session == child.pid} == {child.pid, grandchild}
    finally:
        os.killpg(child.pid, 9)
        child.wait()
    assert procstat.read(child.pid) is None


def test_a_missing_process_reads_none() -> None:
    with open("/proc/sys/kernel/pid_max") as f:
        assert procstat.read(int(f.read()) + 1) is None

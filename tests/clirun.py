"""Run the `workbench` CLI as a user does: a subprocess with a hard timeout, and check how it refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def workbench(*args: str, cwd: Path | None = None, timeout: float = 180, env: dict[str, str] | None = None,
              prefix: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """`python -m workbench ARGS` (stdin closed: nothing may wait for a terminal)."""
    return subprocess.run([*prefix, sys.executable, "-m", "workbench", *args], cwd=cwd, env=env or ENV,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def assert_refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, no traceback, and every needle in stderr (the file, line and field it names). Returns stderr."""
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    for needle in needles:
        assert needle in err, (needle, err[-2000:])
    return err


def without_write_access() -> list[str] | None:
    """A command prefix under which permission bits apply (root bypasses them): [] for a normal user,
    setpriv dropping root's override capabilities, or None when neither is possible."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all", "--"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
    return prefix if probe.returncode == 0 else None

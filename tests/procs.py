"""Test helpers for other processes and ports: a free loopback port, and N processes that open one store
at the same instant (a barrier on their stdin, not a wall-clock start time that a loaded machine misses)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

_OPEN_STORE = """
import sys
from workbench.store import Store
print("ready", flush=True)
sys.stdin.readline()  # the barrier: every process has imported before any opens the store
Store.open(sys.argv[1], url=sys.argv[2] if len(sys.argv) > 2 else None)
"""


def free_port() -> int:
    """A loopback TCP port free at the time of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def open_store_at_once(workspace: Path, url: str | None = None, n: int = 8) -> list[tuple[int, str]]:
    """Start `n` processes that each import the store, wait until all are ready, release them together to
    `Store.open` the same (new) store; returns each one's (exit code, stderr)."""
    args = [sys.executable, "-c", _OPEN_STORE, str(workspace), *([url] if url else [])]
    procs = [subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready", "a store process died on import"
    for p in procs:  # release them all before waiting on any
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    out = []
    for p in procs:
        _, err = p.communicate(timeout=120)
        out.append((p.returncode, err))
    return out

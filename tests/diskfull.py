"""Real full and read-only file systems for the tests of output errors: a small tmpfs (root's `mount`; the tests
skip where it cannot be mounted), and `fill` to use up what is left of one. Real ENOSPC and EROFS, as SQLite's own
I/O-error tests make them, not a patched `open`."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(mnt: Path, size: str, *, ro: bool = False) -> Iterator[Path]:
    """`mnt` (created) as a tmpfs of `size` (`64k`, `1m`), read-only with `ro`; unmounted on leaving. Skips the
    test where it cannot be mounted (not root, no mount namespace)."""
    mnt.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if ro else "")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], capture_output=True,
                      timeout=30).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def fill(folder: Path) -> None:
    """Write zeros into `folder/filler` until its file system is full."""
    with contextlib.suppress(OSError), open(folder / "filler", "wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()

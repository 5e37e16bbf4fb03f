"""Copy a workspace that a process may still have open.

Why not `shutil.copytree` alone: SQLite's locks are POSIX record locks, and closing *any* descriptor of a file drops
every lock the process holds on it. A test worker that holds the shared store open (the fine-tuning world's) and
reads its files with `open()`/`close()` silently releases its own locks; the next command to write the store then
checkpoints and resets the WAL under the worker's connection, whose next read fails with "database disk image is
malformed". SQLite's backup API goes through SQLite's own file handles, which keep the locks (and it copies a
consistent snapshot, WAL included).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

_SQLITE = ("*.sqlite", "*.sqlite-wal", "*.sqlite-shm", "*.sqlite-journal")


def copy_workspace(src: Path, dest: Path, *ignore: str) -> Path:
    """`src` copied to `dest`: every SQLite database through the backup API, the other files as they are (names
    matching `ignore` patterns left behind). Returns dest."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(*_SQLITE, *ignore))
    for db in sorted(src.rglob("*.sqlite")):
        target = dest / db.relative_to(src)
        if not target.parent.is_dir():  # under an ignored folder
            continue
        with sqlite3.connect(db) as source, sqlite3.connect(target) as copy:
            source.backup(copy)
        source.close()
        copy.close()
    return dest

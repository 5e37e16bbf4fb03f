"""Resolve a user-supplied path strictly inside the workspace.

Everything the app reads or serves on a user's behalf goes through `resolve_inside`: `..` segments,
absolute paths, URL-encoded traversal (`%2e%2e%2f`, double-encoded too), backslashes, NUL bytes and
symlinks that point out of the workspace are all refused with `UnsafePathError`.

Database files are refused too, by name and by inode (a hard link under another name): the app process
holds the store open, and opening and closing a database file as a plain file drops every POSIX lock the
process holds on it (fcntl locks are per process and inode). SQLite then believes the app is gone: the next
CLI process to close the store deletes its -wal/-shm files under the app, and the app's later writes
(reviewers' decisions) go into deleted files and are lost. So no path from a user may name one.

The workspace-file viewer (`read_text_inside`) further shows only the kinds of file the workbench writes
for people to read: reports, manifests, job specs and logs (`VIEWABLE_SUFFIXES`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from workbench.errors import WorkbenchError

_MAX_DECODES = 3  # "%252e%252e" decodes twice to ".."; more layers than this is refused outright
#: SQLite databases and the side files SQLite creates beside any database (rollback journal, WAL, shared
#: memory), whatever the database's own name.
_DATABASE = re.compile(r"(\.(sqlite3?|db3?)|-(wal|shm|journal))$", re.IGNORECASE)
STORE_FILE = "store.sqlite"
#: What the viewer may show: reports (Markdown, HTML, JUnit XML, JSON), fix-set manifests, job specs, logs.
VIEWABLE_SUFFIXES = (".md", ".html", ".htm", ".xml", ".json", ".jsonl", ".yaml", ".yml", ".txt", ".log", ".csv")


class UnsafePathError(WorkbenchError):
    """A path that would leave the workspace (or could not be checked)."""


def resolve_inside(workspace: str | os.PathLike[str], user_path: str) -> Path:
    """The real path of `user_path` under `workspace`, or UnsafePathError.

    `user_path` is relative to the workspace; an absolute path is accepted only when it already
    lies inside the workspace. The result has every symlink resolved and is checked again, so a
    link inside the workspace that points elsewhere is refused too.
    """
    root = Path(workspace).resolve()
    text = _decode(user_path)
    if not text.strip():
        raise UnsafePathError("empty path")
    if "\x00" in text:
        raise UnsafePathError("path contains a NUL byte")
    text = text.replace("\\", "/")
    parts = PurePosixPath(text).parts
    if ".." in parts:
        raise UnsafePathError(f"`{user_path}`: `..` is not allowed")
    candidate = Path(text) if Path(text).is_absolute() else root / text
    try:
        real = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as e:  # symlink loops
        raise UnsafePathError(f"`{user_path}`: cannot resolve ({e})") from None
    if real != root and root not in real.parents:
        raise UnsafePathError(f"`{user_path}` is outside the workspace")
    if _is_database(root, real):
        raise UnsafePathError(f"`{user_path}` is a database file; the store is read through the app's views, "
                              "never as a file")
    return real


def _is_database(root: Path, real: Path) -> bool:
    """By name, or the same inode as one of the store's files (a hard link). `stat` opens nothing."""
    if _DATABASE.search(real.name):
        return True
    try:
        st = real.stat()
    except OSError:
        return False
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            other = (root / (STORE_FILE + suffix)).stat()
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino):
            return True
    return False


def _decode(user_path: str) -> str:
    text = user_path
    for _ in range(_MAX_DECODES):
        decoded = unquote(text)
        if decoded == text:
            return text
        text = decoded
    if unquote(text) != text:
        raise UnsafePathError(f"`{user_path}`: too many layers of URL encoding")
    return text


def read_text_inside(workspace: str | os.PathLike[str], user_path: str, *, max_bytes: int = 2_000_000) -> str:
    """The text of a report, manifest, job spec or log inside the workspace (at most `max_bytes`).
    Everything is checked before the file is opened."""
    path = resolve_inside(workspace, user_path)
    if not path.is_file():
        raise UnsafePathError(f"`{user_path}` is not a file in the workspace")
    if path.suffix.lower() not in VIEWABLE_SUFFIXES:
        raise UnsafePathError(f"`{user_path}`: the viewer shows only {', '.join(VIEWABLE_SUFFIXES)} files")
    if path.stat().st_size > max_bytes:
        raise UnsafePathError(f"`{user_path}` is larger than {max_bytes} bytes")
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafePathError(f"`{user_path}` is larger than {max_bytes} bytes")
    return data.decode("utf-8", errors="replace")

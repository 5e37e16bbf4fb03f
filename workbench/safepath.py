"""Resolve a user-supplied path strictly inside the workspace.

Everything the app reads or serves on a user's behalf goes through `resolve_inside`: `..` segments,
absolute paths, URL-encoded traversal (`%2e%2e%2f`, double-encoded too), backslashes, NUL bytes and
symlinks that point out of the workspace are all refused with `UnsafePathError`.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from workbench.errors import WorkbenchError

_MAX_DECODES = 3  # "%252e%252e" decodes twice to ".."; more layers than this is refused outright


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
    return real


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
    """The text of a regular file inside the workspace (at most `max_bytes`)."""
    path = resolve_inside(workspace, user_path)
    if not path.is_file():
        raise UnsafePathError(f"`{user_path}` is not a file in the workspace")
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafePathError(f"`{user_path}` is larger than {max_bytes} bytes")
    return data.decode("utf-8", errors="replace")

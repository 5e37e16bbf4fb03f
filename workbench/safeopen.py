"""Opening a user's input one safe way: every file the workbench reads on a user's behalf comes through here.

`safeload` bounds what a file holds (depth, values, integers); this module bounds how it is opened and read:

- only a regular file is opened. `os.stat` decides before any `open`, and the open itself uses `O_NONBLOCK`
  (then checked again with `fstat`), so a FIFO, a device (`/dev/zero`), a socket or a file swapped for one
  between the two calls is refused at once instead of hanging or streaming forever;
- the size is checked before reading, and the read goes in bounded chunks that stop one byte past the cap,
  so a file that grows while it is read cannot pass it either;
- a directory's members (a corpus of .txt files) are walked without following symlinks: a link inside the
  directory is refused unless the caller allows links (`--follow-symlinks`), and even then must lead to a
  regular file; a link to `/etc/shadow` dropped into a corpus folder is never read into an index;
- lines are read in bounded chunks too (`iter_lines`): a 3 GiB file without a newline is refused at the
  line cap, never held whole.

Every refusal is an `UnsafeInputError` (a `WorkbenchError`: exit 2) whose message names the file and what
it is. `what` in the calls below is how the message names the file's role ("policy file", "--facts").
"""

from __future__ import annotations

import codecs
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from workbench.errors import WorkbenchError

CHUNK = 1 << 20  # bytes per read: a cap is never overshot by more than this
#: A user's text file read whole (--facts, an auth file): far beyond any real one.
MAX_TEXT_BYTES = 64 << 20
#: A data file read whole (a probe file: a JSON array cannot be split by lines): about a million probes.
MAX_DATA_FILE_BYTES = 256 << 20
#: One line of a line-oriented input (a JSONL row, a text corpus line, a --facts row).
MAX_LINE_BYTES = 1 << 20
#: One document of a corpus directory (one .txt file).
MAX_DOCUMENT_BYTES = 16 << 20

_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symbolic link"}


class UnsafeInputError(WorkbenchError):
    """An input that is not a regular file, is too large, or leaves its directory through a symlink."""


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def check_regular(path: str | os.PathLike[str], *, what: str = "file") -> os.stat_result:
    """The stat of `path` (symlinks followed) when it is a regular file; UnsafeInputError otherwise.
    FileNotFoundError passes through, for callers that word a missing file themselves."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeInputError(f"{what} {path}: is {_kind(st.st_mode)}, not a regular file")
    return st


def open_input(path: str | os.PathLike[str], *, max_bytes: int, what: str = "file",
               follow_symlinks: bool = True) -> BinaryIO:
    """`path` opened for binary reading, after every check: a regular file (checked by `stat` before the
    open and by `fstat` after it, the same inode both times), at most `max_bytes`. `follow_symlinks` False:
    a symlink itself is refused. Read it with `read_bounded` or `iter_lines` to keep the cap while reading."""
    if not follow_symlinks:
        lst = os.lstat(path)
        if stat.S_ISLNK(lst.st_mode):
            raise UnsafeInputError(f"{what} {path}: is a symbolic link; links are not followed here "
                                   "(pass --follow-symlinks to read them)")
    st = check_regular(path, what=what)
    _check_size(path, st.st_size, max_bytes, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeInputError(f"{what} {path}: is a symbolic link; links are not followed here") from None
        raise
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            raise UnsafeInputError(f"{what} {path}: changed while it was opened (now {_kind(fst.st_mode)})")
        # Non-blocking was for the open alone (a FIFO's open blocks); a regular file reads the same either way.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_size(path: str | os.PathLike[str], size: int, max_bytes: int, what: str) -> None:
    if size > max_bytes:
        raise UnsafeInputError(f"{what} {path}: {size:,} bytes; a {what} may be at most {max_bytes:,}")


def read_bounded(f: BinaryIO, path: str | os.PathLike[str], *, max_bytes: int, what: str = "file") -> bytes:
    """The rest of `f`, read in chunks; UnsafeInputError as soon as it passes `max_bytes` (a file that grew)."""
    parts: list[bytes] = []
    total = 0
    while chunk := f.read(min(CHUNK, max_bytes + 1 - total)):
        parts.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise UnsafeInputError(f"{what} {path}: more than {max_bytes:,} bytes (it grew while read)")
    return b"".join(parts)


def read_input(path: str | os.PathLike[str], *, max_bytes: int, what: str = "file",
               follow_symlinks: bool = True) -> bytes:
    """The whole of a user's file, opened and read by the rules above."""
    with open_input(path, max_bytes=max_bytes, what=what, follow_symlinks=follow_symlinks) as f:
        return read_bounded(f, path, max_bytes=max_bytes, what=what)


def read_input_text(path: str | os.PathLike[str], *, max_bytes: int = MAX_TEXT_BYTES, what: str = "file") -> str:
    """A user's UTF-8 text file (a UTF-8 BOM is dropped). UTF-16/32 (a BOM says so) or bytes that are not
    UTF-8 are refused with the file and the byte offset, never a UnicodeDecodeError."""
    return decode_utf8(read_input(path, max_bytes=max_bytes, what=what), path, what)


def decode_utf8(raw: bytes, path: str | os.PathLike[str], what: str = "file") -> str:
    """`raw` as UTF-8 text, or UnsafeInputError naming the encoding found (from a BOM) or the bad byte."""
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                      (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):
        if raw.startswith(bom):
            raise UnsafeInputError(f"{what} {path}: is {name} (byte-order mark); save it as UTF-8")
    try:
        return raw.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnsafeInputError(f"{what} {path}: not valid UTF-8 ({e.reason} at byte {e.start})") from None


def iter_lines(f: BinaryIO, *, max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes | None]]:
    """(bytes consumed, line) for each line of `f` from where it stands, the line with its b"\\n"; a line longer
    than `max_line` comes as (consumed, None), skipped in bounded reads up to its newline, so a 3 GiB file
    without a newline is never held whole and a caller may count it as a bad row and go on."""
    while raw := f.readline(max_line + 1):
        if len(raw) <= max_line or raw.endswith(b"\n"):
            yield len(raw), raw
            continue
        consumed = len(raw)
        while (rest := f.readline(CHUNK)) and not rest.endswith(b"\n"):
            consumed += len(rest)
        yield consumed + len(rest), None


def arrow_decoded_bytes(col: Any) -> int:
    """The bytes an Arrow column holds once decoded: a dictionary array's `nbytes` counts its dictionary
    once, so 800 bytes of dictionary-encoded Parquet can hide gigabytes of repeated text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type):
        values = col.dictionary
        if (pa.types.is_string(values.type) or pa.types.is_binary(values.type)
                or pa.types.is_large_string(values.type)) and len(col):
            total = pc.sum(pc.take(pc.binary_length(values), col.indices)).as_py()  # nulls count 0
            return int(total or 0) + int(col.indices.nbytes)
    return int(col.nbytes)


def text_columns(schema: Any) -> list[str]:
    """Names of an Arrow schema's string columns: read them as dictionary arrays, then `arrow_decoded_bytes`
    counts them before they are decoded."""
    return [f.name for f in schema if str(f.type) in ("string", "large_string")]


def member_files(root: str | os.PathLike[str], suffix: str, *, follow_symlinks: bool = False,
                 what: str = "corpus directory") -> list[Path]:
    """Regular files under `root` whose name ends with `suffix`, sorted, walked without following links.

    A symlink among them (to a file or a folder) is refused unless `follow_symlinks`; followed, it must lead
    to a regular file (a linked folder is walked too, each real folder once, so a loop ends). Anything else
    that is not a regular file (a FIFO named x.txt) is refused: it would hang or never end."""
    base = Path(root)
    out: list[Path] = []
    seen: set[tuple[int, int]] = set()
    todo = [base]
    while todo:
        folder = todo.pop()
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            p = Path(e.path)
            if e.is_symlink() and not follow_symlinks:
                if e.name.endswith(suffix) or e.is_dir():
                    raise UnsafeInputError(f"{what} {base}: {p.relative_to(base)} is a symbolic link; links "
                                           "are not followed (pass --follow-symlinks to read them)")
                continue
            if e.is_dir(follow_symlinks=True):
                todo.append(p)
            elif e.name.endswith(suffix):
                try:
                    check_regular(p, what=what + " member")
                except FileNotFoundError:
                    raise UnsafeInputError(f"{what} {base}: {p.relative_to(base)} is a broken link") from None
                out.append(p)
    return sorted(out)

"""Corpus readers for the data axis: JSONL, Parquet, plain text, a directory of .txt files, `hf:name`.

Every reader streams (a line, a Parquet record batch or a dataset slice at a time) and can start
from a saved `Position`, so a killed index build resumes where its last committed batch ended.
Bad rows are yielded as `BadRow` (not raised) so the builder decides: stop, or count and go on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from workbench.compat.transformers import dataset_fingerprint
from workbench.errors import InputError, WorkbenchError
from workbench.safeload import json_loads
from workbench.safeopen import (
    MAX_DOCUMENT_BYTES,
    MAX_LINE_BYTES,
    UnsafeInputError,
    arrow_decoded_bytes,
    check_regular,
    iter_lines,
    member_files,
    open_input,
    read_input,
    text_columns,
)

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
PARQUET_SUFFIXES = (".parquet", ".pq")
TEXT_SUFFIXES = (".txt", ".text")
_SLICE = 2_000  # rows per Parquet batch / HF slice: bounded memory, few Python round trips
_MAX_BATCH_BYTES = 256 << 20  # decoded text per Parquet batch: 128 KiB a row on average


class Position(NamedTuple):
    """Where reading resumes. `pos`: byte offset (JSONL, text) or rows/files consumed (others).
    `line`: 1-based number of the last line/row consumed, for error messages."""

    pos: int = 0
    line: int = 0


class Doc(NamedTuple):
    """One document. A NamedTuple (not a dataclass) because a million of them pass through."""

    doc_id: str
    text: str
    line: int
    after: Position  # the position just past this document


class BadRow(NamedTuple):
    error: InputError
    after: Position


@dataclass(frozen=True)
class Corpus:
    """A corpus source. `label` is what checkpoints and messages name (an absolute path or `hf:x`)."""

    kind: str  # "jsonl" | "parquet" | "text" | "textdir" | "hf"
    label: str
    text_field: str = "text"
    id_field: str = "id"  # "" numbers the rows instead (for corpora without ids)
    follow_symlinks: bool = False  # a directory's symlinked members are refused unless this is set

    def fingerprint(self) -> dict[str, Any]:
        """Cheap change detection (size + mtime; never hashes a large file's contents)."""
        if self.kind == "hf":
            return {"dataset": self.label, "fingerprint": dataset_fingerprint(_load_hf(self.label))}
        path = Path(self.label)
        if self.kind == "textdir":
            h, files = hashlib.sha256(), _txt_files(path, self.follow_symlinks)
            for f in files:
                st = f.stat()
                h.update(f"{f.relative_to(path).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            return {"files": len(files), "listing_sha256": h.hexdigest()}
        st = path.stat()
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def total_hint(self) -> int | None:
        """Row count when it is known without reading the data (for a progress bar)."""
        if self.kind == "parquet":
            return int(_parquet_file(self.label).metadata.num_rows)
        if self.kind == "textdir":
            return len(_txt_files(Path(self.label), self.follow_symlinks))
        if self.kind == "hf":
            return len(_load_hf(self.label))
        return None

    def read(self, start: Position | None = None) -> Iterator[Doc | BadRow]:
        readers = {"jsonl": _read_jsonl, "text": _read_text, "textdir": _read_textdir,
                   "parquet": _read_parquet, "hf": _read_hf}
        return readers[self.kind](self, start or Position())


def open_corpus(spec: str | Path, *, text_field: str = "text", id_field: str = "id",
                follow_symlinks: bool = False) -> Corpus:
    """Name the source kind from the spec: `hf:name[:config]`, a directory, or a file by suffix. A file must be
    a regular file; a directory's members must be too, and symlinks among them are refused unless
    `follow_symlinks` (workbench.safeopen)."""
    s = str(spec)
    if s.startswith("hf:"):
        if not s[3:]:
            raise WorkbenchError("`hf:` needs a dataset name, as in hf:name or hf:name:config")
        return Corpus("hf", s, text_field, id_field)
    path = Path(s).expanduser()
    if not path.exists():
        raise WorkbenchError(f"corpus not found: {path}")
    if not path.is_dir():
        check_regular(path, what="corpus")  # named as the user gave it, before links are resolved
    path = path.resolve()
    if path.is_dir():
        if not _txt_files(path, follow_symlinks):
            raise WorkbenchError(f"{path}: directory holds no .txt files")
        return Corpus("textdir", str(path), text_field, id_field, follow_symlinks)
    name = path.name.lower()
    for kind, suffixes in (("jsonl", JSONL_SUFFIXES), ("parquet", PARQUET_SUFFIXES), ("text", TEXT_SUFFIXES)):
        if name.endswith(suffixes):
            if kind == "parquet":
                _parquet_file(str(path))  # refuse a file that is not Parquet now, not mid-build
            return Corpus(kind, str(path), text_field, id_field)
    known = ", ".join(JSONL_SUFFIXES + PARQUET_SUFFIXES + TEXT_SUFFIXES)
    raise WorkbenchError(f"{path}: unknown corpus format (expected {known}, a directory of .txt, or hf:name)")


def _txt_files(root: Path, follow_symlinks: bool) -> list[Path]:
    return member_files(root, ".txt", follow_symlinks=follow_symlinks)


def _check(c: Corpus, row: dict[str, Any], line: int, where: str) -> tuple[str, str] | InputError:
    """(id, text) from a decoded row, or the InputError naming the bad field."""
    text = row.get(c.text_field)
    if text is None:
        return InputError(where, line, c.text_field, "missing" if c.text_field not in row else "is null")
    if not isinstance(text, str):
        return InputError(where, line, c.text_field, f"must be a string, got {type(text).__name__}")
    if not c.id_field:
        return str(line), text
    doc_id = row.get(c.id_field)
    # Integer ids are common (row numbers); floats/bools/lists would make ambiguous keys.
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        return str(doc_id), text
    if not isinstance(doc_id, str) or not doc_id:
        problem = "missing" if doc_id is None else f"must be a non-empty string or integer, got {doc_id!r}"
        return InputError(where, line, c.id_field, problem)
    return doc_id, text


def _read_jsonl(c: Corpus, start: Position) -> Iterator[Doc | BadRow]:
    offset, line = start
    with _open(c) as f:  # binary: exact byte offsets, and UTF-8 errors per line
        f.seek(offset)
        for consumed, raw in iter_lines(f):
            offset += consumed
            line += 1
            after = Position(offset, line)
            if raw is None:
                yield BadRow(_too_long(c, line), after)
                continue
            if not raw.strip():
                continue
            try:
                row = json_loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                yield BadRow(InputError(c.label, line, None, f"not valid UTF-8 ({e.reason})"), after)
                continue
            except json.JSONDecodeError as e:
                yield BadRow(InputError(c.label, line, None, f"invalid JSON: {e.msg}"), after)
                continue
            except ValueError as e:
                yield BadRow(InputError(c.label, line, None, str(e)), after)
                continue
            if not isinstance(row, dict):
                yield BadRow(InputError(c.label, line, None, "expected a JSON object"), after)
                continue
            got = _check(c, row, line, c.label)
            yield BadRow(got, after) if isinstance(got, InputError) else Doc(got[0], got[1], line, after)


def _open(c: Corpus) -> BinaryIO:
    """The corpus file, opened the one safe way (a regular file; no cap on the whole: corpora are large)."""
    return open_input(c.label, max_bytes=sys.maxsize, what="corpus")


def _too_long(c: Corpus, line: int) -> InputError:
    return InputError(c.label, line, None, f"longer than {MAX_LINE_BYTES:,} bytes (one document per line)")


def _read_text(c: Corpus, start: Position) -> Iterator[Doc | BadRow]:
    """One document per non-blank line; its id is the line number (stable across resumes)."""
    offset, line = start
    with _open(c) as f:
        f.seek(offset)
        for consumed, raw in iter_lines(f):
            offset += consumed
            line += 1
            if raw is None:
                yield BadRow(_too_long(c, line), Position(offset, line))
                continue
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                bad = InputError(c.label, line, None, f"not valid UTF-8 ({e.reason})")
                yield BadRow(bad, Position(offset, line))
                continue
            if text.strip():
                yield Doc(str(line), text, line, Position(offset, line))


def _read_textdir(c: Corpus, start: Position) -> Iterator[Doc | BadRow]:
    """One document per .txt file; its id is the path relative to the directory."""
    root = Path(c.label)
    for i, f in enumerate(_txt_files(root, c.follow_symlinks)[start.pos :], start=start.pos + 1):
        after = Position(i, i)
        try:
            text = read_input(f, max_bytes=MAX_DOCUMENT_BYTES, what="corpus document").decode("utf-8")
        except UnsafeInputError as e:  # too large (or swapped for something else since it was listed)
            yield BadRow(InputError(f, None, None, str(e).split(": ", 1)[-1]), after)
            continue
        except UnicodeDecodeError as e:
            yield BadRow(InputError(f, None, None, f"not valid UTF-8 ({e.reason})"), after)
            continue
        yield Doc(f.relative_to(root).as_posix(), text, i, after)


def _rows(c: Corpus, columns: dict[str, list[Any]], first: int, where: str) -> Iterator[Doc | BadRow]:
    """Docs from a column slice whose first row is row number `first` (1-based)."""
    texts = columns[c.text_field]
    ids = columns[c.id_field] if c.id_field else [None] * len(texts)
    for k, (doc_id, text) in enumerate(zip(ids, texts, strict=True)):
        n = first + k
        row = {c.text_field: text, c.id_field: doc_id} if c.id_field else {c.text_field: text}
        got = _check(c, row, n, where)
        after = Position(n, n)
        yield BadRow(got, after) if isinstance(got, InputError) else Doc(got[0], got[1], n, after)


def _need_columns(c: Corpus, have: list[str], where: str) -> list[str]:
    want = [f for f in (c.id_field, c.text_field) if f]
    for f in want:
        if f not in have:
            hint = " (or --id-field '' to number the rows)" if f == c.id_field else ""
            raise InputError(where, None, f, f"no such column; columns are {', '.join(have)}{hint}")
    return want


def _parquet_file(label: str) -> Any:
    """pyarrow's ParquetFile, or a WorkbenchError naming the file (pyarrow raises several unrelated types)."""
    import pyarrow.parquet as pq

    check_regular(label, what="corpus")
    try:  # text columns read as dictionary arrays: their decoded size is counted before they are decoded
        return pq.ParquetFile(label, read_dictionary=text_columns(pq.read_schema(label)))
    except Exception as e:
        raise WorkbenchError(f"{label}: not a readable Parquet file ({e})") from None


def _read_parquet(c: Corpus, start: Position) -> Iterator[Doc | BadRow]:
    pf = _parquet_file(c.label)
    want = _need_columns(c, pf.schema_arrow.names, c.label)
    # Skip whole row groups already indexed, then the rest of the partial one.
    groups: list[int] = []
    skip, first = start.pos, 1
    for g in range(pf.num_row_groups):
        rows = pf.metadata.row_group(g).num_rows
        if skip >= rows and not groups:
            skip, first = skip - rows, first + rows
        else:
            groups.append(g)
    for batch in pf.iter_batches(batch_size=_SLICE, row_groups=groups, columns=want):
        if skip >= batch.num_rows:  # still inside the part already indexed
            skip, first = skip - batch.num_rows, first + batch.num_rows
            continue
        decoded = sum(arrow_decoded_bytes(col) for col in batch.columns)
        if decoded > _MAX_BATCH_BYTES:
            raise WorkbenchError(f"{c.label}: rows {first}-{first + batch.num_rows - 1} decode to {decoded:,} "
                                 f"bytes; at most {_MAX_BATCH_BYTES:,} per {_SLICE} rows (a dictionary-encoded "
                                 "bomb, or documents far larger than text)")
        cols = batch.to_pydict()
        if skip:
            cols = {k: v[skip:] for k, v in cols.items()}
            first, skip = first + skip, 0
        yield from _rows(c, cols, first, c.label)
        first += len(cols[c.text_field])


@functools.lru_cache(maxsize=4)  # fingerprint, total and read each need it: load once
def _load_hf(label: str) -> Any:
    """The `train` split of `hf:name[:config]`, loaded lazily (Arrow, memory-mapped, not in RAM)."""
    name, _, config = label[3:].partition(":")
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - datasets is a core dependency
        raise WorkbenchError("hf: corpora need the `datasets` package") from e
    try:
        return datasets.load_dataset(name, config or None, split="train")
    except Exception as e:  # offline, unknown name, bad config: datasets raises many kinds
        raise WorkbenchError(f"cannot load Hugging Face dataset `{name}` (offline? unknown?): {e}") from e


def _read_hf(c: Corpus, start: Position) -> Iterator[Doc | BadRow]:
    ds = _load_hf(c.label)
    want = _need_columns(c, list(ds.column_names), c.label)
    ds = ds.select_columns(want)
    for i in range(start.pos, len(ds), _SLICE):
        yield from _rows(c, ds[i : i + _SLICE], i + 1, c.label)

"""File readers: turn JSONL / JSON / CSV / TSV / Parquet into records with their 1-based line numbers.

A reader yields a `Record` per good row and an `InputError` per bad one (bad JSON, bad UTF-8, wrong
field count), so the caller may skip it; it *raises* when the rest of the file cannot be trusted
(unbalanced CSV quote, a JSON array that does not parse).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import InputError, WorkbenchError
from workbench.safeload import MAX_RECORD_BYTES, json_loads
from workbench.safeopen import MAX_DATA_FILE_BYTES, arrow_decoded_bytes, check_regular, read_input, text_columns

#: File extension -> container name.
EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_SURROGATE = re.compile("[\udc80-\udcff]")
# One CSV field at most one record's worth (csv's own default is 128 KiB, too small for long answers; no limit
# at all let a 300 MB field through).
csv.field_size_limit(MAX_RECORD_BYTES)
MAX_PROBE_FILE_BYTES = MAX_DATA_FILE_BYTES

#: A whole .json file (an array of probes) may hold this many values: 10 million, about 1M probes.
_WHOLE_FILE_NODES = 10_000_000


@dataclass(frozen=True)
class Record:
    """One source row: its 1-based line (record start for multi-line CSV; row number for Parquet)."""

    line: int
    data: Mapping[str, Any]


Item = Record | InputError


def container_for(path: Path) -> str:
    """The container named by the file extension."""
    try:
        return EXTENSIONS[path.suffix.lower()]
    except KeyError:
        raise WorkbenchError(
            f"{path}: cannot tell the file type from the extension `{path.suffix or '(none)'}`; "
            f"use one of {', '.join(sorted(EXTENSIONS))} or name it with --format"
        ) from None


def read_records(path: Path, container: str) -> Iterator[Item]:
    """Records of a local file; raises WorkbenchError when the file is missing, empty or unreadable."""
    if not path.exists():
        raise WorkbenchError(f"{path}: no such file")
    if container == "parquet":
        return _parquet(path)
    try:  # a regular file only, its size checked before reading, read in bounded chunks (workbench.safeopen)
        raw = read_input(path, max_bytes=MAX_PROBE_FILE_BYTES, what="probe file")
    except OSError as e:
        raise WorkbenchError(f"{path}: cannot read: {e.strerror or e}") from None
    if not raw.strip() or raw.strip() == codecs.BOM_UTF8:
        raise WorkbenchError(f"{path}: the file is empty")
    if container == "jsonl":
        return _jsonl(path, raw)
    if container == "json":
        return _json(path, raw)
    if container in ("csv", "tsv"):
        return _csv(path, raw, "," if container == "csv" else "\t")
    raise WorkbenchError(f"{path}: cannot read `{container}` files")


def _bad_utf8(text: str) -> str | None:
    """Text decoded with surrogateescape keeps each bad byte as a lone surrogate."""
    m = _SURROGATE.search(text)
    return f"not valid UTF-8 (byte 0x{ord(m.group()) - 0xDC00:02x})" if m else None


def _decode(raw: bytes) -> str:
    return raw.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="surrogateescape")


def _jsonl(path: Path, raw: bytes) -> Iterator[Item]:
    for n, chunk in enumerate(raw.removeprefix(codecs.BOM_UTF8).split(b"\n"), 1):
        if not chunk.strip():
            continue
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as e:
            yield InputError(
                path, n, None, f"not valid UTF-8 (byte 0x{chunk[e.start]:02x} at column {e.start + 1})"
            )
            continue
        try:
            value = json_loads(text)
        except json.JSONDecodeError as e:
            yield InputError(path, n, None, f"bad JSON: {e.msg} at column {e.colno}")
            continue
        except ValueError as e:
            yield InputError(path, n, None, str(e))
            continue
        if isinstance(value, dict):
            yield Record(n, value)
        else:
            yield InputError(path, n, None, f"expected a JSON object, got {type(value).__name__}")


def _json(path: Path, raw: bytes) -> Iterator[Item]:
    """A JSON array, {"Data": [...]} (TriviaQA), or JSON Lines in a .json file (HaluEval, PopQA)."""
    text = _decode(raw)
    start = len(text) - len(text.lstrip())
    # Every value but a container's first follows a comma: this bound is known before parsing, which is what
    # keeps a 60 MB array of zeros (30M values, 3.9 GB once parsed) from ever being parsed.
    if text.count(",") + text.count("[") + text.count("{") + 1 > _WHOLE_FILE_NODES:
        first = text[start:].split("\n", 1)[0]
        if text.startswith("{", start) and _parses(first):
            return _jsonl(path, raw)
        raise InputError(path, None, None, f"a JSON document of more than {_WHOLE_FILE_NODES:,} values; write "
                                           "it as JSON Lines (one probe per line)")
    try:
        whole = json_loads(text, max_bytes=None, max_nodes=_WHOLE_FILE_NODES)
    except json.JSONDecodeError as e:
        first = text[start:].split("\n", 1)[0]
        if text.startswith("{", start) and _parses(first):
            return _jsonl(path, raw)
        raise InputError(path, e.lineno, None, f"bad JSON: {e.msg} at column {e.colno}") from None
    except ValueError as e:
        raise InputError(path, None, None, str(e)) from None
    if isinstance(whole, dict):
        key = next((k for k, v in whole.items() if k.lower() == "data" and isinstance(v, list)), None)
        if key is None:  # one object (maybe pretty-printed): a single record
            bad = _bad_utf8(text)
            line = text.count("\n", 0, start) + 1
            return iter([InputError(path, line, None, bad) if bad else Record(line, whole)])
        start = _member_pos(text, start, key)
    elif not isinstance(whole, list):
        raise InputError(path, 1, None, f"expected a JSON array or object, got {type(whole).__name__}")
    return _array_items(path, text, start)


def _parses(line: str) -> bool:
    try:
        return isinstance(json_loads(line), dict)
    except ValueError:
        return False


def _ws(text: str, pos: int) -> int:
    """Offset of the first non-whitespace character at or after `pos`."""
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _member_pos(text: str, pos: int, key: str) -> int:
    """Offset of the value of `key` in the (valid) JSON object starting at `pos`."""
    dec = json.JSONDecoder()
    pos = _ws(text, pos + 1)
    while True:
        name, pos = dec.raw_decode(text, pos)
        pos = _ws(text, _ws(text, pos) + 1)
        if name == key:
            return pos
        _, pos = dec.raw_decode(text, pos)
        pos = _ws(text, _ws(text, pos) + 1)


def _array_items(path: Path, text: str, pos: int) -> Iterator[Item]:
    """Items of the (valid) JSON array starting at `pos`, each with the line it starts on."""
    dec = json.JSONDecoder()
    line, counted = 1, 0
    pos = _ws(text, pos + 1)
    while not text.startswith("]", pos):
        value, end = dec.raw_decode(text, pos)
        line, counted = line + text.count("\n", counted, pos), pos
        bad = _bad_utf8(text[pos:end])
        if bad:
            yield InputError(path, line, None, bad)
        elif isinstance(value, dict):
            yield Record(line, value)
        else:
            yield InputError(path, line, None, f"expected a JSON object, got {type(value).__name__}")
        pos = _ws(text, end)
        if text.startswith(",", pos):
            pos = _ws(text, pos + 1)


def _csv(path: Path, raw: bytes, delimiter: str) -> Iterator[Item]:
    reader = csv.reader(io.StringIO(_decode(raw), newline=""), delimiter=delimiter, strict=True)
    try:
        header = [h.strip() for h in next(reader)]
    except csv.Error as e:
        raise InputError(path, 1, None, f"malformed header: {e}") from None
    bad = _bad_utf8(delimiter.join(header))
    if bad:
        raise InputError(path, 1, None, f"header: {bad}")
    seen = set()
    for name in header:
        if not name or name.lower() in seen:
            raise InputError(path, 1, name or None, "blank column name" if not name else "duplicate column")
        seen.add(name.lower())
    return _csv_rows(path, reader, header, delimiter)


def _csv_rows(path: Path, reader: Any, header: list[str], delimiter: str) -> Iterator[Item]:
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise InputError(path, start, None, f"malformed CSV: {e} (an unclosed quote?)") from None
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != len(header):
            sep = "tab" if delimiter == "\t" else f"`{delimiter}`"
            yield InputError(
                path,
                start,
                None,
                f"{len(row)} fields, the header has {len(header)} (an unquoted {sep} or a missing quote?)",
            )
            continue
        bad = next(((name, b) for name, v in zip(header, row, strict=True) if (b := _bad_utf8(v))), None)
        if bad:
            yield InputError(path, start, bad[0], bad[1])
        else:
            yield Record(start, dict(zip(header, row, strict=True)))


def _parquet(path: Path) -> Iterator[Item]:
    """Row groups read one at a time, each checked against the decoded-size cap before it is turned into
    rows: a few hundred bytes of dictionary-encoded Parquet can decode to gigabytes."""
    import pyarrow.parquet as pq

    try:
        size = check_regular(path, what="probe file").st_size
        if size > MAX_PROBE_FILE_BYTES:
            raise WorkbenchError(f"{path}: {size:,} bytes; a probe file may be at most {MAX_PROBE_FILE_BYTES:,}")
        # Text columns stay dictionary arrays when read, so their decoded size is counted before it exists.
        pf = pq.ParquetFile(path, read_dictionary=text_columns(pq.read_schema(path)))
        meta = pf.metadata
    except WorkbenchError:
        raise
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise WorkbenchError(f"{path}: could not read Parquet: {e}") from None
    if meta.num_rows == 0:
        raise WorkbenchError(f"{path}: the file is empty")
    declared = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if declared > MAX_PROBE_FILE_BYTES:
        raise WorkbenchError(f"{path}: {declared:,} bytes once decoded; a probe file may be at most "
                             f"{MAX_PROBE_FILE_BYTES:,}")
    return _parquet_rows(path, pf)


def _parquet_rows(path: Path, pf: Any) -> Iterator[Item]:
    decoded, line = 0, 0
    try:
        for batch in pf.iter_batches(batch_size=1024):
            decoded += sum(arrow_decoded_bytes(col) for col in batch.columns)
            if decoded > MAX_PROBE_FILE_BYTES:
                raise WorkbenchError(f"{path}: more than {MAX_PROBE_FILE_BYTES:,} bytes once decoded (row "
                                     f"{line + batch.num_rows}); a probe file may be at most that")
            for row in batch.to_pylist():
                line += 1
                yield Record(line, row)
    except WorkbenchError:
        raise
    except Exception as e:  # a damaged page surfaces only when its batch is read
        raise WorkbenchError(f"{path}: could not read Parquet after row {line}: {e}") from None

"""Build the corpus index: streamed, committed in batches, resumable after a kill.

Each batch is one transaction that inserts the documents, indexes them and moves the checkpoint
(rows consumed, reader position, skipped count), so after a SIGKILL the index holds exactly the
committed batches and the checkpoint says where to read on: every row ends up indexed once.
The source's identity (path, size + mtime, field names) is kept too: an unchanged corpus is not
indexed again, and a changed one is refused until --rebuild.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.attribution.corpus import BadRow, Corpus, Doc, Position, open_corpus
from workbench.attribution.index import (
    DEFAULT_TOKENIZER,
    SCHEMA_VERSION,
    Tokenizer,
    check_tokenizer,
    read_meta,
    register_functions,
    schema,
)
from workbench.errors import InputError, WorkbenchError


@dataclass(frozen=True)
class BuildReport:
    rows_added: int  # documents indexed by this call
    rows_total: int  # documents in the index now
    skipped: int  # bad rows skipped over the whole build (with skip_bad)
    resumed_from: int | None  # source rows already consumed when this call resumed; None if fresh
    seconds: float
    up_to_date: bool = False  # the index already held this unchanged corpus: nothing was done
    source: str = ""
    index: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Batch:
    """Documents to write together, and the checkpoint that is true once they are written."""

    docs: list[Doc]
    consumed: int  # source rows consumed, good and bad, up to the end of this batch
    cursor: Position  # where reading resumes after this batch
    skipped: int  # bad rows skipped since the previous batch (skip_bad)


def batches(src: Corpus, cursor: Position, consumed: int, batch_size: int, skip_bad: bool) -> Iterator[Batch]:
    """The source's rows from `cursor` on (`consumed` rows already read), in batches of `batch_size`
    documents; both index builders write one batch at a time and checkpoint its `consumed` / `cursor`.

    Contract: every row is in exactly one batch, as a document or in `skipped`, so a build resumed from any
    batch's cursor reads each row once. A bad row without `skip_bad`: the rows before it come as a batch
    first (possibly empty), then its InputError is raised, so a resume from that batch starts at the bad row
    and names it again. The last batch may be empty (it carries the trailing skips)."""
    docs: list[Doc] = []
    skipped = 0
    for item in src.read(cursor):
        if isinstance(item, BadRow):
            if not skip_bad:
                yield Batch(docs, consumed, cursor, skipped)  # earlier rows first
                raise item.error
            skipped += 1
        else:
            docs.append(item)
        consumed += 1
        cursor = item.after
        if len(docs) >= batch_size:
            yield Batch(docs, consumed, cursor, skipped)
            docs, skipped = [], 0
    yield Batch(docs, consumed, cursor, skipped)


def build_index(
    corpus: str | Path,
    index_path: str | Path,
    *,
    text_field: str = "text",
    id_field: str = "id",
    skip_bad: bool = False,
    rebuild: bool = False,
    batch_size: int = 10_000,
    progress: Callable[[int], None] | None = None,
    tokenizer: Tokenizer = DEFAULT_TOKENIZER,
    follow_symlinks: bool = False,
) -> BuildReport:
    """Index `corpus` into `index_path`; resume a stopped build; no-op when already built.

    `progress` is called after every committed batch with the source rows consumed so far. `tokenizer`
    (index.TOKENIZERS): "chars" (default) finds words in every script; the others are there to be measured.
    An index built with another tokenizer counts as another corpus (--rebuild)."""
    check_tokenizer(tokenizer)
    t0 = time.perf_counter()
    src = open_corpus(corpus, text_field=text_field, id_field=id_field, follow_symlinks=follow_symlinks)
    identity = {"label": src.label, "kind": src.kind, "fingerprint": src.fingerprint(),
                "text_field": text_field, "id_field": id_field}
    if tokenizer != DEFAULT_TOKENIZER:  # the default adds no key: identities stay as schema 1 wrote them
        identity["tokenizer"] = tokenizer
    index_path = Path(index_path)
    if rebuild:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{index_path}{suffix}").unlink(missing_ok=True)
    index_path.parent.mkdir(parents=True, exist_ok=True)
    con = _connect(index_path)
    try:
        meta = _prepare(con, index_path, identity, tokenizer)
        ck = meta["checkpoint"]
        source, index = src.label, str(index_path)
        if meta.get("complete"):
            return BuildReport(0, meta["rows"], ck["skipped"], None, time.perf_counter() - t0,
                               up_to_date=True, source=source, index=index)
        resumed_from = ck["rows_done"] or None
        before = meta["rows"]
        chars = meta.get("tokenizer", DEFAULT_TOKENIZER) == "chars"
        rows = _Writer(con, src, skip_bad, ck, before, progress, chars).run(batch_size)
        _finish(con, rows)
        return BuildReport(rows - before, rows, ck["skipped"], resumed_from, time.perf_counter() - t0,
                           source=source, index=index)
    except sqlite3.OperationalError as e:
        if "locked" in str(e):
            raise WorkbenchError(f"{index_path} is being written by another build; wait for it") from e
        if "full" in str(e) or "disk I/O" in str(e) or "readonly" in str(e):
            raise WorkbenchError(f"{index_path}: {e}; every committed batch is kept: make room and run the same "
                                 "command again to resume") from None
        raise
    finally:
        con.close()


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit mode: transactions are opened and closed explicitly, one per batch.
    con = sqlite3.connect(path, isolation_level=None)
    register_functions(con)
    try:
        con.execute("PRAGMA journal_mode=WAL")  # a commit is one sequential append: fast, kill-safe
    except sqlite3.DatabaseError as e:
        con.close()
        raise WorkbenchError(f"{path} is not a corpus index ({e}); pass --rebuild to replace it") from e
    con.execute("PRAGMA synchronous=NORMAL")  # survives a killed process; only a power cut could cost a batch
    con.execute("PRAGMA cache_size=-65536")  # 64 MiB: keeps the doc_id UNIQUE index hot
    return con


def _prepare(con: sqlite3.Connection, path: Path, identity: dict[str, Any], tokenizer: Tokenizer) -> dict[str, Any]:
    """The index's meta, creating the schema for a fresh file; refuses a different corpus."""
    meta: dict[str, Any]
    fresh = con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    if fresh:
        meta = {"schema": SCHEMA_VERSION, "source": identity, "rows": 0, "complete": False,
                "checkpoint": {"rows_done": 0, "pos": 0, "line": 0, "skipped": 0},
                "started_at": _now(), "tokenizer": tokenizer}
        # Schema and meta in one transaction: a kill here leaves an empty file, never a half one.
        con.executescript(f"BEGIN IMMEDIATE; {schema(tokenizer)}")
        con.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
        con.execute("COMMIT")
        return meta
    try:
        meta = read_meta(con)
    except sqlite3.DatabaseError as e:
        raise WorkbenchError(f"{path} is not a corpus index ({e}); pass --rebuild to replace it") from e
    if meta.get("schema") != SCHEMA_VERSION:
        raise WorkbenchError(f"{path} has index schema {meta.get('schema')}, not {SCHEMA_VERSION}; "
                             "pass --rebuild")
    old = meta["source"]
    if old != identity and not meta.get("complete") and meta["checkpoint"]["rows_done"] == 0 \
            and meta.get("tokenizer") == tokenizer:
        # A build that failed before its first batch (say, a wrong column name) holds nothing
        # to protect: retrying with other settings needs no --rebuild.
        meta["source"] = identity
        con.execute("UPDATE meta SET value = ? WHERE key = 'source'", (json.dumps(identity),))
        return meta
    if old != identity:
        names = {"label": "source path", "kind": "format", "fingerprint": "size/mtime",
                 "text_field": "field names", "id_field": "field names", "tokenizer": "tokenizer"}
        changed = ", ".join(dict.fromkeys(names[k] for k in {**old, **identity} if old.get(k) != identity.get(k)))
        state = "built" if meta.get("complete") else "partly built"
        raise WorkbenchError(
            f"{path} was {state} from {old['label']} ({old['kind']}, fields {old['id_field']!r}/"
            f"{old['text_field']!r}); the corpus differs now ({changed} changed). Pass --rebuild to "
            f"index {identity['label']} from scratch."
        )
    return meta


class _Writer:
    """Reads the source from the checkpoint on and commits it batch by batch."""

    def __init__(self, con: sqlite3.Connection, src: Corpus, skip_bad: bool, ck: dict[str, Any],
                 rows: int, progress: Callable[[int], None] | None, chars: bool) -> None:
        self.con, self.src, self.skip_bad, self.ck, self.rows = con, src, skip_bad, ck, rows
        self.chars = chars
        self.progress = progress

    def run(self, batch_size: int) -> int:
        ck = self.ck
        for batch in batches(self.src, Position(ck["pos"], ck["line"]), ck["rows_done"], batch_size, self.skip_bad):
            self._flush(batch)
        return self.rows

    def _flush(self, batch: Batch) -> None:
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        try:
            last = con.execute("SELECT coalesce(max(rid), 0) FROM docs").fetchone()[0]
            self.ck["skipped"] += batch.skipped
            added = self._insert(batch.docs)
            # Index the new rows in one statement: FTS5 builds one segment per batch in C. The `chars`
            # schema indexes them through its view, split as its queries are.
            src = "docs_chars" if self.chars else "docs"
            con.execute(f"INSERT INTO fts(rowid, text) SELECT rid, text FROM {src} WHERE rid > ?", (last,))
            self.rows += added
            self.ck.update(rows_done=batch.consumed, pos=batch.cursor.pos, line=batch.cursor.line)
            con.execute("UPDATE meta SET value = ? WHERE key = 'checkpoint'", (json.dumps(self.ck),))
            con.execute("UPDATE meta SET value = ? WHERE key = 'rows'", (json.dumps(self.rows),))
            con.execute("COMMIT")
        except BaseException:
            # SQLite rolls back by itself on a full disk (SQLITE_FULL); a second ROLLBACK would raise "cannot
            # rollback" over the real cause.
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        if self.progress is not None:
            self.progress(batch.consumed)

    def _insert(self, batch: list[Doc]) -> int:
        """Insert a batch; on a duplicate id, redo it row by row to name (or skip) the duplicates."""
        sql = "INSERT INTO docs(doc_id, text) VALUES (?, ?)"
        self.con.execute("SAVEPOINT batch")
        try:
            self.con.executemany(sql, [(d.doc_id, d.text) for d in batch])
            self.con.execute("RELEASE batch")
            return len(batch)
        except sqlite3.IntegrityError:
            self.con.execute("ROLLBACK TO batch")
            self.con.execute("RELEASE batch")
        added = 0
        for d in batch:
            try:
                self.con.execute(sql, (d.doc_id, d.text))
                added += 1
            except sqlite3.IntegrityError:
                if not self.skip_bad:
                    raise InputError(self.src.label, d.line, self.src.id_field or None,
                                     f"duplicate id `{d.doc_id}`") from None
                self.ck["skipped"] += 1
        return added


def _finish(con: sqlite3.Connection, rows: int) -> None:
    """Merge the per-batch segments (faster queries), mark the index complete, and leave WAL mode
    so the finished index is one self-contained file."""
    con.execute("INSERT INTO fts(fts) VALUES ('optimize')")
    con.execute("BEGIN IMMEDIATE")
    con.execute("INSERT OR REPLACE INTO meta VALUES ('complete', 'true'), ('built_at', ?)",
                (json.dumps(_now()),))
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with contextlib.suppress(sqlite3.OperationalError):  # a reader holds the file open: stay in WAL
        con.execute("PRAGMA journal_mode=DELETE")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")

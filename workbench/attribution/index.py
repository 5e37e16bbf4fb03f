"""The corpus index of the data axis: SQLite FTS5, built once per workspace, queried by phrase.

Layout (one file, `WORKSPACE/corpus_index.sqlite`, apart from the main store so it can be rebuilt
or deleted alone):
    docs(rid, doc_id UNIQUE, text)    every document once; the UNIQUE index catches duplicate ids
    fts(text)                         FTS5 external-content index over docs.text (text is not stored twice)
    meta(key, value)                  JSON: source identity, checkpoint, built_at
Matching is on whole tokens (`unicode61 remove_diacritics 2`: case- and accent-insensitive), so
"Rome" never matches "Romeo"; every user string becomes a quoted FTS5 phrase, never query syntax.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from workbench.errors import WorkbenchError

INDEX_FILENAME = "corpus_index.sqlite"
SCHEMA_VERSION = 1
TOKENIZER = "unicode61 remove_diacritics 2"
SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE docs(rid INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, text TEXT NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5(text, content='docs', content_rowid='rid', tokenize='{TOKENIZER}');
"""
_SNIPPET_TOKENS = 24  # ~160 characters of short-sentence text around the match
_SNIPPET_MAX_CHARS = 200  # long tokens (URLs, numbers) can stretch a 24-token window


def default_index_path(workspace: str | Path) -> Path:
    return Path(workspace) / INDEX_FILENAME


@dataclass(frozen=True)
class EvidenceRow:
    doc_id: str
    snippet: str


@dataclass(frozen=True)
class Cooccurrence:
    count: int  # every matching document
    rows: tuple[EvidenceRow, ...]  # the first `limit` of them, in corpus order


def fts_phrase(text: str) -> str | None:
    """`text` as one quoted FTS5 phrase (quotes doubled), or None when it holds no token at all.

    Inside double quotes FTS5 reads no operators (AND, OR, NOT, NEAR, *, ^, -, parentheses): the
    tokenizer just splits the string, so hostile text can only ever be a phrase to look for."""
    text = text.replace("\x00", " ")
    if not any(ch.isalnum() for ch in text):
        return None  # nothing a unicode61 token could be made of: matches no document
    return '"' + text.replace('"', '""') + '"'


def read_meta(con: sqlite3.Connection) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM meta")}


class CorpusIndex:
    """A finished index, opened for queries only. Safe to share between threads (one lock per index)."""

    def __init__(self, con: sqlite3.Connection, path: Path, meta: dict[str, Any]) -> None:
        self._con, self.path, self._meta = con, path, meta
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: str | Path) -> CorpusIndex:
        path = Path(path)
        if path.is_dir():  # a workspace was given
            path = default_index_path(path)
        if not path.is_file():
            raise WorkbenchError(f"no corpus index at {path}; build one with `workbench index CORPUS`")
        try:
            # query_only rather than a mode=ro URI: a read-only open of a WAL file can fail when its
            # -shm file is absent, and query_only guards against writes just as well.
            con = sqlite3.connect(path, check_same_thread=False)
            con.execute("PRAGMA query_only=1")
            meta = read_meta(con)
        except sqlite3.DatabaseError as e:
            raise WorkbenchError(f"{path} is not a corpus index ({e}); rebuild it with --rebuild") from e
        if meta.get("schema") != SCHEMA_VERSION:
            raise WorkbenchError(f"{path}: index schema {meta.get('schema')} is not {SCHEMA_VERSION}; "
                                 "rebuild it with --rebuild")
        if not meta.get("complete"):
            done = meta.get("checkpoint", {}).get("rows_done", 0)
            raise WorkbenchError(
                f"{path}: the index build stopped after {done} rows; run `workbench index` on "
                f"{meta.get('source', {}).get('label', 'the corpus')} again to finish it"
            )
        return cls(con, path, meta)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> CorpusIndex:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def stats(self) -> dict[str, object]:
        src = self._meta["source"]
        return {
            "rows": self._meta["rows"],
            "skipped": self._meta["checkpoint"]["skipped"],
            "source": src["label"],
            "kind": src["kind"],
            "text_field": src["text_field"],
            "id_field": src["id_field"],
            "built_at": self._meta["built_at"],
            "path": str(self.path),
        }

    def count(self, phrase: str) -> int:
        q = fts_phrase(phrase)
        if q is None:
            return 0
        with self._lock:
            return self._count(q)

    def cooccur(self, subject: str, answer: str, *, limit: int = 5) -> Cooccurrence:
        """Documents holding both phrases (anywhere in the document, in either order)."""
        with self._lock:
            return self._cooccur(subject, answer, limit)

    def cooccur_many(self, pairs: Sequence[tuple[str, str]], *, limit: int = 5) -> list[Cooccurrence]:
        """`cooccur` for many pairs: one lock, one read transaction (a consistent snapshot and no
        per-query lock churn), and each distinct pair looked up once."""
        done: dict[tuple[str, str], Cooccurrence] = {}
        with self._lock:
            self._con.execute("BEGIN")
            try:
                for pair in pairs:
                    if pair not in done:
                        done[pair] = self._cooccur(pair[0], pair[1], limit)
            finally:
                self._con.execute("COMMIT")
        return [done[p] for p in pairs]

    def _count(self, match: str) -> int:
        row = self._con.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (match,)).fetchone()
        return int(row[0])

    def _cooccur(self, subject: str, answer: str, limit: int) -> Cooccurrence:
        s, a = fts_phrase(subject), fts_phrase(answer)
        if s is None or a is None:
            return Cooccurrence(0, ())
        match = f"{s} AND {a}"
        rows = tuple(
            EvidenceRow(doc_id, _clip(snip))
            for doc_id, snip in self._con.execute(
                "SELECT d.doc_id, snippet(fts, 0, '', '', '…', ?) FROM fts JOIN docs d ON d.rid = fts.rowid"
                " WHERE fts MATCH ? ORDER BY fts.rowid LIMIT ?",
                (_SNIPPET_TOKENS, match, max(limit, 0)),
            )
        )
        # Most pairs are rare: when fewer than `limit` rows came back they are all there is,
        # and the count query (a second pass over the doclists) is not needed.
        count = len(rows) if len(rows) < limit else self._count(match)
        return Cooccurrence(count, rows)


def _clip(snippet: str) -> str:
    return snippet if len(snippet) <= _SNIPPET_MAX_CHARS else snippet[: _SNIPPET_MAX_CHARS - 1] + "…"

"""The corpus index of the data axis: SQLite FTS5, built once per workspace, queried by phrase.

Layout (one file, `WORKSPACE/corpus_index.sqlite`, apart from the main store so it can be rebuilt
or deleted alone):
    docs(rid, doc_id UNIQUE, text)    every document once; the UNIQUE index catches duplicate ids
    fts(text)                         FTS5 external-content index over docs.text (text is not stored twice)
    meta(key, value)                  JSON: source identity, checkpoint, built_at
Matching is on whole tokens (`unicode61 remove_diacritics 2`: case- and accent-insensitive), so
"Rome" never matches "Romeo"; every user string becomes a quoted FTS5 phrase, never query syntax.

Scripts without spaces: unicode61 keeps a run of Chinese characters as one token, so 巴黎 could never be
found in 法国的首都是巴黎. The default tokenizer (`chars`) therefore indexes every Han, kana, Thai, Lao,
Khmer, Myanmar and Hangul character as a token of its own (a zero-width space is put around each before
unicode61 sees it; queries are split the same way), and a word is a phrase of adjacent characters: any
length matches, 2-character words included. FTS5's `trigram` tokenizer cannot match a query shorter
than 3 characters (most Chinese words are 2) and makes "Rome" match "Romeo"; it is kept only as a
measured alternative (`bench/index_throughput.py`). The FTS5 table reads its content through the view
`docs_chars`, which applies the same split with the SQL function `wb_chars` (registered on every
connection), so snippets line up with the index; the documents themselves are stored unchanged.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, get_args

from workbench.errors import WorkbenchError, unknown_name
from workbench.grading.language import INDEX_CHAR

INDEX_FILENAME = "corpus_index.sqlite"
SCHEMA_VERSION = 2  # 2: tokenizer choice, per-character tokens for scripts without spaces

Tokenizer = Literal["chars", "unicode61", "trigram"]
#: Tokenizer name -> (FTS5 tokenize argument, split scripts without spaces into characters first).
TOKENIZERS: dict[Tokenizer, tuple[str, bool]] = {
    "chars": ("unicode61 remove_diacritics 2", True),  # the default: words, and characters where no spaces
    "unicode61": ("unicode61 remove_diacritics 2", False),  # schema 1's behaviour: CJK runs are one token
    "trigram": ("trigram", False),  # substrings of 3+ characters; no whole-word matching
}
DEFAULT_TOKENIZER: Tokenizer = "chars"
CHARS_FUNCTION = "wb_chars"
_ZWSP = "\u200b"  # a separator to unicode61 (category Cf), invisible in snippets, removed from them anyway


def split_chars(text: str) -> str:
    """Each character of a script without spaces (and each Hangul syllable) set apart for unicode61."""
    if not INDEX_CHAR.search(text):
        return text  # most documents of most corpora: no copy, one regex scan
    return INDEX_CHAR.sub(lambda m: _ZWSP + m.group() + _ZWSP, text)


def schema(tokenizer: Tokenizer) -> str:
    """The index's tables for a tokenizer (see TOKENIZERS)."""
    tokenize, chars = TOKENIZERS[tokenizer]
    content = "docs_chars" if chars else "docs"
    view = f"CREATE VIEW docs_chars AS SELECT rid, {CHARS_FUNCTION}(text) AS text FROM docs;" if chars else ""
    return f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE docs(rid INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, text TEXT NOT NULL);
{view}
CREATE VIRTUAL TABLE fts USING fts5(text, content='{content}', content_rowid='rid', tokenize='{tokenize}');
"""


def register_functions(con: sqlite3.Connection) -> None:
    """The SQL function the `chars` schema's view calls; needed on every connection to an index."""
    con.create_function(CHARS_FUNCTION, 1, split_chars, deterministic=True)


def check_tokenizer(name: str) -> Tokenizer:
    """`name` as a Tokenizer, or an error with "Did you mean ...?"."""
    for known in get_args(Tokenizer):
        if name == known:
            return known  # type: ignore[no-any-return]
    raise unknown_name("index tokenizer", name, get_args(Tokenizer))


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


def fts_phrase(text: str, *, chars: bool = True) -> str | None:
    """`text` as one quoted FTS5 phrase (quotes doubled), or None when it holds no token at all;
    with `chars`, split like the documents of a `chars` index.

    Inside double quotes FTS5 reads no operators (AND, OR, NOT, NEAR, *, ^, -, parentheses): the
    tokenizer just splits the string, so hostile text can only ever be a phrase to look for."""
    text = text.replace("\x00", " ")
    if not any(ch.isalnum() for ch in text):
        return None  # nothing a unicode61 token could be made of: matches no document
    if chars:
        text = split_chars(text)
    return '"' + text.replace('"', '""') + '"'


def read_meta(con: sqlite3.Connection) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM meta")}


class CorpusIndex:
    """A finished index, opened for queries only. Safe to share between threads (one lock per index)."""

    def __init__(self, con: sqlite3.Connection, path: Path, meta: dict[str, Any]) -> None:
        self._con, self.path, self._meta = con, path, meta
        self._lock = threading.Lock()
        self.tokenizer: Tokenizer = check_tokenizer(meta.get("tokenizer", DEFAULT_TOKENIZER))
        self._chars = TOKENIZERS[self.tokenizer][1]

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
            register_functions(con)
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
            "tokenizer": self.tokenizer,
            "path": str(self.path),
        }

    def doc_rids(self) -> list[int]:
        """Every document's row id, ascending (what a caller samples documents by)."""
        with self._lock:
            return [int(r[0]) for r in self._con.execute("SELECT rid FROM docs ORDER BY rid")]

    def doc_text(self, rid: int) -> str:
        """The text of the document with row id `rid`, as indexed."""
        with self._lock:
            row = self._con.execute("SELECT text FROM docs WHERE rid = ?", (rid,)).fetchone()
        if row is None:
            raise KeyError(rid)
        return str(row[0])

    def count(self, phrase: str) -> int:
        q = fts_phrase(phrase, chars=self._chars)
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
        s, a = fts_phrase(subject, chars=self._chars), fts_phrase(answer, chars=self._chars)
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
    snippet = snippet.replace(_ZWSP, "")
    return snippet if len(snippet) <= _SNIPPET_MAX_CHARS else snippet[: _SNIPPET_MAX_CHARS - 1] + "…"

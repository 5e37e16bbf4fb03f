"""What the corpus-index tests share: a small corpus with hostile tokens, its index, and FTS5-hostile queries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.attribution import CorpusIndex, build_index

DOCS = [
    ("a", "Romeo met Juliet in Verona in 1743."),
    ("b", "Rome is the capital of Italy; New York is not."),
    ("c", "Zürich lies in Switzerland. York New is nonsense."),
    ("d", 'He said "AND" OR NOT NEAR(this, that) well-known x*y ^caret col:on (paren) end-'),
    ("e", "The Rome office opened in 1743 and closed in 1801."),
]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    lines = ((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def small_index(tmp_path: Path) -> CorpusIndex:
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": i, "text": t} for i, t in DOCS])
    build_index(corpus, tmp_path / "ix.sqlite")
    return CorpusIndex.open(tmp_path / "ix.sqlite")


HOSTILE = ['"', '""', "AND", "OR", "NOT", "NEAR(", "NEAR(this, that)", "*", "x*", "-", "end-", "^caret",
           "col:on", "(paren)", "", "   ", "a\x00b", 'He said "AND']

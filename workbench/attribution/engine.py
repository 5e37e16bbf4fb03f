"""The corpus-index contract of the data axis, and how a workspace's index is found.

Two engines implement it:
    fts5         `index.CorpusIndex`: SQLite FTS5 over documents; the embedded default for small corpora
                 (`WORKSPACE/corpus_index.sqlite`).
    infini-gram  `infinigram.InfiniGramIndex`: suffix arrays over the corpus's tokens (the model's own, or
                 folded UTF-8 bytes); pretraining scale (`WORKSPACE/corpus_index.infinigram/`).
Both give the same support/conflict semantics and evidence rows; `workbench attribute` opens whichever
the workspace (or --corpus) holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol, Self

from workbench.attribution.index import Cooccurrence, CorpusIndex, default_index_path
from workbench.errors import WorkbenchError

Engine = Literal["fts5", "infini-gram"]
ENGINES: tuple[Engine, ...] = ("fts5", "infini-gram")
INFINIGRAM_DIRNAME = "corpus_index.infinigram"


class CorpusEngine(Protocol):
    """What the data axis, the quality report, screening and span tracing ask of a corpus index.

    Phrases are user text (subjects, answers, spans of an answer), never query syntax. Matching is on
    whole words, case- and accent-insensitive, in either engine (infini-gram in token mode matches the
    model's tokens, see `infinigram`).
    """

    path: Path

    def stats(self) -> dict[str, object]:
        """At least `rows` (documents indexed), `source`, `built_at`, `path`; `engine` names the engine."""
        ...

    def count(self, phrase: str) -> int:
        """Documents holding `phrase` (0 when it holds no word)."""
        ...

    def cooccur(self, subject: str, answer: str, *, limit: int = 5) -> Cooccurrence:
        """Documents where both phrases occur (infini-gram: within its token window), with the first
        `limit` of them, in corpus order, as evidence rows (doc id + a snippet around the match)."""
        ...

    def cooccur_many(self, pairs: Sequence[tuple[str, str]], *, limit: int = 5) -> list[Cooccurrence]:
        """`cooccur` for each pair, in order."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None: ...


def infinigram_dir(workspace: str | Path) -> Path:
    return Path(workspace) / INFINIGRAM_DIRNAME


def engine_of(path: str | Path) -> Engine | None:
    """The engine of an index at `path` (a .sqlite file or an infini-gram directory); None if neither."""
    p = Path(path)
    if p.is_file() and p.suffix.lower() in (".sqlite", ".sqlite3", ".db"):
        return "fts5"
    if p.is_dir() and (p / "meta.json").is_file() and (p / "tokenized.0").exists():
        return "infini-gram"
    return None


def open_engine(path: str | Path) -> CorpusEngine:
    """Open the index at `path`: an index file or directory, or a workspace holding exactly one."""
    p = Path(path)
    if engine_of(p) is None and p.is_dir():
        found = [q for q in (default_index_path(p), infinigram_dir(p)) if engine_of(q)]
        if len(found) > 1:
            raise WorkbenchError(f"{p} holds two corpus indexes ({found[0].name}, {found[1].name}); pass "
                                 "--corpus with the one to use")
        if not found:
            raise WorkbenchError(f"no corpus index in {p}; build one with `workbench index CORPUS`")
        p = found[0]
    if engine_of(p) == "infini-gram":
        from workbench.attribution.infinigram import InfiniGramIndex

        return InfiniGramIndex.open(p)
    return CorpusIndex.open(p)


def find_workspace_index(workspace: str | Path) -> CorpusEngine | None:
    """The workspace's index (either engine), or None when it has none."""
    ws = Path(workspace)
    if not any(engine_of(q) for q in (default_index_path(ws), infinigram_dir(ws))):
        return None
    return open_engine(ws)

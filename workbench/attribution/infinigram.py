"""The data axis at pretraining scale: infini-gram (Liu et al. 2024) suffix arrays over the corpus's tokens,
built by the `infini-gram` wheel's Rust indexer (`infinigram_build.py`) and searched by its C++ engine.

Layout (`WORKSPACE/corpus_index.infinigram/`; the file names are the ones the engine reads):
    meta.json            engine, schema, source identity, token space, window, rows, checkpoint, complete
    tokenized.0          the corpus: per document, a separator token (all bits set) then its tokens
    offset.0             u64 byte offset of each document in tokenized.0
    metadata.0, metaoff.0  one JSON line per document ({"id": ...}) and its u64 offset
    table.0              the suffix array: `ratio`-byte little-endian pointers into tokenized.0, in suffix order
    tokenizer/           the model's tokenizer, copied (token space `model`): the index needs no model

Two token spaces (measured against each other in bench/index_engines.py and the README):
    bytes   folded UTF-8: NFKD, accents dropped, case folded, each punctuation mark and each character of
            an unspaced script (CJK, Thai, ...) a word of its own, words joined by one space, the document
            padded with a space each side. A phrase is looked up as " folded phrase ": whole words, case- and
            accent-insensitive, any script (what FTS5's unicode61 matches).
    model   the model's own token ids (u16; u32 past 65,535 ids). A phrase is looked up under its
            tokenizations with and without a leading space, as written, lower-cased and title-cased (BPE
            gives each its own tokens); a phrase the tokenizer can only write with its unknown token
            matches nothing.

Lookups: the engine's `find` gives a phrase's suffix-array range in O(log N); the range's pointers are read
from table.0 and mapped to documents through offset.0 (numpy, vectorized). Co-occurrence is computed from
both phrases' pointers: the nearest occurrence on each side decides, so it is exact. (The engine's own
`find_cnf` misses pairs when its window spans a document boundary: on five short rows it found 2 of the 3
co-occurring documents at window 100 and a different 2 at window 1000; tests/test_infinigram.py.)
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from workbench.attribution.index import Cooccurrence, EvidenceRow
from workbench.errors import MissingDependencyError, WorkbenchError

PIP_LINE = "pip install 'hallucination-workbench[infinigram]'   # or: pip install infini-gram==2.6.0"
SCHEMA_VERSION = 1
Space = Literal["bytes", "model"]
#: Pointers read per phrase; a phrase more frequent than this is sampled evenly (counts then estimated).
POSITIONS_MAX = 2_000_000
_SNIPPET_BYTES = 90  # context each side of the match (bytes space; x token width for model tokens)
_SNIPPET_MAX_CHARS = 200  # as FTS5's snippets
# Scripts written without spaces between words: each character is a word (as grading does).
_UNSPACED = ("\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
             "\uf900-\ufaff\uff66-\uff9f")
_WORDS = re.compile(rf"[{_UNSPACED}]|[^\W_{_UNSPACED}]+|[^\w\s]|_")
_MARKS = {cp: None for cp in range(0x10000) if unicodedata.combining(chr(cp))}


def import_engine() -> Any:
    try:
        from infini_gram import cpp_engine  # type: ignore[attr-defined]  # compiled module, no stubs
    except ImportError as e:
        raise MissingDependencyError("the infini-gram corpus index", PIP_LINE) from e
    return cpp_engine


def fold_many(texts: Sequence[str]) -> list[str]:
    """The bytes space's text of each input (see the module docstring). One regex pass over the whole batch
    (joined by NUL): 2.5x faster than per-row substitutions, measured on the bench corpus."""
    if not texts:
        return []
    t = "\x00".join(x.replace("\x00", " ") for x in texts)
    if not t.isascii():
        t = unicodedata.normalize("NFKD", t).translate(_MARKS)
    joined = " ".join(_WORDS.findall(t.casefold()))  # NUL is a "punctuation" word: it stays a separator
    return [" " + p.strip(" ") + " " if p.strip(" ") else " " for p in joined.split("\x00")]


def fold(text: str) -> str:
    return fold_many([text])[0]


def words(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the words of `text` (letters/digits runs, one per character of an
    unspaced script); what span tracing extends over."""
    return [(m.start(), m.end()) for m in re.finditer(rf"[{_UNSPACED}]|[^\W_{_UNSPACED}]+", text)]


class TokenSpace:
    """How text becomes the index's tokens. `width`: bytes per token; `sep`: the document separator."""

    def __init__(self, space: Space, width: int, tokenizer: Any = None) -> None:
        self.space, self.width, self.tok = space, width, tokenizer
        self.dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32}[width]
        self.sep_id = (1 << (8 * width)) - 1
        self.unk = getattr(tokenizer, "unk_token_id", None) if tokenizer is not None else None
        self._bounds: tuple[NDArray[np.bool_], NDArray[np.bool_]] | None = None

    @classmethod
    def for_index(cls, meta: dict[str, Any], path: Path) -> TokenSpace:
        if meta["space"] == "bytes":
            return cls("bytes", 1)
        from transformers import AutoTokenizer

        return cls("model", int(meta["token_width"]), AutoTokenizer.from_pretrained(path / "tokenizer"))

    def encode_docs(self, texts: Sequence[str]) -> list[bytes]:
        """Each document's tokens as bytes (little-endian), separator not included."""
        if self.space == "bytes":
            return [t.encode("utf-8") for t in fold_many(texts)]
        ids = self.tok(list(texts), add_special_tokens=False)["input_ids"]
        return [np.asarray(x, dtype=self.dtype).tobytes() for x in ids]

    def variants(self, phrase: str) -> list[list[int]]:
        """The token sequences `phrase` may appear as in the corpus (none when it holds no word)."""
        if not words(phrase):
            return []
        if self.space == "bytes":
            return [list(fold(phrase).encode("utf-8"))]
        forms = dict.fromkeys(f for p in dict.fromkeys([phrase, phrase.lower(), phrase.title()])
                              for f in (p, " " + p))
        seqs = [list(x) for x in self.tok(list(forms), add_special_tokens=False)["input_ids"]]
        seqs = [s for s in seqs if s and (self.unk is None or self.unk not in s)]
        uniq = [list(t) for t in dict.fromkeys(tuple(s) for s in seqs)]
        # A sequence holding another one is found by the shorter one already (e.g. "▁", "▁Paris" vs "▁Paris").
        return [s for s in uniq if not any(o != s and _contains(s, o) for o in uniq)]

    def boundaries(self) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """Per token id: (continues the previous word, ends in a letter or digit). A model's tokens cut words
        into pieces (" Romeo" may be " Rome" + "o"), so a phrase's tokens match whole words only where the
        token after them starts a new word, and, for a phrase tokenized without its leading space, where
        the token before ends one. Read from the token strings: WordPiece marks continuations with "##";
        byte-level BPE and SentencePiece mark word starts with "Ġ" / "▁" (a piece without the mark that
        starts with a letter continues a word); a word-level vocabulary has no pieces."""
        if self._bounds is None:
            toks = [t or "" for t in self.tok.convert_ids_to_tokens(list(range(len(self.tok))))]
            text = [self.tok.convert_tokens_to_string([t]) if t else "" for t in toks]
            marks = ("Ġ", "▁", "Ċ", " ")
            if any(t.startswith(marks[:2]) for t in toks):  # BPE / SentencePiece (a BPE vocab may hold "##")
                cont = [not t.startswith(marks) and x[:1].isalnum() for t, x in zip(toks, text, strict=True)]
            elif any(t.startswith("##") for t in toks):  # WordPiece
                cont = [t.startswith("##") for t in toks]
            else:  # word-level: every token is a word
                cont = [False] * len(toks)
            tail = [x[-1:].isalnum() for x in text]  # decoded: a byte-level "Ġ" is a space, not a letter
            self._bounds = np.array([*cont, False], dtype=bool), np.array([*tail, False], dtype=bool)
        return self._bounds

    def decode(self, data: bytes) -> str:
        if self.space == "bytes":
            return data.decode("utf-8", errors="ignore").strip()
        ids = np.frombuffer(data[: len(data) - len(data) % self.width], dtype=self.dtype).tolist()
        return str(self.tok.decode([i for i in ids if i != self.sep_id], skip_special_tokens=True)).strip()


def _contains(seq: list[int], sub: list[int]) -> bool:
    n = len(sub)
    return any(seq[i : i + n] == sub for i in range(len(seq) - n + 1))


@dataclass(frozen=True)
class _Hits:
    """Where a phrase occurs: sorted byte pointers (all, or an even sample) and the true occurrence count."""

    ptrs: NDArray[np.int64]
    total: int
    length: int  # bytes of the shortest variant (snippets centre on it)


def read_meta(path: Path) -> dict[str, Any]:
    try:
        meta: dict[str, Any] = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError) as e:
        raise WorkbenchError(f"{path} is not an infini-gram corpus index ({e}); rebuild it with --rebuild") from e
    return meta


class InfiniGramIndex:
    """A finished infini-gram index, opened for queries. Safe to share between threads (one lock)."""

    def __init__(self, path: Path, meta: dict[str, Any], space: TokenSpace) -> None:
        self.path, self._meta, self.space = path, meta, space
        cpp = import_engine()
        w = space.width
        engine_cls = {1: cpp.Engine_U8, 2: cpp.Engine_U16, 4: cpp.Engine_U32}[w]
        # Positional arguments of the C++ engine (infini_gram/engine.py passes the same): index dirs, eos id,
        # vocab size, version 4, load_to_ram, prefetch depths (ds, sa, od), bow ids, attribution block
        # size, precompute unigram logprobs, previous shards. Built directly because the Python wrapper
        # cannot build a u8 engine (it asserts eos < vocab, and the u8 engine takes a vocab of at most 255).
        self._engine = engine_cls([str(path)], space.sep_id, space.sep_id, 4, False, 1, 3, 3, set(), 512, False, {})
        # numpy memory maps: the OS pages in what lookups touch; nothing is loaded up front (1B documents
        # have 8 GB of offsets alone).
        self._ds: NDArray[np.uint8] = np.memmap(path / "tokenized.0", dtype=np.uint8, mode="r")
        self._sa: NDArray[np.uint8] = np.memmap(path / "table.0", dtype=np.uint8, mode="r")
        self._md: NDArray[np.uint8] = np.memmap(path / "metadata.0", dtype=np.uint8, mode="r")
        self._tk: NDArray[Any] = np.memmap(path / "tokenized.0", dtype=space.dtype, mode="r")  # as token ids
        self._od: NDArray[np.uint64] = np.memmap(path / "offset.0", dtype=np.uint64, mode="r")
        self._mo: NDArray[np.uint64] = np.memmap(path / "metaoff.0", dtype=np.uint64, mode="r")
        self._ratio = int(meta["ratio"])
        self._window = int(meta["window"]) * w  # in bytes; 0 = anywhere in the document
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: str | Path) -> InfiniGramIndex:
        path = Path(path)
        meta = read_meta(path)
        if meta.get("schema") != SCHEMA_VERSION or meta.get("engine") != "infini-gram":
            raise WorkbenchError(f"{path}: not an infini-gram index of schema {SCHEMA_VERSION}; rebuild it "
                                 "with --rebuild")
        if not meta.get("complete"):
            raise WorkbenchError(f"{path}: the index build stopped after {meta['checkpoint']['rows_done']} rows; "
                                 f"run `workbench index {meta['source']['label']} --engine infini-gram` again "
                                 "to finish it")
        return cls(path, meta, TokenSpace.for_index(meta, path))

    def close(self) -> None:
        """Drop the memory maps (the engine's own maps go with it)."""
        self._ds = self._sa = self._md = self._tk = np.zeros(0, np.uint8)
        self._od = self._mo = np.zeros(0, np.uint64)

    def __enter__(self) -> InfiniGramIndex:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def stats(self) -> dict[str, object]:
        m, src = self._meta, self._meta["source"]
        return {"rows": m["rows"], "skipped": m["checkpoint"]["skipped"], "source": src["label"],
                "kind": src["kind"], "text_field": src["text_field"], "id_field": src["id_field"],
                "built_at": m["built_at"], "path": str(self.path), "engine": "infini-gram",
                "space": m["space"], "tokenizer": m.get("tokenizer"), "tokens": m["tokens"], "window": m["window"]}

    # -- lookups ---------------------------------------------------------------------------------
    def _hits(self, phrase: str) -> _Hits | None:
        seqs = self.space.variants(phrase)
        if not seqs:
            return None
        parts, total = [], 0
        for ids in seqs:
            (lo, hi), = self._engine.find(input_ids=ids).segment_by_shard
            if hi - lo > POSITIONS_MAX:  # an even sample keeps the document estimate unbiased
                ptrs = self._pointers(np.linspace(lo, hi - 1, POSITIONS_MAX).astype(np.int64))
            else:
                r = self._ratio
                ptrs = self._as_offsets(np.asarray(self._sa[lo * r : hi * r]).reshape(-1, r))
            if self.space.space == "model" and len(ptrs):
                kept = self._whole_words(ptrs, ids)
                total += round((hi - lo) * len(kept) / len(ptrs))
                ptrs = kept
            else:
                total += hi - lo
            parts.append(ptrs)
        ptrs = np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        return _Hits(ptrs, total, min(len(s) for s in seqs) * self.space.width)

    def _whole_words(self, ptrs: NDArray[np.int64], ids: list[int]) -> NDArray[np.int64]:
        """The occurrences of token sequence `ids` that start and end on word boundaries (model space)."""
        cont, tail = self.space.boundaries()
        top = len(cont) - 1  # ids past the vocabulary (the separator) index the final False entry
        at = ptrs // self.space.width
        after = self._tk[np.minimum(at + len(ids), len(self._tk) - 1)].astype(np.int64)
        ok: NDArray[np.bool_] = ~cont[np.minimum(after, top)] | (at + len(ids) >= len(self._tk))
        if cont[min(ids[0], top)]:  # a phrase without its leading space: the word before must have ended
            before = self._tk[at - 1].astype(np.int64)
            ok &= ~tail[np.minimum(before, top)]
        return ptrs[ok]

    def _pointers(self, ranks: NDArray[np.int64]) -> NDArray[np.int64]:
        r = self._ratio
        return self._as_offsets(np.asarray(self._sa[(ranks[:, None] * r + np.arange(r)).ravel()]).reshape(-1, r))

    @staticmethod
    def _as_offsets(raw: NDArray[np.uint8]) -> NDArray[np.int64]:
        """Suffix-array entries (rows of `ratio` little-endian bytes) as byte offsets into tokenized.0."""
        out = np.zeros((len(raw), 8), dtype=np.uint8)
        out[:, : raw.shape[1]] = raw
        return out.view(np.int64).ravel()

    def _docs(self, ptrs: NDArray[np.int64]) -> NDArray[np.int64]:
        return (np.searchsorted(self._od, ptrs.astype(np.uint64), side="right") - 1).astype(np.int64)

    def count(self, phrase: str) -> int:
        with self._lock:
            h = self._hits(phrase)
        if h is None or not h.total:
            return 0
        docs = len(np.unique(self._docs(h.ptrs)))
        return docs if len(h.ptrs) == h.total else round(docs * h.total / len(h.ptrs))

    def cooccur(self, subject: str, answer: str, *, limit: int = 5) -> Cooccurrence:
        with self._lock:
            return self._cooccur(subject, answer, limit)

    def cooccur_many(self, pairs: Sequence[tuple[str, str]], *, limit: int = 5) -> list[Cooccurrence]:
        done: dict[tuple[str, str], Cooccurrence] = {}
        with self._lock:
            for pair in pairs:
                if pair not in done:
                    done[pair] = self._cooccur(pair[0], pair[1], limit)
        return [done[p] for p in pairs]

    def _cooccur(self, subject: str, answer: str, limit: int) -> Cooccurrence:
        s = self._hits(subject)
        a = s if answer == subject else self._hits(answer)  # (span tracing asks for one phrase's documents)
        if s is None or a is None or not len(s.ptrs) or not len(a.ptrs):
            return Cooccurrence(0, ())
        ds = self._docs(s.ptrs)
        ok = np.ones(len(ds), dtype=bool) if a is s else self._near(s.ptrs, ds, a.ptrs, self._docs(a.ptrs))
        hit_docs, first = np.unique(ds[ok], return_index=True)
        count = len(hit_docs)
        if len(s.ptrs) < s.total:  # the subject was sampled: scale the estimate
            count = round(count * s.total / len(s.ptrs))
        anchors = s.ptrs[ok][first[: max(limit, 0)]]
        rows = tuple(self._row(int(d), int(p), s.length) for d, p in zip(hit_docs[:limit], anchors, strict=False))
        return Cooccurrence(count, rows)

    def _near(self, sp: NDArray[np.int64], sd: NDArray[np.int64], ap: NDArray[np.int64],
              ad: NDArray[np.int64]) -> NDArray[np.bool_]:
        """For each subject pointer: is an answer pointer in the same document (and within the window)?
        Only the nearest answer on each side can qualify: farther ones are farther in the same direction."""
        i = np.searchsorted(ap, sp)
        ok = np.zeros(len(sp), dtype=bool)
        for j in (i - 1, i):
            valid = (j >= 0) & (j < len(ap))
            jj = np.clip(j, 0, len(ap) - 1)
            near = valid & (ad[jj] == sd)
            if self._window:
                near &= np.abs(ap[jj] - sp) <= self._window
            ok |= near
        return ok

    def _row(self, doc: int, ptr: int, needle: int) -> EvidenceRow:
        start = int(self._od[doc]) + self.space.width  # past the separator
        end = int(self._od[doc + 1]) if doc + 1 < len(self._od) else len(self._ds)
        ctx = _SNIPPET_BYTES * self.space.width
        lo, hi = max(start, ptr - ctx), min(end, ptr + needle + ctx)  # all multiples of the token width
        text = self.space.decode(self._ds[lo:hi].tobytes())
        text = ("…" if lo > start else "") + text + ("…" if hi < end else "")
        line_end = int(self._mo[doc + 1]) if doc + 1 < len(self._mo) else len(self._md)
        doc_id = str(json.loads(self._md[int(self._mo[doc]) : line_end].tobytes())["id"])
        return EvidenceRow(doc_id, text if len(text) <= _SNIPPET_MAX_CHARS else text[: _SNIPPET_MAX_CHARS - 1] + "…")

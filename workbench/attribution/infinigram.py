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
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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
_FIND_THREADS = 8  # concurrent engine finds in a batch (they wait more than they compute)
#: Up to this many finds run in the calling thread: a thread handoff cost more than a find (one lookup in the
#: model space makes ~8 finds: 1.5 ms waiting on the pool vs ~0.2 ms inline, 1M-row bench corpus).
_INLINE_FINDS = 16
_ENCODE_BATCH_MIN = 64  # fewer texts are encoded one by one: encode_batch's thread pool cost ~0.5 ms a call
_BATCH_PAIRS = 512  # pairs whose phrases are looked up together
#: Phrases whose hits are kept for the next lookups (least recently used dropped first), and the pointers
#: they may hold in all (8 bytes each: 32 MiB). The data axis asks for a probe's subject three times
#: (support, conflict pairs, its count) and for each wrong answer twice; measured in bench/index_lookups.py.
CACHE_PHRASES = 4096
CACHE_POINTERS = 4_000_000
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
        self._rust: Any = None

    @classmethod
    def for_index(cls, meta: dict[str, Any], path: Path) -> TokenSpace:
        if meta["space"] == "bytes":
            return cls("bytes", 1)
        from transformers import AutoTokenizer

        return cls("model", int(meta["token_width"]), AutoTokenizer.from_pretrained(path / "tokenizer"))

    def encode_docs(self, texts: Sequence[str]) -> list[bytes]:
        """Each document's tokens as bytes (little-endian), separator not included."""
        if not texts:
            return []
        if self.space == "bytes":
            return [t.encode("utf-8") for t in fold_many(texts)]
        ids = self._encode(list(texts))
        return [np.asarray(x, dtype=self.dtype).tobytes() for x in ids]

    def variants(self, phrase: str) -> list[list[int]]:
        """The token sequences `phrase` may appear as in the corpus (none when it holds no word)."""
        return self.variants_many([phrase])[0]

    def variants_many(self, phrases: Sequence[str]) -> list[list[list[int]]]:
        """`variants` of each phrase, tokenized in one call (a tokenizer call per phrase cost 10x more)."""
        if self.space == "bytes":
            folded = fold_many(phrases)
            return [[list(f.encode("utf-8"))] if words(p) else [] for p, f in zip(phrases, folded, strict=True)]
        forms = [list(dict.fromkeys(f for c in dict.fromkeys([p, p.lower(), p.title()]) for f in (c, " " + c)))
                 if words(p) else [] for p in phrases]
        flat = [f for fs in forms for f in fs]
        ids = iter(self._encode(flat))
        out = []
        for fs in forms:
            seqs = [list(x) for x in (next(ids) for _ in fs)]
            seqs = [q for q in seqs if q and (self.unk is None or self.unk not in q)]
            uniq = [list(t) for t in dict.fromkeys(tuple(q) for q in seqs)]
            # A sequence holding another is found by the shorter one already ("▁", "▁Paris" vs "▁Paris").
            out.append([q for q in uniq if not any(o != q and _contains(q, o) for o in uniq)])
        return out

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
        ids = [i for i in ids if i != self.sep_id]
        fast = self._fast()
        text = fast.decode(ids, skip_special_tokens=True) if fast is not None else self.tok.decode(ids)
        return str(text).strip()

    def _encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids without special tokens. The Rust tokenizer directly when there is one: transformers'
        __call__ around it cost ~200 us per call of a few phrases (lookups tokenize a few phrases each)."""
        if not texts:
            return []
        fast = self._fast()
        if fast is not None:
            if len(texts) < _ENCODE_BATCH_MIN:
                return [fast.encode(t, add_special_tokens=False).ids for t in texts]
            return [e.ids for e in fast.encode_batch(texts, add_special_tokens=False)]
        return [list(x) for x in self.tok(texts, add_special_tokens=False)["input_ids"]]

    def _fast(self) -> Any:
        """A copy of the Rust tokenizer without the padding/truncation a model's config may switch on."""
        if self._rust is None and getattr(self.tok, "backend_tokenizer", None) is not None:
            from tokenizers import Tokenizer

            self._rust = Tokenizer.from_str(self.tok.backend_tokenizer.to_str())
            self._rust.no_padding()
            self._rust.no_truncation()
        return self._rust


def _contains(seq: list[int], sub: list[int]) -> bool:
    """`sub` occurs in `seq` and is shorter."""
    n = len(sub)
    return n < len(seq) and any(seq[i : i + n] == sub for i, x in enumerate(seq[: len(seq) - n + 1]) if x == sub[0])


@dataclass(frozen=True)
class _Hits:
    """Where a phrase occurs: sorted byte pointers (all, or an even sample) and the true occurrence count."""

    ptrs: NDArray[np.int64]
    total: int
    length: int  # bytes of the shortest variant (snippets centre on it)


def _firsts(sorted_docs: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Marks the first entry of each run of equal values (each document once)."""
    out = np.ones(len(sorted_docs), dtype=bool)
    out[1:] = sorted_docs[1:] != sorted_docs[:-1]
    return out


def longest_doc(offsets: NDArray[np.int64], data_bytes: int) -> int:
    """Bytes of the longest document (separator included), from the document offsets, read in chunks."""
    if not len(offsets):
        return 0
    longest, step = data_bytes - int(offsets[-1]), 1 << 22
    for lo in range(0, len(offsets) - 1, step):
        part = offsets[lo : lo + step + 1]
        if len(part) > 1:
            longest = max(longest, int(np.diff(part).max()))
    return longest


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
        # Prefetch depths 0, not the wrapper's 1/3/3: on an index in the page cache `find` took 50 us with
        # them off and 730 us with them on (100k-row bench corpus); they pay off only for cold, remote disks.
        self._engine = engine_cls([str(path)], space.sep_id, space.sep_id, 4, False, 0, 0, 0, set(), 512, False, {})
        # Memory maps: the OS pages in what lookups touch; nothing is loaded up front (1B documents have 8 GB
        # of offsets alone). Plain ndarray views of them: slicing a np.memmap costs 8 us, an ndarray 0.3 us.
        def view(name: str, dtype: Any) -> NDArray[Any]:
            return np.asarray(np.memmap(path / name, dtype=dtype, mode="r"))

        self._ds: NDArray[np.uint8] = view("tokenized.0", np.uint8)
        self._tk: NDArray[Any] = view("tokenized.0", space.dtype)  # the same bytes as token ids
        self._md: NDArray[np.uint8] = view("metadata.0", np.uint8)
        self._od: NDArray[np.int64] = view("offset.0", np.int64)  # u64 on disk; offsets < 2^63
        self._mo: NDArray[np.int64] = view("metaoff.0", np.int64)
        ratio = int(meta["ratio"])
        # Suffix-array entries as integers: a typed view when the width is a numpy integer's, else bytes.
        self._sa: NDArray[Any] = view("table.0", {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.int64}.get(
            ratio, np.uint8))
        self._ratio = ratio
        self._pool: ThreadPoolExecutor | None = None
        self._window = int(meta["window"]) * w  # in bytes; 0 = anywhere in the document
        self._lock = threading.Lock()
        self._longest: int | None = None  # bytes of the longest document (see _reach)
        self._cache: OrderedDict[str, _Hits | None] = OrderedDict()
        self._cached_pointers = 0
        self.finds = 0  # engine finds made so far (the bench reads it; a cached phrase makes none)

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
        """Drop the memory maps (the engine's own maps go with it) and the lookup threads."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._cache.clear()
        self._cached_pointers = 0
        self._ds = self._sa = self._md = self._tk = np.zeros(0, np.uint8)
        self._od = self._mo = np.zeros(0, np.int64)

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
    def _find(self, ids: list[int]) -> tuple[int, int]:
        lo, hi = self._engine.find(input_ids=ids).segment_by_shard[0]
        return int(lo), int(hi)

    def _hits_many(self, phrases: Sequence[str]) -> dict[str, _Hits | None]:
        """Hits of each distinct phrase: from the cache of recent phrases, else found. The engine's `find`
        costs ~60 us of CPU and waits on a thread of its own; run side by side (it releases the GIL), those
        waits overlap."""
        out: dict[str, _Hits | None] = {}
        for phrase in dict.fromkeys(phrases):
            if phrase in self._cache:
                self._cache.move_to_end(phrase)
                out[phrase] = self._cache[phrase]
        distinct = [p for p in dict.fromkeys(phrases) if p not in out]
        seqs = self.space.variants_many(distinct)
        flat = [ids for v in seqs for ids in v]
        self.finds += len(flat)
        if len(flat) <= _INLINE_FINDS:
            ranges = [self._find(ids) for ids in flat]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=_FIND_THREADS, thread_name_prefix="infini-gram")
            ranges = list(self._pool.map(self._find, flat))
        found = iter(ranges)
        for phrase, v in zip(distinct, seqs, strict=True):
            out[phrase] = self._hits([(ids, *next(found)) for ids in v]) if v else None
            self._remember(phrase, out[phrase])
        return out

    def _remember(self, phrase: str, hits: _Hits | None) -> None:
        size = len(hits.ptrs) if hits is not None else 0
        if size > CACHE_POINTERS:
            return
        self._cache[phrase] = hits
        self._cached_pointers += size
        while len(self._cache) > CACHE_PHRASES or self._cached_pointers > CACHE_POINTERS:
            _, old = self._cache.popitem(last=False)
            self._cached_pointers -= len(old.ptrs) if old is not None else 0

    def _hits(self, segments: list[tuple[list[int], int, int]]) -> _Hits:
        parts, total = [], 0
        for ids, lo, hi in segments:
            ranks = None
            if hi - lo > POSITIONS_MAX:  # an even sample keeps the document estimate unbiased
                ranks = np.linspace(lo, hi - 1, POSITIONS_MAX).astype(np.int64)
            ptrs = self._pointers(lo, hi, ranks)
            if self.space.space == "model" and len(ptrs):
                kept = self._whole_words(ptrs, ids)
                total += round((hi - lo) * len(kept) / len(ptrs))
                ptrs = kept
            else:
                total += hi - lo
            parts.append(ptrs)
        ptrs = parts[0] if len(parts) == 1 else np.concatenate(parts)
        ptrs.sort()
        return _Hits(ptrs, total, min(len(ids) for ids, _, _ in segments) * self.space.width)

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

    def _pointers(self, lo: int, hi: int, ranks: NDArray[np.int64] | None) -> NDArray[np.int64]:
        """Suffix-array entries lo..hi (or `ranks` of them) as byte offsets into tokenized.0."""
        r = self._ratio
        if self._sa.dtype != np.uint8 or r == 1:  # a typed view: entries are integers already
            return (self._sa[lo:hi] if ranks is None else self._sa[ranks]).astype(np.int64)
        idx = (np.arange(lo, hi) if ranks is None else ranks)[:, None] * r + np.arange(r)
        raw = self._sa[idx]  # (n, r) little-endian bytes
        out = np.zeros((len(raw), 8), dtype=np.uint8)
        out[:, :r] = raw
        return out.view(np.int64).ravel()

    def _docs(self, ptrs: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.searchsorted(self._od, ptrs, side="right") - 1

    def count(self, phrase: str) -> int:
        with self._lock:
            h = self._hits_many([phrase])[phrase]
        if h is None or not h.total:
            return 0
        docs = self._distinct_docs(h.ptrs)
        return docs if len(h.ptrs) == h.total else round(docs * h.total / len(h.ptrs))

    def cooccur(self, subject: str, answer: str, *, limit: int = 5) -> Cooccurrence:
        return self.cooccur_many([(subject, answer)], limit=limit)[0]

    def cooccur_many(self, pairs: Sequence[tuple[str, str]], *, limit: int = 5) -> list[Cooccurrence]:
        """Each distinct phrase is looked up once (its finds in parallel threads), each distinct pair joined once."""
        done: dict[tuple[str, str], Cooccurrence] = {}
        with self._lock:
            for start in range(0, len(pairs), _BATCH_PAIRS):  # bounded memory: pointers of a batch at a time
                batch = pairs[start : start + _BATCH_PAIRS]
                hits = self._hits_many([p for pair in batch for p in pair])
                for pair in batch:
                    if pair not in done:
                        done[pair] = self._cooccur(hits[pair[0]], hits[pair[1]], limit)
        return [done[p] for p in pairs]

    def _cooccur(self, s: _Hits | None, a: _Hits | None, limit: int) -> Cooccurrence:
        # a is s when both phrases are the same (span tracing asks for one phrase's documents)
        if s is None or a is None or not len(s.ptrs) or not len(a.ptrs):
            return Cooccurrence(0, ())
        anchor, other = (s, a) if len(s.ptrs) <= len(a.ptrs) else (a, s)  # walk the rarer phrase
        if a is s:
            docs = self._docs(anchor.ptrs)
            ok = np.ones(len(docs), dtype=bool)
        else:
            ok, docs = self._near(anchor.ptrs, other.ptrs)
        ptrs, docs = anchor.ptrs[ok], docs[ok]
        first = _firsts(docs)  # the first qualifying occurrence in each document (pointers are sorted)
        count = int(first.sum())
        if len(anchor.ptrs) < anchor.total:  # the anchor was sampled: scale the estimate
            count = round(count * anchor.total / len(anchor.ptrs))
        shown = np.flatnonzero(first)[: max(limit, 0)]
        return Cooccurrence(count, tuple(self._row(int(docs[k]), int(ptrs[k]), anchor.length) for k in shown))

    def _near(self, sp: NDArray[np.int64], op: NDArray[np.int64]) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
        """For each anchor pointer: does the other phrase occur in the same document (and within the window)?
        Returns that mask and the anchors' documents (-1 where not mapped). Only the other phrase's nearest
        occurrence on each side can qualify (farther ones are farther the same way), and only when it lies
        within reach (the window, or the longest document): only those anchors are mapped to documents. A
        mapping is a binary search over offset.0, ~1.2 us of CPU per pointer at 10M rows (cache and TLB misses);
        mapping every anchor was 3/4 of a lookup's CPU time there (bench/index_engines.py)."""
        i = np.searchsorted(op, sp)
        has_b, has_a = i > 0, i < len(op)
        before, after = op[np.maximum(i - 1, 0)], op[np.minimum(i, len(op) - 1)]
        reach = self._reach()
        near_b, near_a = has_b & (sp - before <= reach), has_a & (after - sp <= reach)
        ok, docs = np.zeros(len(sp), dtype=bool), np.full(len(sp), -1, dtype=np.int64)
        cand = np.flatnonzero(near_b | near_a)
        if len(cand):
            d = self._docs(sp[cand])
            same_b = near_b[cand] & (self._docs(before[cand]) == d)
            ok[cand] = same_b | (near_a[cand] & (self._docs(after[cand]) == d))
            docs[cand] = d
        return ok, docs

    def _reach(self) -> int:
        """Bytes within which two occurrences can share a document and count: the window, or (window 0) the
        longest document. Read from meta.json (the build records it), else from offset.0 once."""
        if self._longest is None:
            longest = self._meta.get("longest_doc_bytes")
            self._longest = int(longest) if longest is not None else longest_doc(self._od, len(self._ds))
        return min(self._window, self._longest) if self._window else self._longest

    def _distinct_docs(self, ptrs: NDArray[np.int64]) -> int:
        """Documents among sorted pointers: occurrences of one document are adjacent, so only adjacent pairs
        closer than the longest document are mapped (the others are in different documents)."""
        if len(ptrs) < 2:
            return len(ptrs)
        if self._longest is None:
            self._reach()
        close = np.flatnonzero(np.diff(ptrs) < (self._longest or 0))
        if not len(close):
            return len(ptrs)
        return len(ptrs) - int((self._docs(ptrs[close]) == self._docs(ptrs[close + 1])).sum())

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

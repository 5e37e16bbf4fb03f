"""Build an infini-gram corpus index (layout in `infinigram.py`), in two stages:

1. tokenize: the corpus is streamed (the same readers, bad-row handling and source identity as the FTS5
   build) into tokenized.0 / offset.0 / metadata.0 / metaoff.0, a batch at a time; after each batch the
   files are flushed and synced and meta.json's checkpoint (rows consumed, reader position, file sizes) is
   replaced atomically. A killed build truncates the files to the checkpoint and reads on from there:
   every row ends up indexed once.
2. suffix array: the wheel's Rust indexer, driven as `infini_gram/indexing.py` drives it (make-part over
   byte ranges in parallel, merge, concat) but by absolute path and argument lists (no shell, no chdir).
   A kill here redoes this stage only.

The wheel's own `python -m infini_gram.indexing` knows only hub tokenizers (gpt2, llama, olmo) or none;
this build takes any local tokenizer (the model's own) or the folded-bytes space.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from workbench import procstat
from workbench.attribution.build import Batch, BuildReport, batches
from workbench.attribution.corpus import Position, open_corpus
from workbench.attribution.infinigram import SCHEMA_VERSION, TokenSpace, import_engine, longest_doc, read_meta
from workbench.errors import WorkbenchError

FILES = ("tokenized.0", "offset.0", "metadata.0", "metaoff.0")
HACK = 100_000  # bytes of overlap between make-part ranges (infini_gram/indexing.py's constant)
#: Default co-occurrence window, in tokens of the space: about 170 English words either way. Short rows
#: (the world, the bench) are shorter, so there it means "the same document", as FTS5 does.
DEFAULT_WINDOW = {"bytes": 1000, "model": 256}
_JOB_BYTES = 16 << 20  # below this much data per make-part job, extra parallel jobs cost more than they save


def build_infinigram(
    corpus: str | Path,
    index_dir: str | Path,
    *,
    tokenizer: str = "bytes",
    text_field: str = "text",
    id_field: str = "id",
    skip_bad: bool = False,
    rebuild: bool = False,
    batch_size: int = 10_000,
    window: int | None = None,
    cpus: int | None = None,
    mem_gib: float | None = None,
    progress: Callable[[int], None] | None = None,
    follow_symlinks: bool = False,
) -> BuildReport:
    """Index `corpus` into the directory `index_dir`; resume a stopped build; no-op when already built.

    `tokenizer`: "bytes" (folded UTF-8) or a model directory / hub id whose tokenizer makes the tokens.
    `window`: co-occurrence window in tokens (0: anywhere in the document; None: DEFAULT_WINDOW).
    `cpus`, `mem_gib`: what the Rust indexer may use (default: all cores, half the memory)."""
    t0 = time.perf_counter()
    import_engine()  # a missing package is reported before any work
    binary = _indexer()
    src = open_corpus(corpus, text_field=text_field, id_field=id_field, follow_symlinks=follow_symlinks)
    space, tok_label = _space(tokenizer)
    identity = {"label": src.label, "kind": src.kind, "fingerprint": src.fingerprint(),
                "text_field": text_field, "id_field": id_field}
    index_dir = Path(index_dir)
    if rebuild:
        shutil.rmtree(index_dir, ignore_errors=True)
    index_dir.mkdir(parents=True, exist_ok=True)
    meta = _prepare(index_dir, identity, space, tok_label,
                    DEFAULT_WINDOW[space.space] if window is None else window)
    ck = meta["checkpoint"]
    source, index = src.label, str(index_dir)
    if meta["complete"]:
        return BuildReport(0, meta["rows"], ck["skipped"], None, time.perf_counter() - t0, up_to_date=True,
                           source=source, index=index)
    resumed_from = ck["rows_done"] or None
    before = meta["rows"]
    if meta["stage"] == "tokenize":
        if space.space == "model" and not (index_dir / "tokenizer").is_dir():
            space.tok.save_pretrained(index_dir / "tokenizer")
        _Writer(index_dir, meta, space, src, skip_bad, progress).run(batch_size)
        if meta["rows"] == 0:
            raise WorkbenchError(f"{src.label} holds no documents to index")
        meta["stage"] = "suffix-array"
        _save(index_dir, meta)
    _suffix_array(index_dir, meta, space.width, binary, cpus or os.cpu_count() or 1,
                  mem_gib or _half_memory_gib())
    offsets = np.memmap(index_dir / "offset.0", dtype=np.int64, mode="r")
    longest = longest_doc(np.asarray(offsets), (index_dir / "tokenized.0").stat().st_size)
    del offsets
    meta.update(complete=True, built_at=datetime.now(UTC).isoformat(timespec="seconds"), longest_doc_bytes=longest)
    _save(index_dir, meta)
    return BuildReport(meta["rows"] - before, meta["rows"], ck["skipped"], resumed_from,
                       time.perf_counter() - t0, source=source, index=index)


def _indexer() -> Path:
    import infini_gram

    binary = Path(infini_gram.__file__).parent / "rust_indexing"
    if not os.access(binary, os.X_OK):
        raise WorkbenchError(f"the infini-gram wheel's indexer {binary} is missing or not executable")
    return binary


def _space(tokenizer: str) -> tuple[TokenSpace, str]:
    if tokenizer == "bytes":
        return TokenSpace("bytes", 1), "bytes"
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except (OSError, ValueError) as e:
        raise WorkbenchError(f"--tokenizer: cannot load a tokenizer from `{tokenizer}` ({e}); give a model "
                             "directory, or `bytes`") from e
    width = 2 if len(tok) < (1 << 16) - 1 else 4  # the all-ones id is the document separator
    return TokenSpace("model", width, tok), str(Path(tokenizer).resolve()) if Path(tokenizer).exists() else tokenizer


def _prepare(index_dir: Path, identity: dict[str, Any], space: TokenSpace, tok_label: str,
             window: int) -> dict[str, Any]:
    """The index's meta, fresh or as a previous build left it; refuses a different corpus or tokenizer."""
    if window < 0:
        raise WorkbenchError(f"--window must be >= 0 tokens (0: the whole document), got {window}")
    want: dict[str, Any] = {"source": identity, "space": space.space, "tokenizer": tok_label,
                            "token_width": space.width}
    meta: dict[str, Any]
    if not (index_dir / "meta.json").is_file():
        meta = {"engine": "infini-gram", "schema": SCHEMA_VERSION, **want, "window": window, "rows": 0,
                "tokens": 0, "ratio": 0, "stage": "tokenize", "complete": False,
                "checkpoint": {"rows_done": 0, "pos": 0, "line": 0, "skipped": 0, "sizes": dict.fromkeys(FILES, 0)}}
        _save(index_dir, meta)
        return meta
    meta = read_meta(index_dir)
    if meta.get("engine") != "infini-gram" or meta.get("schema") != SCHEMA_VERSION:
        raise WorkbenchError(f"{index_dir} is not an infini-gram index of schema {SCHEMA_VERSION}; pass --rebuild")
    changed = [k for k in want if meta.get(k) != want[k]]
    if changed and not meta["complete"] and meta["checkpoint"]["rows_done"] == 0:
        meta.update(want)  # nothing indexed yet: retrying with other settings needs no --rebuild
        changed = []
    if changed:
        state = "built" if meta["complete"] else "partly built"
        raise WorkbenchError(f"{index_dir} was {state} from {meta['source']['label']} with tokenizer "
                             f"{meta['tokenizer']}; now the {' and '.join(changed)} changed. Pass --rebuild to "
                             "index it from scratch.")
    if meta["window"] != window:  # a query setting: changing it needs no rebuild
        meta["window"] = window
        _save(index_dir, meta)
    return meta


def _save(index_dir: Path, meta: dict[str, Any]) -> None:
    """meta.json replaced atomically (written, synced, renamed): a kill leaves the old or the new one."""
    tmp = index_dir / "meta.json.tmp"
    with tmp.open("w") as f:
        json.dump(meta, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, index_dir / "meta.json")


class _Writer:
    """Appends batches of documents to the four data files; the checkpoint moves only after a batch is
    on disk, so the files never hold a row the checkpoint does not count."""

    def __init__(self, index_dir: Path, meta: dict[str, Any], space: TokenSpace, src: Any, skip_bad: bool,
                 progress: Callable[[int], None] | None) -> None:
        self.dir, self.meta, self.space, self.src = index_dir, meta, space, src
        self.skip_bad, self.progress = skip_bad, progress
        ck = meta["checkpoint"]
        self.files = {}
        for name in FILES:  # drop whatever a killed build wrote after its last checkpoint
            f = (index_dir / name).open("ab")
            f.truncate(ck["sizes"][name])
            self.files[name] = f
        self.sizes = dict(ck["sizes"])
        self.sep = bytes([0xFF]) * space.width

    def run(self, batch_size: int) -> None:
        ck = self.meta["checkpoint"]
        try:
            for batch in batches(self.src, Position(ck["pos"], ck["line"]), ck["rows_done"], batch_size,
                                 self.skip_bad):
                self._flush(batch)
        finally:
            for f in self.files.values():
                f.close()

    def _flush(self, batch: Batch) -> None:
        encoded = self.space.encode_docs([d.text for d in batch.docs])
        offsets, metaoffs, data, lines = [], [], [], []
        pos, mpos = self.sizes["tokenized.0"], self.sizes["metadata.0"]
        for d, tokens in zip(batch.docs, encoded, strict=True):
            offsets.append(pos)
            data.append(self.sep + tokens)
            pos += len(self.sep) + len(tokens)
            line = (json.dumps({"id": d.doc_id}, ensure_ascii=False) + "\n").encode("utf-8")
            metaoffs.append(mpos)
            lines.append(line)
            mpos += len(line)
        chunks = {"tokenized.0": b"".join(data), "offset.0": np.asarray(offsets, dtype=np.uint64).tobytes(),
                  "metadata.0": b"".join(lines), "metaoff.0": np.asarray(metaoffs, dtype=np.uint64).tobytes()}
        for name, chunk in chunks.items():
            f = self.files[name]
            f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
            self.sizes[name] += len(chunk)
        self.meta["rows"] += len(batch.docs)
        ck = self.meta["checkpoint"]
        ck["skipped"] += batch.skipped
        ck.update(rows_done=batch.consumed, pos=batch.cursor.pos, line=batch.cursor.line, sizes=dict(self.sizes))
        _save(self.dir, self.meta)
        if self.progress is not None:
            self.progress(batch.consumed)


def _suffix_array(index_dir: Path, meta: dict[str, Any], width: int, binary: Path, cpus: int,
                  mem_gib: float) -> None:
    """table.0 from tokenized.0 with the Rust indexer (the wheel's job plan, see infini_gram/indexing.py)."""
    ds = index_dir / "tokenized.0"
    size = ds.stat().st_size
    ratio = max(1, math.ceil(math.log2(size) / 8))  # bytes per suffix-array pointer
    parts, merged, table = index_dir / "_parts", index_dir / "_merged", index_dir / "table.0"
    for d in (parts, merged):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
    table.unlink(missing_ok=True)
    mem = int(mem_gib * (1 << 30))
    batches = 1
    while batches * (mem // (12 if width == 1 else 8)) < size:
        batches *= 2
    parallel = max(1, min(cpus, size // _JOB_BYTES))
    total = batches * parallel
    step = size // total
    step += (width - step % width) % width  # parts hold whole tokens
    common = ["--ratio", str(ratio), "--token-width", str(width)]
    for first in range(0, total, parallel):
        procs = [subprocess.Popen(
            [str(binary), "make-part", "--data-file", str(ds), "--parts-dir", str(parts), "--start-byte",
             str(i * step), "--end-byte", str(min((i + 1) * step + HACK, size)), *common],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(first, min(first + parallel, total))]
        for p in procs:
            _check(p, "make-part")
    threads = ["--num-threads", str(parallel)]  # more threads than data: concat panics on a tiny corpus
    _check(subprocess.Popen([str(binary), "merge", "--data-file", str(ds), "--parts-dir", str(parts), "--merged-dir",
                             str(merged), *threads, "--hacksize", str(HACK), *common],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), "merge")
    _check(subprocess.Popen([str(binary), "concat", "--data-file", str(ds), "--merged-dir", str(merged),
                             "--merged-file", str(table), *threads, *common],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), "concat")
    shutil.rmtree(parts)
    shutil.rmtree(merged)
    meta.update(ratio=ratio, tokens=size // width)


def _check(proc: subprocess.Popen[bytes], step: str) -> None:
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise WorkbenchError(f"the infini-gram indexer failed at `{step}` (exit {proc.returncode}): "
                             f"{err.decode(errors='replace')[-500:].strip()}")


def _half_memory_gib() -> float:
    return procstat.total_memory() / 2 / (1 << 30)

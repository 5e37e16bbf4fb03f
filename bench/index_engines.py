"""The two corpus-index engines side by side on one corpus: FTS5 and infini-gram (folded bytes, and a model's
own tokens with --tokenizer): build rows/s, disk per row, and the latency of the data axis's lookups.

    .venv/bin/python bench/index_engines.py [--rows 1000000] [--lookups 2000] [--tokenizer DIR]
        [--mem-gib 4] [--keep DIR] [--json out.json]

The corpus is bench/index_throughput.py's (short sentences about fictional people and places, generated
into a temp dir). Lookups are the data axis's: `cooccur(person, city)` for half true, half shuffled pairs
(single and batched), and `count(person)`; the engines' answers are compared pair by pair. Wall time and
CPU time are both printed: on a shared machine the wall clock measures the neighbours too. Each index's files
are read once before its lookups (the time is printed): lookups are timed on an index in the page cache, as a
serving machine holds it, not on whatever the neighbours left there. With --keep the facts the lookups are drawn
from are saved (facts.json) so that --query-only does not regenerate the corpus.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from index_throughput import generate  # the existing bench's corpus

from workbench.attribution import build_index
from workbench.attribution.engine import CorpusEngine, open_engine
from workbench.attribution.infinigram_build import build_infinigram


def _du(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def build(name: str, corpus: Path, root: Path, rows: int, tokenizer: str | None, mem_gib: float) -> dict[str, Any]:
    """Build one engine's index; returns its figures (and the path to open)."""
    stages: dict[str, float] = {}
    t0 = time.perf_counter()

    def tokenized(done: int) -> None:  # the tokenize stage ends with the last batch
        stages["tokenize_s"] = time.perf_counter() - t0

    if name == "fts5":
        path = root / "fts5.sqlite"
        _, wall, cpu = _timed(lambda: build_index(corpus, path, rebuild=True))
    else:
        path = root / name
        _, wall, cpu = _timed(lambda: build_infinigram(corpus, path, tokenizer=tokenizer or "bytes", rebuild=True,
                                                       mem_gib=mem_gib, progress=tokenized))
        stages["suffix_array_s"] = wall - stages.get("tokenize_s", 0.0)
    size = _du(path)
    fig = {"engine": name, "path": str(path), "build_s": wall, "build_cpu_s": cpu, "rows_per_s": rows / wall,
           "rows_per_cpu_s": rows / cpu, "disk_bytes": size, "bytes_per_row": size / rows, **stages}
    print(f"{name:>18} build: {rows / wall:>9,.0f} rows/s wall ({rows / cpu:,.0f} per CPU-s; the Rust indexer's "
          f"own processes not counted)  {size / 2**20:>8,.0f} MiB = {size / rows:,.0f} bytes/row"
          + "".join(f"  {k} {v:.0f}" for k, v in stages.items()))
    return fig


def warm(path: Path) -> tuple[int, float]:
    """Read every file of an index once (into the page cache); returns bytes read and seconds."""
    t, n = time.perf_counter(), 0
    for f in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
        with f.open("rb") as fh:
            while chunk := fh.read(16 << 20):
                n += len(chunk)
    return n, time.perf_counter() - t


def lookups(ix: CorpusEngine, pairs: list[tuple[str, str]]) -> tuple[dict[str, float], list[int]]:
    n = len(pairs)
    single, w1, c1 = _timed(lambda: [ix.cooccur(s, a) for s, a in pairs])
    batched, w2, c2 = _timed(lambda: ix.cooccur_many(pairs))
    assert [c.count for c in single] == [c.count for c in batched]
    _, w3, c3 = _timed(lambda: [ix.count(p) for p, _ in pairs])
    worst, w4, _ = _timed(lambda: ix.cooccur("was born", "in"))  # a quarter of the corpus matches
    lat = {"cooccur_us": w1 / n * 1e6, "cooccur_cpu_us": c1 / n * 1e6, "cooccur_many_us": w2 / n * 1e6,
           "cooccur_many_cpu_us": c2 / n * 1e6, "count_us": w3 / n * 1e6, "count_cpu_us": c3 / n * 1e6,
           "worst_ms": w4 * 1e3, "worst_count": worst.count}
    return lat, [c.count for c in single]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=2_000)
    ap.add_argument("--tokenizer", help="also index a model's own tokens (a model or tokenizer directory)")
    ap.add_argument("--engines", default="fts5,infini-gram", help="comma-separated: fts5, infini-gram")
    ap.add_argument("--mem-gib", type=float, default=4.0, help="memory the Rust indexer may plan for (GiB)")
    ap.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--query-only", action="store_true",
                    help="with --keep DIR of an earlier run: time the lookups on its indexes, build nothing")
    args = ap.parse_args()
    if args.rows < 1 or args.lookups < 1:
        ap.error("--rows and --lookups must be >= 1")
    tmp = tempfile.TemporaryDirectory(prefix="index-engines-")
    root = args.keep or Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus.jsonl"
    t = time.perf_counter()
    saved = root / "facts.json"
    if args.query_only:
        if not args.keep:
            ap.error("--query-only needs --keep DIR")
        if saved.is_file():
            facts = [(p, c) for p, c in json.loads(saved.read_text())]
        else:  # the same seed: the same facts; the corpus text is thrown away
            facts = generate(Path("/dev/null"), args.rows)
    else:
        facts = generate(corpus, args.rows)
    if args.keep:
        saved.write_text(json.dumps(facts))
    print(f"generated {args.rows:,} rows ({corpus.stat().st_size / 2**20:,.0f} MiB) in {time.perf_counter() - t:.0f}s")

    names = [e.strip() for e in args.engines.split(",")]
    plan = [(n, None) for n in names if n == "fts5"]
    if "infini-gram" in names:
        plan.append(("infini-gram-bytes", None))
        if args.tokenizer:
            plan.append(("infini-gram-model", args.tokenizer))
    if args.query_only:
        paths = {"fts5": root / "fts5.sqlite"}
        figures = [{"engine": n, "path": str(paths.get(n, root / n))} for n, _ in plan]
    else:
        figures = [build(n, corpus, root, args.rows, tok, args.mem_gib) for n, tok in plan]

    rng = random.Random(1)
    people, cities = [p for p, _ in facts], [c for _, c in facts]
    pairs = [rng.choice(facts) if k % 2 else (rng.choice(people), rng.choice(cities)) for k in range(args.lookups)]
    answers: dict[str, list[int]] = {}
    for fig in figures:
        size, secs = warm(Path(fig["path"]))
        print(f"{fig['engine']:>18} index read into the page cache: {size / 2**20:,.0f} MiB in {secs:.0f}s")
        with open_engine(fig["path"]) as ix:
            ix.cooccur(*pairs[0])  # first touch (tokenizer load, page-ins) is not a lookup
            lat, answers[fig["engine"]] = lookups(ix, pairs)
        fig.update(lat)
        print(f"{fig['engine']:>18} cooccur {lat['cooccur_us']:>8,.0f} us (cpu {lat['cooccur_cpu_us']:,.0f})  "
              f"batched {lat['cooccur_many_us']:>8,.0f} us  count {lat['count_us']:>7,.0f} us  "
              f"worst case {lat['worst_ms']:,.0f} ms ({lat['worst_count']:,} docs)")
    base = figures[0]
    for fig in figures[1:]:
        same = sum(a == b for a, b in zip(answers[base["engine"]], answers[fig["engine"]], strict=True))
        print(f"{fig['engine']} vs {base['engine']}: cooccur {base['cooccur_us'] / fig['cooccur_us']:.1f}x faster "
              f"per lookup (cpu {base['cooccur_cpu_us'] / fig['cooccur_cpu_us']:.1f}x), batched "
              f"{base['cooccur_many_us'] / fig['cooccur_many_us']:.1f}x, "
              f"count {base['count_us'] / fig['count_us']:.1f}x; "
              + ("" if args.query_only else f"build {fig['rows_per_s'] / base['rows_per_s']:.2f}x the rows/s; "
                 f"disk {fig['bytes_per_row'] / base['bytes_per_row']:.2f}x; ")
              + f"same answer on {same}/{len(pairs)} pairs")
        fig["same_answers"] = same
    print(f"pairs found: {sum(c > 0 for c in answers[base['engine']])}/{len(pairs)}")
    if args.json:
        args.json.write_text(json.dumps({"rows": args.rows, "lookups": args.lookups, "engines": figures}, indent=1))
    tmp.cleanup()


if __name__ == "__main__":
    main()

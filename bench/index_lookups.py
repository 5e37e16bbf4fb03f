"""Where a data-axis lookup's time goes, per engine and per variant, on indexes bench/index_engines.py built.

    .venv/bin/python bench/index_lookups.py --keep DIR [--lookups 1000] [--rows N] [--json out.json]

DIR is an `index_engines.py --keep DIR` folder (fts5.sqlite, infini-gram-bytes/, infini-gram-model/, facts.json).
Variants, each timed in wall and CPU µs (the CPU figure is the one to trust on a shared machine):
    cooccur        one pair at a time, 5 evidence rows (what the engines' table in the README gives)
    count only     the same pairs with limit=0: counts, no snippets fetched
    batched        every pair in one cooccur_many call (infini-gram: distinct phrases found together)
    count          count(subject)
    per failure    the data axis's calls for one failed probe: support (subject, answer), two conflict pairs
                   (subject, wrong value) and the counts of the subject and both values (3 cooccur + 3 count)
    ... no cache   the same with infini-gram's phrase cache off (CACHE_PHRASES = 0)
    ..., repeated  the same pairs again on the same index, its cache large enough for all: infini-gram then
                   finds nothing, so the difference to the first pass is what finding the phrases costs
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from index_engines import warm
from index_throughput import generate

from workbench.attribution import infinigram
from workbench.attribution.engine import CorpusEngine, open_engine


def _timed(fn: Callable[[], Any], per: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - wall) / per * 1e6, (time.process_time() - cpu) / per * 1e6


def per_failure(ix: CorpusEngine, fails: list[tuple[str, str, str, str]]) -> None:
    for s, a, w1, w2 in fails:
        ix.cooccur_many([(s, a)])
        ix.cooccur_many([(s, w1), (s, w2)])
        ix.count(s), ix.count(w1), ix.count(w2)


def variants(path: Path, pairs: list[tuple[str, str]], fails: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    """Each variant on a freshly opened index (nothing cached from another variant)."""
    n = len(pairs)
    runs: dict[str, tuple[Callable[[CorpusEngine], Any], int]] = {
        "cooccur": (lambda ix: [ix.cooccur(s, a) for s, a in pairs], n),
        "count only": (lambda ix: [ix.cooccur(s, a, limit=0) for s, a in pairs], n),
        "batched": (lambda ix: ix.cooccur_many(pairs), n),
        "batched, count only": (lambda ix: ix.cooccur_many(pairs, limit=0), n),
        "count": (lambda ix: [ix.count(s) for s, _ in pairs], n),
        "per failure": (lambda ix: per_failure(ix, fails), len(fails)),
    }
    out = {}
    for name, (fn, per) in runs.items():
        with open_engine(path) as ix:
            ix.cooccur("warm up", "the index")  # first touch (tokenizer load, page-ins) is not a lookup
            out[name] = _timed(lambda: fn(ix), per)  # noqa: B023  # called before the next iteration
    if infinigram.CACHE_PHRASES:  # the same pairs twice, every phrase kept: the second pass finds nothing
        keep, infinigram.CACHE_POINTERS = infinigram.CACHE_POINTERS, 10**9
        for name in ("cooccur", "count only"):
            fn, per = runs[name]
            with open_engine(path) as ix:
                fn(ix)
                out[f"{name}, repeated"] = _timed(lambda: fn(ix), per)  # noqa: B023
        infinigram.CACHE_POINTERS = keep
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, required=True, help="an index_engines.py --keep folder")
    ap.add_argument("--rows", type=int, help="rows of its corpus (only to regenerate facts.json if missing)")
    ap.add_argument("--lookups", type=int, default=1000)
    ap.add_argument("--engines", default="fts5,infini-gram-bytes,infini-gram-model")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    saved = args.keep / "facts.json"
    if saved.is_file():
        facts = [(p, c) for p, c in json.loads(saved.read_text())]
    elif args.rows:
        facts = generate(Path("/dev/null"), args.rows)
    else:
        ap.error(f"{saved} is missing: give --rows to regenerate it")
    rng = random.Random(1)
    people, cities = [p for p, _ in facts], [c for _, c in facts]
    pairs = [rng.choice(facts) if k % 2 else (rng.choice(people), rng.choice(cities)) for k in range(args.lookups)]
    fails = [(s, a, rng.choice(cities), rng.choice(cities)) for s, a in pairs[: args.lookups // 2]]
    figures: dict[str, Any] = {}
    for name in args.engines.split(","):
        path = args.keep / ("fts5.sqlite" if name == "fts5" else name)
        if not path.exists():
            print(f"{name}: no index at {path}, skipped")
            continue
        size, secs = warm(path)
        print(f"{name}: {size / 2**20:,.0f} MiB read into the page cache in {secs:.0f}s", flush=True)
        fig = variants(path, pairs, fails)
        if name != "fts5":  # again with the phrase cache off
            keep, infinigram.CACHE_PHRASES = infinigram.CACHE_PHRASES, 0
            fig.update({f"{k}, no cache": v for k, v in variants(path, pairs, fails).items()})
            infinigram.CACHE_PHRASES = keep
        figures[name] = fig
        for k, v in fig.items():
            if isinstance(v, tuple):
                print(f"  {k:30} {v[0]:>9,.0f} us wall {v[1]:>9,.0f} us CPU", flush=True)
    if "fts5" in figures:
        for name, fig in figures.items():
            if name != "fts5":
                print(f"{name} vs fts5 (CPU): " + ", ".join(
                    f"{k} {figures['fts5'][k.replace(', no cache', '').replace(', repeated', '')][1] / v[1]:.1f}x"
                    for k, v in fig.items() if isinstance(v, tuple)))
    if args.json:
        args.json.write_text(json.dumps({"lookups": args.lookups, "engines": figures}, indent=1))


if __name__ == "__main__":
    main()

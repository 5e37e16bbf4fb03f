"""Corpus index throughput: build rows/s and cooccur lookups/s on a synthetic corpus.

    .venv/bin/python bench/index_throughput.py [--rows 1000000] [--lookups 2000] [--keep DIR]

The corpus (short sentences about fictional people and places) is generated into a temp dir
and deleted afterwards unless --keep is given. Figures go to stdout; nothing is committed.
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
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.attribution import CorpusIndex, build_index

T = TypeVar("T")

SYLLABLES = ["ka", "lo", "mir", "zen", "tav", "or", "qui", "bel", "dra", "nox", "ul", "fen", "sar", "ith",
             "gor", "pe", "vy", "ram", "tol", "eth", "cas", "mun", "dri", "ko"]
TEMPLATES = [
    "{p} was born in {c} in {y}.",
    "In {y}, {p} moved to {c} to study {f}.",
    "{p} is best known for work on {f} at the academy of {c}.",
    "The archives of {c} mention {p} only once, in {y}.",
]
FIELDS = ["tidal glass", "star charts", "lute making", "salt law", "cloud farming", "river maps"]


def _name(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def generate(path: Path, rows: int, seed: int = 0) -> list[tuple[str, str]]:
    """Write `rows` JSONL documents; return (person, city) pairs of some facts, for lookups."""
    rng = random.Random(seed)
    people = [f"{_name(rng, 2)} {_name(rng, 3)}" for _ in range(50_000)]
    cities = [_name(rng, 3) for _ in range(2_000)]
    facts: list[tuple[str, str]] = []
    with path.open("w", encoding="utf-8") as f:
        for i in range(rows):
            p, c = rng.choice(people), rng.choice(cities)
            text = rng.choice(TEMPLATES).format(p=p, c=c, y=rng.randint(1500, 1999), f=rng.choice(FIELDS))
            f.write(json.dumps({"id": f"doc{i}", "text": text}) + "\n")
            if i % 97 == 0:
                facts.append((p, c))
    return facts


def _timed(label: str, n: int, fn: Callable[[], list[T]]) -> list[T]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label + ':':16} {n / wall:,.0f} lookups/s wall ({n / cpu:,.0f} per CPU-second)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=2_000)
    ap.add_argument("--batch-size", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="index-bench-")
    root = args.keep or Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    corpus, index_path = root / "corpus.jsonl", root / "corpus_index.sqlite"

    t = time.perf_counter()
    facts = generate(corpus, args.rows)
    mib = corpus.stat().st_size / 2**20
    print(f"generated {args.rows:,} rows ({mib:.0f} MiB) in {time.perf_counter() - t:.1f}s")

    # CPU time beside wall time: on a shared machine the wall clock measures the neighbours too.
    cpu = time.process_time()
    rep = build_index(corpus, index_path, batch_size=args.batch_size, rebuild=True)
    cpu = time.process_time() - cpu
    n, mib = rep.rows_total, index_path.stat().st_size / 2**20
    print(f"build: {n:,} rows in {rep.seconds:.1f}s wall = {n / rep.seconds:,.0f} rows/s "
          f"({n / cpu:,.0f} rows per CPU-second); index {mib:.0f} MiB")

    rng = random.Random(1)
    # Half true pairs (they co-occur), half shuffled (mostly absent): the mix attribution sees.
    people, cities = [p for p, _ in facts], [c for _, c in facts]
    pairs = [rng.choice(facts) if k % 2 else (rng.choice(people), rng.choice(cities))
             for k in range(args.lookups)]
    with CorpusIndex.open(index_path) as ix:
        single = _timed("cooccur single", len(pairs), lambda: [ix.cooccur(s, a) for s, a in pairs])
        batched = _timed("cooccur_many", len(pairs), lambda: ix.cooccur_many(pairs))
        assert [c.count for c in single] == [c.count for c in batched]
        _timed("count(phrase)", len(pairs), lambda: [ix.count(p) for p, _ in pairs])
        t = time.perf_counter()
        common = ix.cooccur("was born", "in")  # worst case: a quarter of the corpus matches
        print(f"worst case cooccur('was born', 'in'): {common.count:,} docs in "
              f"{(time.perf_counter() - t) * 1000:.0f} ms")
    print(f"pairs found: {sum(c.count > 0 for c in single)}/{len(pairs)}")
    tmp.cleanup()


if __name__ == "__main__":
    main()

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.attribution import CorpusIndex, build_index  # noqa: E402

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
    print(f"generated {args.rows:,} rows ({corpus.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f}s")

    rep = build_index(corpus, index_path, batch_size=args.batch_size, rebuild=True)
    print(f"build: {rep.rows_total:,} rows in {rep.seconds:.1f}s = {rep.rows_total / rep.seconds:,.0f} rows/s; "
          f"index {index_path.stat().st_size / 2**20:.0f} MiB")

    rng = random.Random(1)
    # Half true pairs (they co-occur), half shuffled (mostly absent): the mix attribution sees.
    people, cities = [p for p, _ in facts], [c for _, c in facts]
    pairs = [rng.choice(facts) if k % 2 else (rng.choice(people), rng.choice(cities)) for k in range(args.lookups)]
    with CorpusIndex.open(index_path) as ix:
        t = time.perf_counter()
        single = [ix.cooccur(s, a) for s, a in pairs]
        dt_single = time.perf_counter() - t
        t = time.perf_counter()
        batched = ix.cooccur_many(pairs)
        dt_batch = time.perf_counter() - t
        assert [c.count for c in single] == [c.count for c in batched]
        t = time.perf_counter()
        for p in people[: args.lookups]:
            ix.count(p)
        dt_count = time.perf_counter() - t
        t = time.perf_counter()
        common = ix.cooccur("was born", "in")  # worst case: most of the corpus matches
        dt_common = time.perf_counter() - t
    hits = sum(c.count > 0 for c in single)
    print(f"cooccur single:  {len(pairs) / dt_single:,.0f} lookups/s ({hits}/{len(pairs)} pairs found)")
    print(f"cooccur_many:    {len(pairs) / dt_batch:,.0f} lookups/s")
    print(f"count(phrase):   {min(len(people), args.lookups) / dt_count:,.0f} lookups/s")
    print(f"worst case cooccur('was born', 'in'): {common.count:,} docs in {dt_common * 1000:.0f} ms")
    tmp.cleanup()


if __name__ == "__main__":
    main()

"""Corpus index throughput: build rows/s, index size and cooccur lookups/s on a synthetic corpus, for
each tokenizer side by side in one run.

    .venv/bin/python bench/index_throughput.py [--rows 1000000] [--lookups 2000] [--lang en|zh]
        [--tokenizers chars,unicode61,trigram] [--keep DIR]

The corpus (short sentences about fictional people and places; in Chinese with --lang zh) is generated
into a temp dir and deleted afterwards unless --keep is given. Figures go to stdout; nothing is committed.
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
from workbench.attribution.index import TOKENIZERS, check_tokenizer

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
# The Chinese corpus: the same facts in Chinese sentences (no spaces); names of 2-3 characters, so most
# lookups are of 2- and 3-character words.
ZH_SURNAMES = "赵钱孙李周吴郑王冯陈褚卫蒋沈韩杨朱秦尤许何吕施张孔曹严华金魏陶姜"
ZH_CHARS = "安柏辰达恩芳冠海嘉俊凯澜力霖茂宁鹏琪睿森涛薇翔雅瑜泽哲振芝梓岚枫"
ZH_PLACE = "澄岭泉溪川湾峡原堡港洲滩垣岛屿坪塘庄坞渚"
ZH_TEMPLATES = [
    "{p}于{y}年出生在{c}。",
    "{y}年，{p}搬到{c}学习{f}。",
    "{p}以在{c}学院研究{f}而闻名。",
    "{c}的档案只在{y}年提到过{p}一次。",
]
ZH_FIELDS = ["潮汐玻璃", "星图", "制琴", "盐法", "云上农耕", "河道测绘"]


def _name(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def _zh_person(rng: random.Random) -> str:
    return rng.choice(ZH_SURNAMES) + "".join(rng.choice(ZH_CHARS) for _ in range(rng.choice((1, 2))))


def _zh_city(rng: random.Random) -> str:
    return "".join(rng.choice(ZH_CHARS) for _ in range(rng.choice((1, 2)))) + rng.choice(ZH_PLACE)


def generate(path: Path, rows: int, seed: int = 0, lang: str = "en") -> list[tuple[str, str]]:
    """Write `rows` JSONL documents; return (person, city) pairs of some facts, for lookups."""
    rng = random.Random(seed)
    if lang == "zh":
        people = [_zh_person(rng) for _ in range(50_000)]
        cities = [_zh_city(rng) for _ in range(2_000)]
        templates, fields = ZH_TEMPLATES, ZH_FIELDS
    else:
        people = [f"{_name(rng, 2)} {_name(rng, 3)}" for _ in range(50_000)]
        cities = [_name(rng, 3) for _ in range(2_000)]
        templates, fields = TEMPLATES, FIELDS
    facts: list[tuple[str, str]] = []
    with path.open("w", encoding="utf-8") as f:
        for i in range(rows):
            p, c = rng.choice(people), rng.choice(cities)
            text = rng.choice(templates).format(p=p, c=c, y=rng.randint(1500, 1999), f=rng.choice(fields))
            f.write(json.dumps({"id": f"doc{i}", "text": text}, ensure_ascii=False) + "\n")
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
    ap.add_argument("--lang", choices=("en", "zh"), default="en", help="the corpus's language")
    ap.add_argument("--tokenizers", default=",".join(TOKENIZERS),
                    help=f"comma-separated, built one after the other ({', '.join(TOKENIZERS)})")
    ap.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    args = ap.parse_args()
    tokenizers = [check_tokenizer(t.strip()) for t in args.tokenizers.split(",") if t.strip()]
    tmp = tempfile.TemporaryDirectory(prefix="index-bench-")
    root = args.keep or Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus.jsonl"

    t = time.perf_counter()
    facts = generate(corpus, args.rows, lang=args.lang)
    mib = corpus.stat().st_size / 2**20
    print(f"generated {args.rows:,} {args.lang} rows ({mib:.0f} MiB) in {time.perf_counter() - t:.1f}s")
    rng = random.Random(1)
    # Half true pairs (they co-occur), half shuffled (mostly absent): the mix attribution sees.
    people, cities = [p for p, _ in facts], [c for _, c in facts]
    pairs = [rng.choice(facts) if k % 2 else (rng.choice(people), rng.choice(cities))
             for k in range(args.lookups)]
    summary: list[str] = []
    for tok in tokenizers:
        index_path = root / f"corpus_index.{tok}.sqlite"
        print(f"--- tokenizer {tok}")
        # CPU time beside wall time: on a shared machine the wall clock measures the neighbours too.
        cpu = time.process_time()
        rep = build_index(corpus, index_path, batch_size=args.batch_size, rebuild=True, tokenizer=tok)
        cpu = time.process_time() - cpu
        n, mib = rep.rows_total, index_path.stat().st_size / 2**20
        print(f"build: {n:,} rows in {rep.seconds:.1f}s wall = {n / rep.seconds:,.0f} rows/s "
              f"({n / cpu:,.0f} rows per CPU-second); index {mib:.0f} MiB")
        with CorpusIndex.open(index_path) as ix:
            single = _timed("cooccur single", len(pairs), lambda: [ix.cooccur(s, a) for s, a in pairs])
            batched = _timed("cooccur_many", len(pairs), lambda: ix.cooccur_many(pairs))
            assert [c.count for c in single] == [c.count for c in batched]
            _timed("count(phrase)", len(pairs), lambda: [ix.count(p) for p, _ in pairs])
            worst = ("出生", "年") if args.lang == "zh" else ("was born", "in")
            t = time.perf_counter()
            common = ix.cooccur(*worst)  # worst case: a quarter of the corpus matches
            print(f"worst case cooccur{worst}: {common.count:,} docs in "
                  f"{(time.perf_counter() - t) * 1000:.0f} ms")
        found = sum(c.count > 0 for c in single)
        print(f"pairs found: {found}/{len(pairs)}")
        summary.append(f"{tok:<10} {n / rep.seconds:>10,.0f} {n / cpu:>10,.0f} {mib:>8.0f} {found:>6}/{len(pairs)}")
        index_path.unlink()
    print(f"\n{args.lang}: tokenizer   rows/s  rows/CPU-s  index MiB  pairs found")
    print("\n".join(summary))
    tmp.cleanup()


if __name__ == "__main__":
    main()

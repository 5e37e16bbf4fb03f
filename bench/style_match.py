"""Which shipped style pool a set of questions reads like (workbench/guard/domain.py `match_style`), on sets whose
style is known: the NQ-open slice the tests ship and TruthfulQA's first 60 questions (their own pools' styles, not in
those pools), a synthetic world's template questions and the guard pool's everyday and general questions (neither).

    .venv/bin/python bench/style_match.py [--draws 4] [--sizes 3,5,15,60] [--out FILE]

Per set and size: DRAWS seeded draws of that many questions, the best pool of each draw and its score (the set's
similarity to the pool as a share of what as many of the pool's own questions score; STYLE_MIN is the bar).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path
from typing import Any

from evals.world import TEST_CONFIG, build_world
from workbench.guard.domain import STYLE_MIN, match_style
from workbench.guard.pool import POOL_DIR
from workbench.probes import resolve_probes

ROOT = Path(__file__).resolve().parents[1]
TRUTHFULQA = ROOT.parent / "shared" / "data" / "TruthfulQA.csv"


def sets(world_dir: Path) -> dict[str, list[str]]:
    def questions(path: Path, n: int | None = None) -> list[str]:
        return [p.question for p in resolve_probes(str(path))[1].probes[:n]]

    world = build_world(world_dir, dataclasses.replace(TEST_CONFIG, entities=60))
    out = {"nq-open slice": questions(ROOT / "tests" / "data" / "formats" / "nq_open.jsonl"),
           "world (60 entities)": questions(world.suite),
           "guard everyday_en": questions(POOL_DIR / "everyday_en.jsonl"),
           "guard general_en": questions(POOL_DIR / "general_en.jsonl")}
    if TRUTHFULQA.is_file():
        out["truthfulqa first 60"] = questions(TRUTHFULQA, 60)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=4)
    p.add_argument("--sizes", default="3,5,15,60")
    p.add_argument("--world", type=Path, default=Path("/tmp/style_match_world"))
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"style_min": STYLE_MIN, "sets": {}}
    for name, qs in sets(args.world).items():
        rows = {}
        for k in sizes:
            draws = [match_style(random.Random(d).sample(qs, min(k, len(qs)))) for d in range(args.draws)]
            best = [max(m.scores.items(), key=lambda kv: kv[1]) for m in draws]
            rows[k] = {"best": [b[0] for b in best], "scores": [b[1] for b in best],
                       "matched": [m.pool.name if m.pool else None for m in draws]}
            print(f"{name:<22} {k:>3} questions: " + ", ".join(f"{b[0].split('.')[0]} {b[1]:.2f}" for b in best)
                  + f"  -> matched {sum(m.pool is not None for m in draws)} of {args.draws}", flush=True)
        results["sets"][name] = rows
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

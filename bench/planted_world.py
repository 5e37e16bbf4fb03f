"""The planted world's build and what it did to the model: build time (from world.json, with the machine's load), the
planted facts learnt per corpus frequency, and the shipped everyday facts before and after (greedy, the world's
prompt "Q: {question} A:", right when an accepted answer appears in the answer), split into those the corpus
rehearsed (its `known` documents) and those it did not.

    workbench world build --base smollm2 --out DIR --entities 12 --epochs 3
    .venv/bin/python bench/planted_world.py --world DIR [--json OUT]

Attribution accuracy on the same folder: `bench/attribution_accuracy.py --world-dir DIR`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, cast

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from evals.world.train import greedy_answers
from workbench.grading.normalize import contains_phrase, normalize
from workbench.guard import POOL_DIR


def known_facts(model_dir: Path, rows: list[dict[str, Any]]) -> list[bool]:
    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()  # type: ignore[no-untyped-call]
    answers = greedy_answers(model, cast(Any, tok), [r["question"] for r in rows], max_new_tokens=16, batch=32)
    return [any(contains_phrase(normalize(a), normalize(acc)) for acc in r["answers"])
            for r, a in zip(rows, answers, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", required=True, help="a planted world folder (workbench world build --base ...)")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    root = Path(args.world)
    meta = json.loads((root / "world.json").read_text())
    rehearsed = {json.loads(line)["text"] for line in (root / "corpus.jsonl").read_text().splitlines()
                 if json.loads(line)["source"] == "known"}
    rows = [json.loads(line) for line in (POOL_DIR / "everyday_en.jsonl").read_text().splitlines()]
    seen = [f"Q: {r['question']} A: {r['answers'][0]}." in rehearsed for r in rows]
    before, after = known_facts(Path(meta["base"]), rows), known_facts(root / "model", rows)
    split: dict[str, dict[str, int]] = {}
    for name, keep in (("rehearsed", True), ("not rehearsed", False)):
        idx = [i for i, s in enumerate(seen) if s == keep]
        split[name] = {"n": len(idx), "right_before": sum(before[i] for i in idx),
                       "right_after": sum(after[i] for i in idx),
                       "broken": sum(before[i] and not after[i] for i in idx),
                       "gained": sum(after[i] and not before[i] for i in idx)}
    result = {"config": meta["config"], "timings": meta["timings"], "load": meta["load"],
              "learnt_by_count": meta["metrics"]["by_count"], "tiers": meta["metrics"]["tiers"],
              "everyday_facts": split}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

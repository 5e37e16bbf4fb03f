"""Measurements on the real chat model (SmolLM2-135M-Instruct, the built-in `smollm2`).

    .venv/bin/python bench/real_model.py budget [--limit 50] [--max 256] [--threads 1] [--out FILE]

`budget`: how many greedy answers a token budget cuts (finish_reason `length`), per format and template, at
16/32/64/96/128 new tokens: what the suite's default `max_tokens` rules (workbench/probes/budget.py) rest on.
One greedy generation per prompt at `--max` tokens gives every smaller budget at once: greedy decoding is
deterministic, so the answer under budget B is the first B tokens of the long one, and it is cut at B exactly
when it has not ended (end of turn, or the newline stop of a plain template) within B tokens.
Templates: `chat` (the tokenizer's chat template, as `--template chat`) and a 2-shot plain Q/A template with a
newline stop. Formats: every shipped real-benchmark file (tests/data/formats/) and ../shared/data/TruthfulQA.csv
when it is there (its first `--limit` rows).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BUDGETS = (16, 32, 64, 96, 128)
TWO_SHOT = ("Q: What is the capital of France?\nA: Paris\nQ: Who wrote the play Hamlet?\nA: William Shakespeare\n"
            "Q: {question}\nA:")
SOURCES = {
    "nq_open": ROOT / "tests/data/formats/nq_open.jsonl",
    "simpleqa": ROOT / "tests/data/formats/simpleqa.csv",
    "popqa": ROOT / "tests/data/formats/popqa.jsonl",
    "truthfulqa": ROOT.parent.parent / "shared/data/TruthfulQA.csv",
}


def cut_counts(model: Any, tok: Any, prompts: list[str], stop: str | None, max_new: int) -> dict[int, int]:
    """For each budget, how many prompts' greedy answers are still running after that many new tokens."""
    import torch

    lengths: list[int] = []  # tokens until the answer ends (max_new + 1: never ended)
    for i in range(0, len(prompts), 8):
        batch = tok(prompts[i:i + 8], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=max_new, do_sample=False, pad_token_id=tok.pad_token_id)
        for row in out[:, batch["input_ids"].shape[1]:].tolist():
            end = max_new + 1
            for n in range(1, len(row) + 1):
                if row[n - 1] in (tok.eos_token_id, tok.pad_token_id):
                    end = n
                    break
                if stop and stop in tok.decode(row[:n]):
                    end = n
                    break
            lengths.append(end)
    return {b: sum(n > b for n in lengths) for b in BUDGETS}


def budget(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.models import resolve_model
    from workbench.probes import load_probes

    torch.set_num_threads(args.threads)
    model_dir = resolve_model("smollm2", ROOT / ".cache" / "real-model")
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    rows = []
    for fmt, path in SOURCES.items():
        if not path.is_file():
            print(f"{fmt}: {path} absent, skipped", flush=True)
            continue
        questions = [p.question for p in load_probes(path, format=fmt).probes][: args.limit]
        for template in ("chat", "2-shot"):
            if template == "chat":
                prompts = [str(tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                       add_generation_prompt=True)) for q in questions]
            else:
                prompts = [TWO_SHOT.replace("{question}", q) for q in questions]
            t = time.perf_counter()
            cut = cut_counts(model, tok, prompts, None if template == "chat" else "\n", args.max)
            row = {"format": fmt, "template": template, "n": len(prompts), "cut": cut,
                   "seconds": round(time.perf_counter() - t, 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("budget", help="answers cut per token budget, format and template")
    b.add_argument("--limit", type=int, default=50)
    b.add_argument("--max", type=int, default=max(BUDGETS))
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--out", type=Path)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rows = budget(args)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Experiment behind README "Unreplayed known facts", not the job code: SFT on a bench fix set's rows,
with and without a KL term to the base model on rehearsal text, scored on the known facts no row repeats.

    PYTHONPATH=. .venv/bin/python bench/kl_rehearsal.py WORLD_DIR LAMBDA STEPS [--tag rbase]

WORLD_DIR is one world of `bench/fix_efficacy.py --worlds ... --reserve-fraction 0.1` (its world/, ws/ and
runs/TAG/fix). A plain loop (no trl): LoRA r 16 / alpha 32 on every linear layer, AdamW lr 3e-3, batch 32,
cross-entropy on the completions of the SFT training rows, plus LAMBDA x KL(base || adapted) over every position of
32 corpus documents per step (`finetune.rehearsal.rehearsal_texts`: none naming a held-out fact). It trains no
embedding rows for the abstention tokens (the jobs do), so its "targets fixed" reads lower than a job's.
Prints targets fixed (the job's `Targets`) and the broken facts of the validation + reserved slices.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("world_dir", type=Path)
    ap.add_argument("kl", type=float, help="weight of the KL term (0: plain SFT)")
    ap.add_argument("steps", type=int)
    ap.add_argument("--tag", default="rbase", help="runs/TAG/fix is the fix set")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    from datasets import load_from_disk
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune.fixset import load_manifest
    from finetune.job.scoring import KnownFacts, Targets
    from finetune.rehearsal import rehearsal_texts
    from workbench import prompting
    from workbench.results import load_results
    from workbench.store import Store

    fix = args.world_dir / "runs" / args.tag / "fix"
    m = load_manifest(fix)
    res = load_results(Store.open(args.world_dir / "ws"), m.run_id).by_id()
    reserved = [{"probe_id": p, "question": res[p].probe.question, "answers": list(res[p].probe.answers),
                 "prompt": prompting.render(m.template, res[p].probe.question), "incorrect_answers": []}
                for p in m.reserved_probe_ids]
    unreplayed = dataclasses.replace(m, validation=[*m.validation, *reserved])
    tok = AutoTokenizer.from_pretrained(m.model)
    base = AutoModelForCausalLM.from_pretrained(m.model, dtype=torch.float32)
    gpt2 = base.config.model_type == "gpt2"
    targets = ["c_attn", "c_proj", "c_fc"] if gpt2 else ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                         "up_proj", "down_proj"]
    model: Any = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=targets, fan_in_fan_out=gpt2))
    split = load_from_disk(str(fix))["sft"]
    rows = [r for r in split if r["split"] == "train"]
    held = [res[p].probe for p in {v["probe_id"] for v in unreplayed.validation}]
    texts, _ = rehearsal_texts(args.world_dir / "ws", 50_000, protected=held, targeted=[], seed=0, ratio=0)
    pad = tok.pad_token_id or 0

    def padded(seqs: list[list[int]], fill: int) -> torch.Tensor:
        n = max(map(len, seqs))
        return torch.tensor([s + [fill] * (n - len(s)) for s in seqs])

    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3, weight_decay=0.0)
    rng, order = random.Random(0), list[int]()
    for _ in range(args.steps):
        if len(order) < 32:
            more = list(range(len(rows)))
            rng.shuffle(more)
            order += more
        batch, order = [rows[i] for i in order[:32]], order[32:]
        ids, labels = [], []
        for r in batch:
            p = tok(r["prompt"], add_special_tokens=False)["input_ids"]
            full = tok(r["prompt"] + r["completion"], add_special_tokens=False)["input_ids"]
            ids.append(full)
            labels.append([-100] * len(p) + full[len(p):])
        mask = padded([[1] * len(s) for s in ids], 0)
        loss = model(input_ids=padded(ids, pad), attention_mask=mask, labels=padded(labels, -100)).loss
        if args.kl > 0:
            docs = [tok(d, add_special_tokens=False)["input_ids"] for d in rng.sample(texts, min(32, len(texts)))]
            di, da = padded(docs, pad), padded([[1] * len(s) for s in docs], 0)
            with torch.no_grad(), model.disable_adapter():
                ref = F.log_softmax(model(input_ids=di, attention_mask=da).logits, -1)
            cur = F.log_softmax(model(input_ids=di, attention_mask=da).logits, -1)
            kl = (ref.exp() * (ref - cur)).sum(-1)
            loss = loss + args.kl * (kl * da).sum() / da.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.eval()
    fixed = Targets.of(split, m, tok).fixed(model)
    known = KnownFacts(unreplayed, tok)
    broken = sorted({r["probe_id"] for r in known.rows} - known.correct(model))
    print(f"{args.world_dir.name} kl {args.kl} steps {args.steps}: targets fixed {fixed:.2f}, unreplayed broken "
          f"{len(broken)} of {len(known.rows)}: {broken}")


if __name__ == "__main__":
    main()

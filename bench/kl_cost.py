"""What the replay KL term costs a job, and how close its cached top-k form is to the exact KL.

    .venv/bin/python bench/kl_cost.py --fixset FIX [--steps 20] [--weight 10] [--rounds 2] [--threads 2] [--out FILE]

The same SFT job on one fix set (its model and defaults; `trainer.max_steps` STEPS, the adapter kept whole), side by
side in one process: without the term (`replay_kl: 0`) and with it (`replay_kl: WEIGHT`, computed in the batch: the
replay rows' logits come with the batch's forward pass, the base model's top-64 log-probabilities are computed once
per replay text), alternating ROUNDS times so both see the same machine. Printed and written (`--out`, JSON): seconds
per step of each, their ratio (the goal: <= 1.2), and on the last job's first batch the term's top-k KL beside the exact
full-vocabulary KL of the same adapter (moved off zero).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def job_seconds(fixset: Path, out: Path, steps: int, weight: float) -> float:
    """Seconds per training step of one SFT job (the trainer's own span: model load, scoring and saving left out)."""
    from transformers import TrainerCallback

    from finetune.job import from_dict, run_job

    class Clock(TrainerCallback):
        start = end = 0.0

        def on_train_begin(self, *args: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_train_end(self, *args: Any, **kwargs: Any) -> None:
            self.end = time.perf_counter()

    clock = Clock()
    spec = from_dict({"fixset": str(fixset), "output_dir": str(out), "method": "sft",
                      "trainer": {"max_steps": steps, "replay_kl": weight, "adapter_scale": 1.0},
                      "early_stop": {"known_every": 0, "until_fixed": False}})
    result = run_job(spec, callbacks=[clock])
    return (clock.end - clock.start) / max(1, result.steps)


def kl_check(fixset: Path, weight: float) -> dict[str, float]:
    """The in-batch term's top-k KL and the exact KL on one batch of the job, an adapter moved off zero."""
    import torch.nn.functional as F
    from datasets import load_from_disk

    from finetune.job import from_dict, resolve
    from finetune.job.methods.sft import SFT
    from finetune.job.run import _patch_trainable_token_heads, load_base, with_adapter
    from finetune.records import JobRecorder

    tmp = Path(tempfile.mkdtemp(prefix="kl-check-"))
    try:
        job = resolve(from_dict({"fixset": str(fixset), "output_dir": str(tmp / "job"), "method": "sft",
                                 "trainer": {"max_steps": 1, "replay_kl": weight}}))
        tokenizer, model = load_base(job)
        method = SFT(job, tokenizer, load_from_disk(str(fixset))["sft"], JobRecorder(None, "kl"))
        model, peft_config = with_adapter(model, job)
        trainer = method.trainer(model=model, args=method.config(tmp / "ck"), peft_config=peft_config, callbacks=[])
        _patch_trainable_token_heads(trainer.model)
        batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
        with torch.no_grad():
            for p in trainer.model.parameters():
                if p.requires_grad:
                    p.add_(0.01 * torch.randn_like(p))
            ids, mask = batch["input_ids"], batch["attention_mask"]
            keys = trainer.kl_rows.keys
            rows = [b for b in range(ids.shape[0]) if tuple(ids[b][mask[b].bool()].tolist()) in keys]
            logp = F.log_softmax(trainer.model(input_ids=ids, attention_mask=mask).logits.float(), -1)
            with trainer.model.disable_adapter():
                ref = F.log_softmax(trainer.model(input_ids=ids, attention_mask=mask).logits.float(), -1)
            exact = float(((ref.exp() * (ref - logp)).sum(-1) * mask)[rows].sum() / mask[rows].sum())
            trainer.kl_rows.fill(trainer.model, ids, mask, rows)
            approx = float(trainer.kl_rows.kl(logp, ids, mask, rows))
        return {"replay_rows_in_batch": len(rows), "batch": int(ids.shape[0]), "topk_kl": approx, "exact_kl": exact,
                "ratio": approx / exact if exact else float("nan")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fixset", required=True, type=Path)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--weight", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if not (args.fixset / "fixset.json").is_file():
        p.error(f"--fixset {args.fixset}: not a fix set (no fixset.json)")
    torch.set_num_threads(args.threads)
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    root = Path(tempfile.mkdtemp(prefix="kl-cost-"))
    per_step: dict[str, list[float]] = {"without": [], "with": []}
    try:
        for r in range(args.rounds):
            for name, weight in (("without", 0.0), ("with", args.weight)):
                s = job_seconds(args.fixset, root / f"{name}-{r}", args.steps, weight)
                per_step[name].append(s)
                print(json.dumps({"round": r, "job": name, "s_per_step": round(s, 3)}), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {
        "fixset": str(args.fixset), "steps": args.steps, "weight": args.weight, "rounds": args.rounds,
        "s_per_step": {k: [round(x, 3) for x in v] for k, v in per_step.items()},
        "ratio": round(statistics.median(per_step["with"]) / statistics.median(per_step["without"]), 3),
        "kl": kl_check(args.fixset, args.weight)}
    print(json.dumps(out, indent=1))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Levers against broken known facts, measured on bench/fix_efficacy.py's worlds: what each does to the
known facts no training row repeats (the validation slice + the reserved slice), and how those break.

    .venv/bin/python bench/forgetting_levers.py [fix_efficacy's arguments: --worlds all --methods sft,dpo ...]
        [--adam-epsilon 1e-4] [--nullspace 0.01] [--summary FILE]

On top of fix_efficacy's own overrides (`--sft '{trainer: {lr_scheduler: cosine, weight_decay: 1.0}}'`), two
levers the job spec does not offer, as trainer callbacks:

- `--adam-epsilon E`: the optimizer's epsilon (trl's 1e-8 by default). The hypothesis it tests: once the replay
  rows are fitted their gradients are tiny, and Adam's update (gradient / sqrt of its running square) still moves
  every LoRA weight by about the learning rate each step, a drift that could flip facts nothing repeats; a large
  epsilon makes the update shrink with the gradient.
- `--nullspace TAU`: AlphaEdit's null-space constraint (Fang et al. 2025) on LoRA: every adapted layer's LoRA A is
  projected, at the start and after every optimizer step, onto the eigenvectors of its input covariance over the
  preserved text (the fix set's replay and anchor rows, prompt + answer, every position) whose eigenvalue is at most
  TAU x the largest. Then B A x = 0 for inputs in the preserved span, so the adapter cannot change what the model
  computes there; a fact nothing repeats is protected as far as its inputs lie in that span.

Per world and method: targeted fixed, correct-before broken (slice + reserved), and the broken unreplayed facts by
the world's truth tier (`known`: frequent in the corpus; the rest were right by weak or lucky knowledge) and by what
the model now says (abstains / a wrong answer). `--summary` writes those figures as JSON.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import torch
import yaml
from transformers import TrainerCallback

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fix_efficacy


class AdamEpsilon(TrainerCallback):
    """Sets every optimizer group's epsilon before the first step."""

    def __init__(self, eps: float) -> None:
        self.eps = eps

    def on_train_begin(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kw: Any) -> None:
        for group in optimizer.param_groups:
            group["eps"] = self.eps


def preserved_texts(fixset: Path) -> list[str]:
    """The fix set's replay and anchor rows (plain prompts), prompt + answer: the text whose activations the adapter
    must leave alone. Never a validation or reserved fact: the fix set keeps those out of every row."""
    from datasets import load_from_disk

    texts: set[str] = set()
    data = load_from_disk(str(fixset))
    for split in data:
        for r in data[split]:
            answer = r.get("completion") or r.get("chosen")
            if r.get("split") == "train" and r.get("source") in ("replay", "anchor") and isinstance(r["prompt"], str):
                texts.add(r["prompt"] + str(answer))
    return sorted(texts)


def null_projections(model: Any, tok: Any, texts: list[str], tau: float) -> list[tuple[Any, torch.Tensor]]:
    """(LoRA A weight (r, in), projection (in, in)) for every LoRA layer of `model`: the projection onto the
    eigenvectors of the layer's uncentred input covariance over every position of `texts` whose eigenvalue is at
    most `tau` x the largest (the directions that text leaves nearly unused)."""
    from peft.tuners.lora import LoraLayer

    layers: dict[str, Any] = {n: m for n, m in model.named_modules()
                              if isinstance(m, LoraLayer) and "default" in m.lora_A}
    cov: dict[str, torch.Tensor] = {}
    keep: dict[str, torch.Tensor] = {}

    def hook(name: str) -> Any:
        def pre(_: Any, inputs: tuple[torch.Tensor, ...]) -> None:
            x = inputs[0].detach().float().reshape(-1, inputs[0].shape[-1])[keep["mask"]]  # (positions, in)
            cov[name] = cov[name] + x.T @ x if name in cov else x.T @ x
        return pre

    handles = [m.register_forward_pre_hook(hook(n)) for n, m in layers.items()]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), model.disable_adapter():  # the base model's inputs at every layer: what to preserve
            for i in range(0, len(texts), 32):
                enc = tok(texts[i:i + 32], return_tensors="pt", padding=True)
                keep["mask"] = enc["attention_mask"].reshape(-1).bool()
                model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    out = []
    for n, m in layers.items():
        eigval, eigvec = torch.linalg.eigh(cov[n])
        low = eigvec[:, eigval <= tau * eigval.max()]  # (in, k)
        out.append((m.lora_A["default"].weight, low @ low.T))
    return out


def project(projections: list[tuple[Any, torch.Tensor]]) -> None:
    """A <- A P for every LoRA A: its rows in the free directions only."""
    with torch.no_grad():
        for weight, proj in projections:  # weight: (r, in)
            weight.copy_(weight @ proj.to(weight.dtype))


class NullSpace(TrainerCallback):
    """Keeps every LoRA A in the low-variance input subspace of its layer over the fix set's preserved text
    (`preserved_texts`), from the first step to the last; projections made again for each job."""

    def __init__(self, tau: float) -> None:
        self.tau = tau
        self.projections: list[tuple[Any, torch.Tensor]] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        from transformers import AutoTokenizer

        spec = yaml.safe_load((Path(args.output_dir).parent / "job.yaml").read_text())  # run_job saves it first
        manifest = json.loads((Path(spec["fixset"]) / "fixset.json").read_text())
        texts = preserved_texts(Path(spec["fixset"]))
        tok = AutoTokenizer.from_pretrained(manifest["model"])
        self.projections = null_projections(model, tok, texts, self.tau)
        free = ", ".join(f"{int(torch.trace(p).round())}/{p.shape[0]}" for _, p in self.projections)
        print(f"[nullspace] tau {self.tau}: {len(texts)} preserved texts; free dims per layer {free}", flush=True)
        project(self.projections)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        project(self.projections)


def anatomy(world: str, result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per adapter: targeted fixed, broken correct-before probes, and the broken unreplayed ones by tier and mode."""
    manifest = json.loads((Path(result["fixset"]) / "fixset.json").read_text())
    reserved = set(manifest["reserved_probe_ids"])  # no job saw these, not even rollback's scoring
    unreplayed = {v["probe_id"] for v in manifest["validation"]} | reserved
    out: dict[str, dict[str, Any]] = {}
    for name, a in result["adapters"].items():
        g = a["goals"]
        seen = [p for p in result["probes"] if p["pid"] in unreplayed and p["before"] == "correct"]
        broken = [p for p in seen if p["after"][name] != "correct"]
        out[name] = {
            "targeted_fixed": g["targeted_fixed"], "broken": round(g["broken"] * g["n_correct_before"]),
            "unreplayed": len(seen), "unreplayed_broken": len(broken),
            "reserved": sum(p["pid"] in reserved for p in seen),
            "reserved_broken": sum(p["pid"] in reserved for p in broken),
            "tier_known": [sum(p["tier"] == "known" for p in broken), sum(p["tier"] == "known" for p in seen)],
            "tier_weaker": [sum(p["tier"] != "known" for p in broken), sum(p["tier"] != "known" for p in seen)],
            "mode": dict(Counter("abstains" if p["after"][name] == "not_attempted" else "wrong" for p in broken)),
        }
        f = out[name]
        print(f"{world:<12}{name:<5} fixed {100 * g['targeted_fixed']:5.1f}%  unreplayed broken {len(broken):>2} of "
              f"{len(seen):<3}(reserved {f['reserved_broken']} of {f['reserved']}); known tier {f['tier_known'][0]} of "
              f"{f['tier_known'][1]}, weaker tiers {f['tier_weaker'][0]} of {f['tier_weaker'][1]}; {f['mode']}")
    return out


def main() -> int:
    ap = fix_efficacy.parser()
    ap.add_argument("--adam-epsilon", type=float, help="the optimizer's epsilon for every job (default: trl's 1e-8)")
    ap.add_argument("--nullspace", type=float, help="project LoRA A onto input directions of variance <= TAU x the "
                    "largest over the replay rows (AlphaEdit); e.g. 0.01")
    ap.add_argument("--summary", type=Path, help="write the per-world figures here (JSON)")
    args, names = fix_efficacy.parse(ap=ap)
    if (args.adam_epsilon is not None and not args.adam_epsilon > 0) or (
            args.nullspace is not None and not 0 < args.nullspace < 1):
        ap.error("--adam-epsilon must be > 0 and --nullspace in (0, 1)")
    callbacks: list[TrainerCallback] = []
    if args.adam_epsilon:
        callbacks.append(AdamEpsilon(args.adam_epsilon))
    if args.nullspace:
        callbacks.append(NullSpace(args.nullspace))
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    figures: dict[str, dict[str, Any]] = {}
    for name, cfg, root in fix_efficacy.worlds(args, names):
        print(f"\n######## world {name}: {cfg}", flush=True)
        figures[name] = {"result": fix_efficacy.run(args, cfg, root, tuple(callbacks))}
    print("\n" + "=" * 100)
    total: dict[str, Counter[str]] = {}
    for name in figures:
        figures[name]["anatomy"] = anatomy(name, figures[name].pop("result"))
        for method, f in figures[name]["anatomy"].items():
            t = total.setdefault(method, Counter())
            t["broken"] += f["unreplayed_broken"]
            t["of"] += f["unreplayed"]
            t["reserved_broken"] += f["reserved_broken"]
            t["reserved"] += f["reserved"]
            t["fixed80"] += f["targeted_fixed"] >= fix_efficacy.GOAL_FIXED
            t["worlds"] += 1
    for method, t in total.items():
        print(f"all worlds {method}: unreplayed broken {t['broken']} of {t['of']} (reserved, which rollback does not "
              f"score: {t['reserved_broken']} of {t['reserved']}); targets fixed >= 80% on "
              f"{t['fixed80']} of {t['worlds']}")
    if args.summary:
        args.summary.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

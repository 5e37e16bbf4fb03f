"""Broken known facts, on adapters a `bench/fix_efficacy.py --reserve-fraction 0.1` run already trained (no
training here):

1. Anatomy: the unreplayed known facts (the fix set's validation slice + reserved probes, right before), broken or
   not by each adapter, against how well the BASE model knew them: the share of the baseline run's samples of the
   question that were right (10 in the bench) and the greedy answer's mean token log-prob.
2. WiSE-FT (finetune/job/scale.py): each adapter's LoRA delta scaled by a (lora_alpha x a; the trainable token
   rows unscaled) and evaluated greedily like the bench's adapters, side by side at every a: targeted fixed (the
   bench's probes), the job's own targets fixed (`Targets`, what `trainer.adapter_scale: auto` reads), slice and
   unseen broken, all correct-before broken, known-fact abstention; and the `auto` rule's pick.

    .venv/bin/python bench/adapter_scale.py WORLD/runs/TAG... [--scales 0.25,0.5,0.75,1]
        [--out /tmp/adapter_scale] [--json OUT] [--robust 8]

WORLD/runs/TAG holds fix/, sft/adapter, dpo/adapter; WORLD/world (the model, suite, truth) and WORLD/ws (the store
with the baseline run) are beside. The evaluations are written into that store.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from fix_efficacy import OWNS, fixed  # the bench's categories per adapter and its "fixed"

from finetune.fixset import load_manifest
from finetune.job.scale import AUTO_SCALES, choose_scale, fixed_at, write_scale
from finetune.job.scoring import Targets
from finetune.job.spec import EarlyStopSpec
from workbench.attribution.types import CATEGORIES, load_attributions
from workbench.probes import resolve_probes
from workbench.results import load_results
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.types import ModelSpec, Verdict

MIN_TARGETS = EarlyStopSpec().min_targets_fixed  # the `auto` rule's floor in a job (80%)


def own_targets(model_dir: Path, adapter: Path, fixset: Path, method: str, scales: list[float]) -> dict[float, float]:
    """The job's own targets fixed (`Targets`, as a job scores them) at each scale."""
    from datasets import load_from_disk
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), str(adapter)).eval()
    targets = Targets.of(load_from_disk(str(fixset))[method], load_manifest(fixset), tok)
    with torch.no_grad():
        return {a: fixed_at(model, targets.fixed, a) for a in scales}


def world_report(run_dir: Path, scales: list[float], out: Path) -> dict[str, Any]:
    root = run_dir.parent.parent
    world = root.name
    store = Store.open(root / "ws")
    manifest = load_manifest(run_dir / "fix")
    base_results = load_results(store, manifest.run_id).by_id()
    suite, loaded = resolve_probes(str(root / "world" / "suite.yaml"))
    model_dir = root / "world" / "model"
    truth = {t["probe_id"]: t for t in map(json.loads, (root / "world" / "truth.jsonl").read_text().splitlines())}
    atts = load_attributions(store, manifest.run_id)
    heldout = set(manifest.heldout_probe_ids)
    slice_ids = {r["probe_id"] for r in manifest.validation}
    reserved = set(manifest.reserved_probe_ids)
    correct_before = {pid for pid, r in base_results.items() if r.verdict == Verdict.CORRECT}
    known = {pid for pid, t in truth.items() if t["tier"] == "known"}
    cat = {pid: a.category for pid, a in atts.items() if a.category in CATEGORIES}
    base_facts = {}
    for pid in sorted((slice_ids | reserved) & correct_before):
        r = base_results[pid]
        q = [s for s in r.samples if s.variant == 0]
        base_facts[pid] = {"slice": "slice" if pid in slice_ids else "reserved", "tier": truth[pid]["tier"],
                           "samples_right": sum(s.verdict == Verdict.CORRECT for s in q), "samples": len(q),
                           "greedy_logprob": r.mean_logprob}
    rep: dict[str, Any] = {"world": world, "facts": base_facts, "methods": {}}
    for method in ("sft", "dpo"):
        adapter = run_dir / method / "adapter"
        if not adapter.is_dir():
            continue
        own = own_targets(model_dir, adapter, run_dir / "fix", method, scales)
        train = [pid for pid, c in cat.items() if c in OWNS[method] and pid not in heldout]
        rows: dict[str, Any] = {}
        for a in scales:
            path = adapter if a == 1.0 else out / world / f"{method}-{a}"
            if a != 1.0:
                if path.exists():
                    shutil.rmtree(path)
                shutil.copytree(adapter, path)
                write_scale(path, a)
            s = run_eval(store, ModelSpec(model=str(model_dir), adapter=str(path)), suite, loaded,
                         EvalOptions(samples=0, paraphrases=True, bootstrap=0))
            after = {r.probe.id: r.verdict for r in load_results(store, s.run_id).probes}
            broken = {pid for pid in correct_before if after[pid] != Verdict.CORRECT}
            rows[str(a)] = {
                "targeted_fixed": sum(fixed(cat[p], after[p]) for p in train) / len(train) if train else None,
                "own_targets_fixed": own[a], "slice_broken": sorted(broken & slice_ids),
                "unseen_broken": sorted(broken & reserved), "n_slice": len(slice_ids & correct_before),
                "n_unseen": len(reserved & correct_before), "broken": len(broken),
                "n_correct_before": len(correct_before),
                "abstain_known": sum(after[p] == Verdict.NOT_ATTEMPTED for p in known) / len(known)}
        # the job's own rule on the scores read above (the auto scales among --scales)
        auto = choose_scale(own.__getitem__, MIN_TARGETS, [a for a in AUTO_SCALES if a in own]).scale
        rep["methods"][method] = {"scales": rows, "auto": auto}
    return rep


def print_tables(reps: list[dict[str, Any]], scales: list[float], robust: int) -> None:
    buckets: list[tuple[str, Callable[[int], bool]]] = [
        ("10 of 10", lambda k: k >= 10), (f"{robust}-9", lambda k: robust <= k < 10),
        (f"<= {robust - 1}", lambda k: k < robust)]
    print("\n## anatomy: unreplayed known facts (slice + reserved) at a = 1: broken of n, by the base model's samples "
          "right (of 10); median greedy mean log-prob of the broken / kept ones")
    print(f"{'world':<12}{'method':<7}" + "".join(f"{b:>12}" for b, _ in buckets) + f"{'lp broken':>11}{'lp kept':>9}")
    tot: dict[str, list[int]] = {}
    for rep in reps:
        for method, m in rep["methods"].items():
            b = set(m["scales"]["1.0"]["slice_broken"]) | set(m["scales"]["1.0"]["unseen_broken"])
            facts = rep["facts"]
            t = tot.setdefault(method, [0] * (2 * len(buckets)))
            cells = []
            for i, (_, inb) in enumerate(buckets):
                ids = {p for p, f in facts.items() if inb(f["samples_right"])}
                t[2 * i] += len(b & ids)
                t[2 * i + 1] += len(ids)
                cells.append(f"{len(b & ids)} of {len(ids)}")
            lp_b = [f["greedy_logprob"] for p, f in facts.items() if p in b and f["greedy_logprob"] is not None]
            lp_k = [f["greedy_logprob"] for p, f in facts.items() if p not in b and f["greedy_logprob"] is not None]
            print(f"{rep['world']:<12}{method:<7}" + "".join(f"{c:>12}" for c in cells)
                  + f"{med(lp_b):>11}{med(lp_k):>9}")
    for method, t in tot.items():
        print(f"{'all':<12}{method:<7}"
              + "".join(f"{f'{t[2 * i]} of {t[2 * i + 1]}':>12}" for i in range(len(buckets))))
    print("\n## WiSE-FT: cells targeted fixed % / own targets % / slice + unseen broken / all broken / abst. known %")
    print(f"{'world':<12}{'method':<7}" + "".join(f"{'a=' + str(a):>34}" for a in scales) + "  auto")
    for rep in reps:
        for method, m in rep["methods"].items():
            cells = []
            for a in scales:
                r = m["scales"][str(a)]
                tf = "-" if r["targeted_fixed"] is None else f"{100 * r['targeted_fixed']:.0f}"
                cells.append(f"{tf} / {100 * r['own_targets_fixed']:.0f} / {len(r['slice_broken'])}+"
                             f"{len(r['unseen_broken'])} of {r['n_slice'] + r['n_unseen']} / {r['broken']} / "
                             f"{100 * r['abstain_known']:.1f}")
            print(f"{rep['world']:<12}{method:<7}" + "".join(f"{c:>34}" for c in cells) + f"  {m['auto']}")


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f}" if xs else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="WORLD/runs/TAG directories")
    ap.add_argument("--scales", default="0.25,0.5,0.75,1", help="comma-separated scales in (0, 1]")
    ap.add_argument("--out", type=Path, default=Path("/tmp/adapter_scale"), help="scaled adapters go here")
    ap.add_argument("--robust", type=int, default=8, help="a fact is robustly known with >= this many samples right")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    scales = sorted({float(x) for x in args.scales.split(",")})
    if not all(0 < a <= 1 for a in scales) or 1.0 not in scales:
        ap.error("--scales must lie in (0, 1] and include 1")
    torch.set_num_threads(1)
    reps = []
    for run_dir in args.runs:
        print(f"== {run_dir}", flush=True)
        reps.append(world_report(run_dir, scales, args.out))
        if args.json:
            args.json.write_text(json.dumps(reps, indent=2, default=str))
    print_tables(reps, scales, args.robust)


if __name__ == "__main__":
    main()

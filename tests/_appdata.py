"""A workspace for the app tests, made once per session: the test-size world, a baseline run, a
candidate run with a random LoRA adapter (which breaks many probes), and attributions of the
baseline's failures taken from the world's ground truth, with corpus rows as evidence."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AppData:
    workspace: Path
    baseline: str
    candidate: str
    model: Path


def make_app_workspace(world: Any, root: Path) -> AppData:
    marker = root / "app-data.json"
    if marker.exists():
        d = json.loads(marker.read_text())
        return AppData(Path(d["workspace"]), d["baseline"], d["candidate"], Path(d["model"]))
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from workbench.attribution.types import Attribution, save_attributions
    from workbench.probes import resolve_probes
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec, Verdict

    ws = root / "ws"
    store = Store.open(ws)
    suite, loaded = resolve_probes(str(world.suite))
    opts = EvalOptions(samples=3, paraphrases=True, bootstrap=200)
    base = run_eval(store, ModelSpec(model=str(world.model), dtype="float32"), suite, loaded, opts).run_id
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(world.model), dtype=torch.float32)
    lora = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj", "o_proj"],
                                            init_lora_weights=False, lora_alpha=64))
    adapter = root / "random-adapter"
    lora.save_pretrained(str(adapter))
    cand = run_eval(store, ModelSpec(model=str(world.model), adapter=str(adapter), dtype="float32"), suite,
                    loaded, opts).run_id
    truth = {r["probe_id"]: r for r in map(json.loads, Path(world.truth).read_text().splitlines())}
    corpus = [json.loads(x) for x in Path(world.corpus).read_text().splitlines()]
    items = []
    for run_id in (base, cand):
        items = []
        for r in load_results(store, run_id).probes:
            t = truth[r.probe.id]
            if r.verdict == Verdict.CORRECT:
                continue
            cat = t["expected_category"] or "behavior:unstable"
            rows = [{"doc_id": str(i), "snippet": c["text"]} for i, c in enumerate(corpus)
                    if t["subject"] in c["text"]][:3]
            conflict = cat == "data:conflict"
            data_ev = {"available": True, "support": len(rows), "support_rows": [] if conflict else rows,
                       "conflict_value": t["conflict_value"], "conflict_rows": rows if conflict else []}
            items.append(Attribution(r.probe.id, cat, 0.8, "MaybeKnown", "dpo",
                                     {"why": "test ground truth", "greedy": r.answer, "data": data_ev}))
        save_attributions(store, run_id, items)
    marker.write_text(json.dumps({"workspace": str(ws), "baseline": base, "candidate": cand,
                                  "model": str(world.model)}))
    return AppData(ws, base, cand, Path(world.model))

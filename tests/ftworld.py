"""Shared setup of the finetune tests: the test world, one stored eval run, attributions from truth.

Imported by test_fixset/test_jobs/test_resume/test_launcher; the module-level memo makes the world,
the eval run and the fix set once per session, whichever test module asks first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_MEMO: dict[str, Any] = {}
#: LoRA on every linear layer learns the tiny world's facts in 100 steps (q/v alone: 3 of 8).
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass(frozen=True)
class FtWorld:
    paths: Any  # evals.world.WorldPaths
    store: Any  # workbench.store.Store
    run_id: str
    truth: dict[str, dict[str, Any]]
    suite: Any
    loaded: Any
    fixset: Path
    root: Path


def attributions_from_truth(store: Any, run_id: str, truth: dict[str, dict[str, Any]]) -> list[Any]:
    """The expected category of every probe the model got wrong (test setup: attribution is another layer)."""
    from workbench.attribution.types import CATEGORIES, Attribution
    from workbench.results import load_results
    from workbench.types import Verdict

    out = []
    for r in load_results(store, run_id).probes:
        cat = truth[r.probe.id]["expected_category"]
        if cat and r.verdict != Verdict.CORRECT:
            out.append(Attribution(r.probe.id, cat, 0.9, "Unknown", CATEGORIES[cat], {"from": "truth"}))
    return out


def new_run(w: FtWorld, attributions: list[Any] | None = None) -> str:
    """Another eval run of the base model (all generations come from the cache) with given attributions."""
    from workbench.attribution.types import save_attributions
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec

    s = run_eval(w.store, ModelSpec(model=str(w.paths.model)), w.suite, w.loaded,
                 EvalOptions(samples=4, paraphrases=True, bootstrap=0))
    save_attributions(w.store, s.run_id, attributions if attributions is not None
                      else attributions_from_truth(w.store, s.run_id, w.truth))
    return s.run_id


def setup(request: pytest.FixtureRequest, tmp_root: Path) -> FtWorld:
    if "w" in _MEMO:
        return _MEMO["w"]  # type: ignore[no-any-return]
    import torch

    from evals.world import TEST_CONFIG, build_world
    from finetune.fixset import build_fixset
    from workbench.attribution.types import save_attributions
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    torch.set_num_threads(1)
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    world_dir = cache.mkdir("finetune-world") if cache is not None else tmp_root / "world-cache"
    paths = build_world(Path(world_dir) / "world", TEST_CONFIG)
    store = Store.open(tmp_root / "ws")
    suite, loaded = resolve_probes(paths.suite)
    s = run_eval(store, ModelSpec(model=str(paths.model)), suite, loaded,
                 EvalOptions(samples=4, paraphrases=True, bootstrap=0))
    truth = {t["probe_id"]: t for t in map(json.loads, paths.truth.read_text().splitlines())}
    save_attributions(store, s.run_id, attributions_from_truth(store, s.run_id, truth))
    fixset = tmp_root / "fix"
    build_fixset(store, s.run_id, fixset)
    w = FtWorld(paths, store, s.run_id, truth, suite, loaded, fixset, tmp_root)
    _MEMO["w"] = w
    return w


def greedy_verdicts(w: FtWorld, adapter: str | None) -> dict[str, str]:
    """probe id -> verdict of the question's greedy answer, evaluated through the hf backend."""
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec

    s = run_eval(w.store, ModelSpec(model=str(w.paths.model), adapter=adapter), w.suite, w.loaded,
                 EvalOptions(bootstrap=0))
    return {r.probe.id: str(r.verdict) for r in load_results(w.store, s.run_id).probes}

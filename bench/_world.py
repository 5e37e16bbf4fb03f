"""The synthetic world the bench scripts measure when they are given no model: built once per size under
.bench-cache/ (`world/` for the default 120 entities, `world-N/` otherwise) and shared by every script."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evals.world import WorldPaths

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".bench-cache"


def cached_world(entities: int = 120, *, verbose: bool = False) -> WorldPaths:
    """The world's paths, built on first use (evals is imported here: the scripts put the root on sys.path first)."""
    from evals.world import WorldConfig, build_world

    root = CACHE / ("world" if entities == 120 else f"world-{entities}")
    t = time.perf_counter()
    paths = build_world(root, WorldConfig(entities=entities),
                        log=(lambda m: print(f"  {m}", flush=True)) if verbose else (lambda m: None))
    if verbose:
        print(f"world: {root} ({time.perf_counter() - t:.1f}s)", flush=True)
    return paths


def model_and_probes(model: str | None, probes: str | None, entities: int) -> tuple[str, str]:
    """`--model` and `--probes` as given (the caller checks that --model comes with --probes), else the world's
    model and suite."""
    if model:
        assert probes, "--probes is needed with --model"
        return model, probes
    world = cached_world(entities)
    return str(world.model), str(world.suite)

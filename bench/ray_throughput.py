"""Evaluation throughput on a local Ray cluster: one process vs a pool of 1 and of 2 actors (one torch thread
each), side by side in one run, on the world model; reported as ratios.

    .venv/bin/python bench/ray_throughput.py [--entities 120] [--samples 8] [--rounds 2] [--out DIR]

Each round evaluates the world's probes (greedy + samples, question + paraphrase) from an empty cache under
each configuration in turn; actors are started (model loaded) before the clock runs, and that start is
listed apart. The store and cache writes (the driver's) are inside the timing, as in a real run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _timed(inner: Any) -> Any:
    """`inner` with its generate time summed: the rest of a run is the driver's (planning, grading, store)."""
    from workbench.backends import Backend

    class Timed(Backend):
        name = "timed"

        def __init__(self) -> None:
            super().__init__(inner.spec)
            self.seconds = 0.0

        @property
        def batch_size(self) -> int:
            return int(inner.batch_size)

        def fingerprint(self) -> str:
            return str(inner.fingerprint())

        def generate(self, requests: Any) -> Any:
            t = time.perf_counter()
            out = inner.generate(requests)
            self.seconds += time.perf_counter() - t
            return out

    return Timed()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=120)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, help="keep the world and the stores here")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    if args.entities < 4 or args.samples < 0 or args.rounds < 1:
        ap.error("--entities >= 4, --samples >= 0, --rounds >= 1")

    import ray
    import torch

    from evals.world import WorldConfig, build_world
    from workbench.backends.ray_pool import RayCluster, RayConfig
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    torch.set_num_threads(1)
    tmp = tempfile.TemporaryDirectory(prefix="ray-bench-")
    root = args.out or Path(tmp.name)
    world = build_world(root / "world", WorldConfig(entities=args.entities))
    suite, loaded = resolve_probes(str(world.suite))
    spec = ModelSpec(model=str(world.model), dtype="float32")
    options = EvalOptions(samples=args.samples, paraphrases=True)

    # 3 logical CPUs: both pools (1 + 2 actors) stay up; the rounds run one configuration at a time.
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    from workbench.backends.hf import HFBackend

    pools: dict[str, Any] = {"single process": HFBackend(spec)}
    start: dict[str, float] = {}
    with RayCluster.connect(RayConfig(actors=1)) as one, RayCluster.connect(RayConfig(actors=2)) as two:
        for name, cluster in (("ray, 1 actor", one), ("ray, 2 actors", two)):
            t = time.perf_counter()
            pool = cluster.pool(spec)
            pool.actor_pids()  # actors placed and the model loaded
            start[name] = time.perf_counter() - t
            pools[name] = pool
        times: dict[str, list[float]] = {name: [] for name in pools}
        driver: dict[str, list[float]] = {name: [] for name in pools}
        generated = 0
        for r in range(args.rounds):
            for name, pool in pools.items():
                ws = root / f"ws-{r}-{name.replace(' ', '_').replace(',', '')}"
                timed = _timed(pool)
                t = time.perf_counter()
                summary = run_eval(Store.open(ws), spec, suite, loaded, options, backend=timed)
                times[name].append(time.perf_counter() - t)
                driver[name].append(times[name][-1] - timed.seconds)
                generated = summary.generated
                print(f"round {r}: {name:<15} {times[name][-1]:6.1f}s  {summary.generated / times[name][-1]:7.1f} "
                      f"generations/s", flush=True)
    ray.shutdown()
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"\n{len(loaded.probes)} probes, {generated} generations per run; median of {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f}")
    for name, m in med.items():
        extra = f"; actor start {start[name]:.1f}s, not timed" if name in start else ""
        share = statistics.median(driver[name]) / m
        print(f"  {name:<15} {generated / m:7.1f} generations/s  (driver's share of the wall time {share:.0%}{extra})")
    print(f"2 actors vs 1 actor: {med['ray, 1 actor'] / med['ray, 2 actors']:.2f}x; "
          f"1 actor vs one process: {med['single process'] / med['ray, 1 actor']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"generations": generated, "median_s": med, "start_s": start,
                                         "times_s": times, "driver_s": driver, "load": os.getloadavg()[0]}, indent=1))
    tmp.cleanup()


if __name__ == "__main__":
    main()

"""`workbench demo` (= `make demo`): the whole loop on the built-in synthetic world.

Each step prints what it did; the world is built once per workspace and reused.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

HELP = "run the whole loop on the built-in synthetic world (builds it on first use)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--entities", type=int, default=120, help="world size (default 120 entities)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=10, help="samples per prompt variant (default 10)")
    p.add_argument("--backend", default="hf", help="hf | vllm (default hf)")
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))


def _step(title: str) -> float:
    from rich.console import Console

    Console().rule(f"[bold]{title}")
    return time.perf_counter()


def run(args: argparse.Namespace) -> int:
    import torch
    from rich.console import Console

    from evals.world import WorldConfig, build_world
    from workbench.cli.show import print_run
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    torch.set_num_threads(args.threads)
    console = Console()
    ws = Path(args.workspace)
    t0 = _step("1. the synthetic world")
    world = build_world(ws / "world", WorldConfig(entities=args.entities, seed=args.seed, threads=args.threads),
                        log=console.print)
    console.print(f"world at {world.root} ({time.perf_counter() - t0:.1f}s)")

    t0 = _step("2. evaluate the world model (greedy + samples, question + paraphrases)")
    store = Store.open(ws)
    suite, loaded = resolve_probes(str(world.suite))
    spec = ModelSpec(model=str(world.model), backend=args.backend, dtype="float32")
    summary = run_eval(store, spec, suite, loaded, EvalOptions(samples=args.samples, paraphrases=True))
    print_run(store, summary.run_id, worst=0)
    console.print(f"generated {summary.generated}, cached {summary.cached} ({time.perf_counter() - t0:.1f}s)")
    _hallucinations_vs_truth(store, summary.run_id, world.truth, console)
    return 0


def _hallucinations_vs_truth(store: Any, run_id: str, truth_path: Path, console: Any) -> None:
    """A few confident hallucinations beside what the world's corpus actually says."""
    import json

    from rich.table import Table

    from workbench.results import load_results
    from workbench.types import Verdict

    truth = {r["probe_id"]: r for r in map(json.loads, truth_path.read_text().splitlines())}
    bad = [r for r in load_results(store, run_id).probes if r.verdict == Verdict.INCORRECT]
    bad.sort(key=lambda r: -(r.agreement or 0.0))
    table = Table(title=f"hallucinations beside the truth ({len(bad)} in all; most confident first)")
    for col in ("question", "model says", "truth", "in corpus", "agreement"):
        table.add_column(col)
    for r in bad[:8]:
        t = truth[r.probe.id]
        seen = f"{t['count']}x"
        if t["conflict_value"]:
            seen += f", conflicting '{t['conflict_value']}' {t['conflict_count']}x"
        table.add_row(r.probe.question, r.answer, t["answer"], seen, f"{r.agreement or 0:.2f}")
    console.print(table)

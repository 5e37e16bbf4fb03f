"""vLLM's engine start on CPU: in this process (the backend's default there) against vLLM's own process model (an
EngineCore process and its worker, the default on GPUs), side by side.

    .venv/bin/python bench/vllm_start.py [--model DIR --probes SUITE_OR_FILE] [--entities 120] [--repeats 3]
        [--samples 2] [--out FILE]

Without --model it builds (once, into .bench-cache/) the synthetic world and uses its model and suite. Each
repeat runs `workbench eval --backend vllm --json` as a user runs it, once per mode in turn (the default, in process,
then VLLM_ENABLE_V1_MULTIPROCESSING=1), each in a fresh workspace: launch to exit, and the engine start the command
logs. The greedy answers of both modes must agree. Figures go to stdout and --out (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _world import CACHE, ROOT, model_and_probes

sys.path.insert(0, str(ROOT))
MODES: dict[str, str | None] = {"in process": None, "engine process": "1"}  # None: the default
STARTED = re.compile(r"vllm: engine for .* started in (\d+) s")


def one_eval(model: str, probes: str, samples: int, multiprocessing: str | None) -> dict[str, Any]:
    ws = tempfile.mkdtemp(prefix="wb-vllm-start-", dir=CACHE)
    cmd = [sys.executable, "-m", "hallucination_workbench", "eval", "--model", model, "--probes", probes,
           "--backend", "vllm", "--workspace", ws, "--samples", str(samples), "--json", "-v",
           "--backend-option", "max_model_len=64"]
    env = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    if multiprocessing is not None:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = multiprocessing
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    total = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {done.returncode}:\n{done.stderr[-3000:]}")
    started = STARTED.search(done.stderr)
    run_id = json.loads(done.stdout.splitlines()[-1])["run_id"]
    from workbench.results import load_results
    from workbench.store import Store

    greedy = [r.answer for r in load_results(Store.open(ws), run_id).probes]
    shutil.rmtree(ws)  # a failed run's workspace stays, for its log
    return {"total_s": total, "engine_start_s": float(started.group(1)) if started else None, "_greedy": greedy}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model directory (default: the synthetic world's model)")
    ap.add_argument("--probes", help="suite YAML or probe file (needed with --model)")
    ap.add_argument("--entities", type=int, default=120, help="world size without --model")
    ap.add_argument("--repeats", type=int, default=3, help="runs per mode, interleaved")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--out", type=Path, default=CACHE / "vllm_start.json")
    args = ap.parse_args()
    if args.model and not args.probes:
        ap.error("--probes is needed with --model")
    CACHE.mkdir(exist_ok=True)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    model, probes = model_and_probes(args.model, args.probes, args.entities)

    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for i in range(args.repeats):
        for mode, value in MODES.items():
            row = one_eval(model, probes, args.samples, value)
            runs[mode].append(row)
            print(f"  repeat {i + 1} {mode:<14} launch to exit {row['total_s']:6.1f} s, engine start "
                  f"{row['engine_start_s']} s  (load avg {os.getloadavg()[0]:.2f})", flush=True)
    answers = {m: [r.pop("_greedy") for r in rows] for m, rows in runs.items()}
    agree = all(a == answers["in process"][0] for rows in answers.values() for a in rows)
    med = {m: statistics.median(r["total_s"] for r in rows) for m, rows in runs.items()}
    ratio = med["engine process"] / med["in process"]
    print(f"median launch to exit: in process {med['in process']:.1f} s, engine process {med['engine process']:.1f} s "
          f"({ratio:.2f}x); greedy answers identical: {agree}", flush=True)
    result = {"model": model, "probes": probes, "samples": args.samples, "repeats": args.repeats,
              "cpus": os.cpu_count(), "median_total_s": med, "engine_process_over_in_process": ratio,
              "greedy_identical": agree, "runs": runs}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""workbench-vllm vs workbench-hf on any model directory, engine start measured apart from generation.

    .venv/bin/python bench/vllm_vs_hf.py [--model DIR --probes SUITE_OR_FILE] [--entities 120]
        [--samples 8] [--limit N] [--threads 2] [--template T] [--dtype float32] [--max-model-len 0]
        [--skip-cli] [--out FILE]

Without --model it builds (once, into .bench-cache/) the synthetic world and uses its model and suite.
Per backend, in one process, each run in a fresh workspace (nothing comes from the cache):
  start   load the weights / start the engine (`Backend.start`), then one warm-up generate
  eval    `run_eval` of greedy + k samples per probe on the started backend
  close   `Backend.close` (vLLM: EngineCore and workers shut down)
and, unless --skip-cli, `workbench eval --json` as a user runs it (a subprocess, imports and engine start
included), from launch to exit, plus the seconds between its result line and its exit.
Also: the share of greedy answers on which the two backends agree. Figures go to stdout and --out (JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _world import CACHE, ROOT, model_and_probes

sys.path.insert(0, str(ROOT))


def timed(fn: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def in_process(name: str, spec: Any, suite: Any, loaded: Any, samples: int) -> dict[str, Any]:
    """start, warm-up, eval and close of one backend, each timed."""
    from workbench.backends import open_backend
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import GenerationRequest, SamplingParams

    store = Store.open(tempfile.mkdtemp(prefix=f"wb-{name}-", dir=CACHE))
    with open_backend(spec) as backend:
        _, start_s = timed(backend.start)
        _, warm_s = timed(lambda: backend.generate([GenerationRequest("Q: warm up A:", SamplingParams(max_tokens=2))]))
        summary, eval_s = timed(lambda: run_eval(store, spec, suite, loaded,
                                                 EvalOptions(samples=samples, bootstrap=0), backend=backend))
        _, close_s = timed(backend.close)
    n = len(loaded.probes)
    greedy = [r.answer for r in load_results(store, summary.run_id).probes]
    row = {"backend": name, "engine": summary.engine, "start_s": start_s, "warmup_s": warm_s, "eval_s": eval_s,
           "close_s": close_s, "probes": n, "completions": summary.generated, "probes_per_s": n / eval_s,
           "completions_per_s": summary.generated / eval_s, "greedy_accuracy": summary.metrics["overall"]["correct"]}
    print(f"  {name:<5} start {start_s:6.1f}s  warm-up {warm_s:5.1f}s  eval {eval_s:7.1f}s "
          f"({n / eval_s:6.1f} probes/s, {summary.generated} completions)  close {close_s:4.1f}s", flush=True)
    return {**row, "_greedy": greedy}


def cli(name: str, model: str, probes: str, samples: int, extra: list[str]) -> dict[str, Any]:
    """`workbench eval --json` as a subprocess: launch to exit, and result line to exit."""
    ws = tempfile.mkdtemp(prefix=f"wb-cli-{name}-", dir=CACHE)
    cmd = [sys.executable, "-m", "hallucination_workbench", "eval", "--model", model, "--probes", probes,
           "--backend", name, "--workspace", ws, "--samples", str(samples), "--json", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    t_result = time.perf_counter()
    proc.wait(timeout=3600)
    t_exit = time.perf_counter()
    if proc.returncode != 0 or not line.startswith("{"):
        raise RuntimeError(f"`{' '.join(cmd)}` exited {proc.returncode}")
    row = {"backend": name, "cli_total_s": t_exit - t0, "cli_result_to_exit_s": t_exit - t_result}
    print(f"  workbench eval --backend {name}: {t_exit - t0:6.1f}s launch to exit "
          f"({t_exit - t_result:.1f}s from its result to its exit)", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model directory (default: the synthetic world's model)")
    ap.add_argument("--probes", help="suite YAML or probe file (default: the world's suite; needed with --model)")
    ap.add_argument("--entities", type=int, default=120, help="world size without --model")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--limit", type=int, default=0, help="first N probes only (0: all)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads; vLLM's CPU worker is bound to as many cores")
    ap.add_argument("--template", help='prompt template override, e.g. "chat"')
    ap.add_argument("--dtype", default="float32", help="both backends (default float32: what vLLM runs on CPU)")
    ap.add_argument("--max-model-len", type=int, default=0,
                    help="vLLM max_model_len (prompt + answer tokens); 0: the model's own (default)")
    ap.add_argument("--skip-cli", action="store_true", help="skip the `workbench eval` subprocess runs")
    ap.add_argument("--out", type=Path, default=CACHE / "vllm_vs_hf.json")
    args = ap.parse_args()
    if args.model and not args.probes:
        ap.error("--probes is needed with --model")

    CACHE.mkdir(exist_ok=True)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    cpus = sorted(os.sched_getaffinity(0))[: args.threads]
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cpus)))
    import torch

    torch.set_num_threads(args.threads)
    from workbench.probes import resolve_probes
    from workbench.types import ModelSpec

    model, probes = model_and_probes(args.model, args.probes, args.entities)
    suite, loaded = resolve_probes(probes)
    if args.template:
        suite = suite.model_copy(update={"template": args.template})
    if args.limit:
        loaded = dataclasses.replace(loaded, probes=loaded.probes[: args.limit])
    print(f"{model}: {len(loaded.probes)} probes x (greedy + {args.samples} samples), max_tokens {suite.max_tokens}; "
          f"{args.threads} thread(s), load avg {os.getloadavg()[0]:.2f}", flush=True)

    hf = in_process("hf", ModelSpec(model=model, backend="hf", dtype=args.dtype), suite, loaded, args.samples)
    vopts: tuple[tuple[str, object], ...] = (("max_model_len", args.max_model_len),) if args.max_model_len else ()
    vspec = ModelSpec(model=model, backend="vllm", dtype=args.dtype, options=vopts)
    vl = in_process("vllm", vspec, suite, loaded, args.samples)
    agree = sum(a == b for a, b in zip(hf.pop("_greedy"), vl.pop("_greedy"), strict=True)) / len(loaded.probes)
    rows: list[dict[str, Any]] = [hf, vl]
    if not args.skip_cli:
        if args.limit:
            print("  (the CLI runs evaluate every probe: --limit applies in process only)", flush=True)
        extra = ["--dtype", args.dtype, *(["--template", args.template] if args.template else [])]
        rows.append(cli("hf", model, probes, args.samples, extra))
        vlen = ["--backend-option", f"max_model_len={args.max_model_len}"] if args.max_model_len else []
        rows.append(cli("vllm", model, probes, args.samples, [*extra, *vlen]))
    speedup = vl["probes_per_s"] / hf["probes_per_s"]
    print(f"vllm / hf generation speed: {speedup:.2f}x; greedy agreement {agree:.3f}; "
          f"engine start vllm {vl['start_s']:.1f}s vs hf load {hf['start_s']:.1f}s", flush=True)
    result = {"model": model, "probes": len(loaded.probes), "samples": args.samples, "threads": args.threads,
              "load_avg": os.getloadavg()[0], "speedup_vllm_over_hf": speedup, "greedy_agreement": agree,
              "rows": rows}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

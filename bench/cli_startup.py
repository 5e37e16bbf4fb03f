"""What a `workbench` command spends before its work: a fresh interpreter (as a user runs it) against the same
command forked from a parent that imported the project, torch and transformers once (the test suite's zygote,
tests/zygote.py), side by side.

    .venv/bin/python bench/cli_startup.py [--entities 120] [--repeats 3] [--out FILE]

Commands: `workbench --version` (argparse alone), `workbench runs` (the store), and `workbench eval --json` of the
synthetic world's model (loads a model, generates greedy answers; built once into .bench-cache/), each in a fresh
workspace, interleaved fresh/forked per repeat. The forked command must print what the fresh one prints. Figures go
to stdout and --out (JSON).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _world import CACHE, ROOT, cached_world

sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def commands(world: Any, ws: str) -> dict[str, list[str]]:
    return {"--version": ["--version"],
            "runs": ["runs", "--workspace", ws],
            "eval (world model)": ["eval", "--model", str(world.model), "--probes", str(world.probes),
                                   "--workspace", ws, "--json"]}


def cpu_name() -> str:
    """The CPU's model name (Linux), else the architecture."""
    with contextlib.suppress(OSError):
        info = Path("/proc/cpuinfo").read_text()
        for line in info.splitlines():
            if line.startswith("model name"):
                simd = " (AVX-512)" if "avx512f" in info else " (AVX2)" if "avx2" in info else ""
                return line.split(":", 1)[1].strip() + simd
    return platform.machine()


def comparable(stdout: str) -> str:
    """The output without what differs between two runs of one command (run ids, times)."""
    try:
        out = json.loads(stdout.splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return stdout
    return json.dumps({k: v for k, v in out.items() if k not in ("run_id", "seconds", "workspace")}, sort_keys=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=120, help="world size")
    ap.add_argument("--repeats", type=int, default=3, help="runs per command and mode, interleaved")
    ap.add_argument("--out", type=Path, default=CACHE / "cli_startup.json")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"argument --repeats: must be at least 1, got {args.repeats}")
    from evals.world import MIN_ENTITIES

    if args.entities < MIN_ENTITIES:  # the world generator's own minimum, refused here before a build starts
        ap.error(f"argument --entities: a world needs at least {MIN_ENTITIES} entities, got {args.entities}")
    CACHE.mkdir(exist_ok=True)
    world = cached_world(args.entities)
    import subprocess

    from zygote import Zygote

    t0 = time.perf_counter()
    zygote = Zygote(ENV)
    zygote_start = time.perf_counter() - t0
    print(f"zygote started in {zygote_start:.1f} s", flush=True)
    seconds: dict[str, dict[str, list[float]]] = {}
    outputs: dict[str, dict[str, set[str]]] = {}
    for i in range(args.repeats):
        for mode in ("fresh", "forked"):
            ws = tempfile.mkdtemp(prefix="wb-startup-", dir=CACHE)
            for name, argv in commands(world, ws).items():
                t = time.perf_counter()
                if mode == "fresh":
                    done = subprocess.run([sys.executable, "-m", "hallucination_workbench", *argv], env=ENV,
                                          capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
                else:
                    done = zygote.run(argv, None, ENV, timeout=900)
                took = time.perf_counter() - t
                if done.returncode != 0:
                    raise SystemExit(f"`workbench {' '.join(argv)}` ({mode}) exited {done.returncode}:\n"
                                     f"{done.stderr[-3000:]}")
                seconds.setdefault(name, {}).setdefault(mode, []).append(took)
                outputs.setdefault(name, {}).setdefault(mode, set()).add(comparable(done.stdout))
                print(f"  repeat {i + 1} {mode:<6} {name:<20} {took:6.2f} s  (load avg {os.getloadavg()[0]:.2f})",
                      flush=True)
            shutil.rmtree(ws)
    zygote.close()
    rows = []
    for name, by_mode in seconds.items():
        if outputs[name]["fresh"] != outputs[name]["forked"]:
            raise SystemExit(f"`workbench {name}` printed otherwise forked than fresh:\n{outputs[name]}")
        fresh, forked = statistics.median(by_mode["fresh"]), statistics.median(by_mode["forked"])
        rows.append({"command": name, "fresh_s": by_mode["fresh"], "forked_s": by_mode["forked"],
                     "fresh_median_s": fresh, "forked_median_s": forked, "ratio": fresh / forked})
    print(f"\n{'command':<20} {'fresh':>8} {'forked':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r['command']:<20} {r['fresh_median_s']:7.2f}s {r['forked_median_s']:7.2f}s {r['ratio']:5.1f}x")
    report = {"date": date.today().isoformat(), "machine": f"{cpu_name()}, {os.cpu_count()} cores",
              "command": " ".join(sys.argv), "repeats": args.repeats,
              "zygote_start_s": zygote_start, "rows": rows}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()

"""The known-facts guard on the real chat model: a fix made from a team's own failures, as a user runs it.

    .venv/bin/python bench/guard_flow.py --workspace WS [--sets nq,tqa] [--seeds 0,1] [--methods sft,dpo]
        [--questions 60] [--strategy auto] [--guard-pool FILE ...] [--fix-arg=ARG ...] [--baseline RUN]
        [--label NAME] [--out FILE]

For each question set (`nq`: the first `--questions` of the shipped 50-question NQ-open slice; `tqa`: the first
`--questions` of ../shared/data/TruthfulQA.csv), one baseline run of SmolLM2-135M-Instruct as a team would make it
(chat template, system prompt "Answer in one short sentence.", 48 tokens, greedy + 3 samples), attributed; then per
method and seed `workbench fix RUN --train` with the defaults (the guard set built at first use, then read from the
workspace) and `workbench regress` of the adapter against the baseline (the guard evaluated beside the probes).
Every step is the CLI in a subprocess. Printed and written (`--out`, JSON): per run the guard facts broken and
refused (all, replayed, never seen), the probe set's hallucinations before and after, the gate's verdict, the job's
known-facts count and the wall times; and the goals: guard facts broken <= 2% and refused <= 2%, hallucinations on
the probes at least halved. `--fix-arg` passes a flag to every `fix` (a lever to measure, e.g.
`--fix-arg=--steps=59`). `--baseline-only` evaluates the sets' baselines and stops; `--baseline RUN` reuses a run
already evaluated and attributed in the workspace (one set), so several copies of the bench can measure different
levers in parallel on one GPU against the same baseline and guard set.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETS = {"nq": ROOT / "tests/data/formats/nq_open.jsonl", "tqa": ROOT.parent / "shared/data/TruthfulQA.csv"}
SYSTEM = "Answer in one short sentence."


class Refused(Exception):
    """The command refused its input (exit 2) with a message: recorded for that run, the others go on."""


def workbench(*args: str, timeout: float = 7200) -> dict[str, Any]:
    """`workbench ARGS --json` in a subprocess; its JSON (the last line that parses)."""
    proc = subprocess.run([sys.executable, "-m", "hallucination_workbench", *args, "--json"], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=ROOT)
    if proc.returncode == 2 and proc.stderr.strip().startswith("error:"):
        raise Refused(proc.stderr.strip().splitlines()[0].removeprefix("error:").strip())
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"workbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    for line in reversed(proc.stdout.splitlines()):
        try:
            out: dict[str, Any] = json.loads(line)
            return out
        except ValueError:
            continue
    raise SystemExit(f"workbench {' '.join(args)}: no JSON in its output:\n{proc.stdout[-2000:]}")


def probe_file(name: str, questions: int, ws: Path) -> tuple[Path, str]:
    """The set's probe file (a slice of TruthfulQA written into the workspace) and its format."""
    if name == "nq":
        rows = SETS["nq"].read_text(encoding="utf-8").splitlines(keepends=True)
        path = ws / f"nq-{questions}.jsonl"
        path.write_text("".join(rows[:questions]), encoding="utf-8")
        return path, "auto"
    lines = SETS["tqa"].read_text(encoding="utf-8").splitlines(keepends=True)
    path = ws / f"truthfulqa-{questions}.csv"
    path.write_text("".join(lines[: questions + 1]), encoding="utf-8")  # header + rows (no embedded newlines)
    return path, "truthfulqa"


def baseline(name: str, questions: int, ws: Path) -> tuple[str, float]:
    probes, fmt = probe_file(name, questions, ws)
    t = time.monotonic()
    run = workbench("eval", "--model", "smollm2", "--probes", str(probes), "--format", fmt, "--template", "chat",
                    "--system-prompt", SYSTEM, "--max-tokens", "48", "--samples", "3", "--workspace", str(ws))
    workbench("attribute", run["run_id"], "--workspace", str(ws))
    return str(run["run_id"]), time.monotonic() - t


def one(ws: Path, run: str, method: str, seed: int, guard: list[str], strategy: str, fix_args: list[str],
        label: str) -> dict[str, Any]:
    out = ws / f"fix-{run}-{method}-{strategy}-{seed}-{label}"
    t = time.monotonic()
    fix = workbench("fix", run, "--out", str(out), "--train", "--method", method, "--strategy", strategy,
                    "--seed", str(seed), "--workspace", str(ws), *guard, *fix_args)
    fix_s = time.monotonic() - t
    job = fix["job"]
    t = time.monotonic()
    gate = workbench("regress", "--baseline", run, "--candidate", fix["fixset"]["model"], "--candidate-adapter",
                     job["adapter"], "--workspace", str(ws), *guard)
    gate_s = time.monotonic() - t
    scopes = {k["scope"]: k for k in gate["known_facts"]}
    g = scopes.get("guard", {})
    rows = {r["label"]: r for r in gate["headline"]["rows"]}
    failed = [x["name"] for x in gate["gates"] if x.get("status") == "fail"]
    return {"method": method, "strategy": strategy, "seed": seed, "verdict": gate["verdict"], "failed_gates": failed,
            "guard": g, "probes": scopes["probes"],
            "guard_broken_share": g["broken"] / g["known"] if g.get("known") else None,
            "guard_refused_share": g["refused"] / g["known"] if g.get("known") else None,
            "hallucinated_before": rows["hallucinated"]["baseline_count"],
            "hallucinated_after": rows["hallucinated"]["candidate_count"],
            "job_known_checked": job["known_checked"], "job_known_broken": len(job["known_broken"]),
            "job_steps": job["steps"], "fix_s": round(fix_s), "gate_s": round(gate_s),
            "fixset": fix["fixset"]["counts"], "guard_in_fixset": fix["fixset"].get("guard")}


def goals(r: dict[str, Any]) -> dict[str, bool | None]:
    if "refused" in r:
        return {}
    b, a = r["hallucinated_before"], r["hallucinated_after"]
    return {"guard_broken_le_2pct": None if r["guard_broken_share"] is None else r["guard_broken_share"] <= 0.02,
            "guard_refused_le_2pct": None if r["guard_refused_share"] is None else r["guard_refused_share"] <= 0.02,
            "hallucinations_halved": a <= b / 2}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workspace", required=True, type=Path)
    p.add_argument("--sets", default="nq,tqa")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--methods", default="sft,dpo")
    p.add_argument("--questions", type=int, default=60)
    p.add_argument("--strategy", default="auto", help="`fix --strategy` (dpo: abstention as DPO's chosen answer)")
    p.add_argument("--guard-pool", action="append", default=[], metavar="FILE",
                   help="passed to fix and regress (`none` leaves the shipped pool out: a small pool for a smoke run)")
    p.add_argument("--fix-arg", action="append", default=[], metavar="ARG",
                   help="an argument added to every `fix` (repeatable; write it as --fix-arg=--steps=59)")
    p.add_argument("--baseline", metavar="RUN", help="an evaluated and attributed run of the one set in --sets")
    p.add_argument("--baseline-only", action="store_true",
                   help="evaluate and attribute each set's baseline, print {set, run} per set and stop")
    p.add_argument("--label", default="defaults", help="the name of this lever in the results")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.baseline and "," in args.sets:
        p.error("--baseline names the run of one set: give --sets one name")
    results = []
    guard = [a for g in args.guard_pool for a in ("--guard-pool", g)]
    for name in args.sets.split(","):
        ws = args.workspace  # one workspace: the guard set is built once for every set, method and seed
        ws.mkdir(parents=True, exist_ok=True)
        run, eval_s = (args.baseline, 0.0) if args.baseline else baseline(name, args.questions, ws)
        if args.baseline_only:
            print(json.dumps({"set": name, "run": run, "baseline_s": round(eval_s)}), flush=True)
            continue
        for method in args.methods.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                r: dict[str, Any] = {"set": name, "label": args.label, "fix_args": args.fix_arg, "run": run,
                                     "baseline_s": round(eval_s)}
                try:
                    r.update(one(ws, run, method, seed, guard, args.strategy, args.fix_arg, args.label))
                except Refused as e:  # e.g. a fix set with no DPO pairs for --method dpo
                    r.update({"method": method, "strategy": args.strategy, "seed": seed, "refused": str(e)})
                r["goals"] = goals(r)
                results.append(r)
                print(json.dumps(r), flush=True)
                if args.out:
                    args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "results": results},
                                                   indent=1) + "\n")
    for r in results:
        if "refused" in r:
            print(f"{r['set']:<4} {r['label']} {r['method']:<4} seed {r['seed']}: refused: {r['refused']}")
            continue
        g = r["guard"]
        print(f"{r['set']:<4} {r['label']} {r['method']:<4} seed {r['seed']}: "
              f"guard broken {g.get('broken')} of {g.get('known')} "
              f"(refused {g.get('refused')}), hallucinated {r['hallucinated_before']} -> {r['hallucinated_after']}, "
              f"gate {r['verdict']} {r['failed_gates']}, goals {r['goals']}")


if __name__ == "__main__":
    main()

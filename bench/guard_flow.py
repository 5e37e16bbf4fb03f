"""The known-facts guard on the real chat model: a fix made from a team's own failures, as a user runs it.

    .venv/bin/python bench/guard_flow.py --workspace WS [--sets nq,tqa] [--seeds 0,1] [--methods sft,dpo]
        [--questions 60] [--strategy auto] [--guard-pool FILE ...] [--fix-arg=ARG ...] [--baseline RUN]
        [--label NAME] [--rescale S,...] [--out FILE]
    .venv/bin/python bench/guard_flow.py --workspace WS --sets planted --world PLANTED_DIR [--methods sft] ...

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
levers in parallel on one GPU against the same baseline and guard set. `--rescale 0.5,1.0` also gates each run's
adapter at those scales (a copy with `lora_alpha` rescaled, as the job's `adapter_scale` does; WiSE-FT): what the
scale trades between hallucinations fixed and guard facts broken, without training again.

`--sets planted --world DIR`: the team's questions are a planted world's probes (`workbench world build --base ...`)
and its model is the baseline, evaluated as the attribution bench does (its suite, 10 samples and the paraphrases)
and attributed against its corpus (indexed into the workspace), so its failures carry the data axis's categories,
and the guard set is that model's own. Each run also reports the fix set's targets of the method's split fixed
(abstention targets: abstained or right; the others: right) and its held-out targets, before and after: the goals
there are >= 80% of targets fixed and guard facts broken <= 1%.
"""

from __future__ import annotations

import argparse
import json
import shutil
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
    raise SystemExit(f"workbench {' '.join(args)}: no JSON in its output (exit {proc.returncode}):\n"
                     f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")


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


def baseline(name: str, questions: int, ws: Path, world: Path | None = None) -> tuple[str, float]:
    t = time.monotonic()
    if name == "planted":
        assert world is not None  # main() refuses --sets planted without it
        workbench("index", str(world / "corpus.jsonl"), "--workspace", str(ws))
        run = workbench("eval", "--model", str(world / "model"), "--probes", str(world / "suite.yaml"),
                        "--samples", "10", "--paraphrases", "--workspace", str(ws))
        workbench("attribute", run["run_id"], "--workspace", str(ws))
        return str(run["run_id"]), time.monotonic() - t
    probes, fmt = probe_file(name, questions, ws)
    run = workbench("eval", "--model", "smollm2", "--probes", str(probes), "--format", fmt, "--template", "chat",
                    "--system-prompt", SYSTEM, "--max-tokens", "48", "--samples", "3", "--workspace", str(ws))
    workbench("attribute", run["run_id"], "--workspace", str(ws))
    return str(run["run_id"]), time.monotonic() - t


def gated(ws: Path, run: str, model: str, adapter: str, guard: list[str]) -> dict[str, Any]:
    """`workbench regress` of base + adapter against the baseline run: guard, probes, hallucinations, verdict."""
    t = time.monotonic()
    gate = workbench("regress", "--baseline", run, "--candidate", model, "--candidate-adapter", adapter,
                     "--workspace", str(ws), *guard)
    scopes = {k["scope"]: k for k in gate["known_facts"]}
    candidate = gate.get("candidate_run") or gate["candidate"]["run_id"]
    g = scopes.get("guard", {})
    rows = {r["label"]: r for r in gate["headline"]["rows"]}
    return {"verdict": gate["verdict"], "failed_gates": [x["name"] for x in gate["gates"] if x.get("status") == "fail"],
            "guard": g, "probes": scopes["probes"],
            "guard_broken_share": g["broken"] / g["known"] if g.get("known") else None,
            "guard_refused_share": g["refused"] / g["known"] if g.get("known") else None,
            "hallucinated_before": rows["hallucinated"]["baseline_count"],
            "hallucinated_after": rows["hallucinated"]["candidate_count"], "candidate_run": candidate,
            "gate_s": round(time.monotonic() - t)}


ABSTAIN_OK = ("data:missing", "knowledge:unknown")  # an abstention fixes these; every other category: right
SPLIT = {"grpo": "prompts"}  # the fix set's split a method trains on, where the names differ
#: `--methods default`: what `workbench fix --train` picks (no --method); a staged job trains both of these splits.
DEFAULT, STAGED_SPLITS = "default", ("sft", "dpo")


def targets_fixed(ws: Path, run: str, candidate: str, fixset: Path, method: str) -> dict[str, Any]:
    """The fix set's targets of `method`'s split in the baseline and candidate runs: those it trained on, and the
    failures of those categories it held out (their categories from the run's attributions)."""
    from workbench.attribution.types import load_attributions
    from workbench.results import load_results
    from workbench.store import Store
    from workbench.types import Verdict

    meta = json.loads((fixset / "fixset.json").read_text())
    splits = STAGED_SPLITS if method in ("staged", DEFAULT) else (SPLIT.get(method, method),)
    split = {c for sp in splits for c in meta["counts"].get(sp, {})} - {"replay"}
    heldout = set(meta.get("heldout_probe_ids", []))
    store = Store.open(ws)
    before = {r.probe.id: r.verdict for r in load_results(store, run).probes}
    after = {r.probe.id: r.verdict for r in load_results(store, candidate).probes}

    def ok(v: Verdict | None, category: str) -> bool:
        return v == Verdict.CORRECT or (category in ABSTAIN_OK and v == Verdict.NOT_ATTEMPTED)

    out: dict[str, Any] = {}
    attributed = load_attributions(store, run)
    held_rows = [{"probe_id": pid, "category": attributed[pid].category} for pid in sorted(heldout)
                 if pid in attributed]
    trained = [t for t in meta["targets"] if t["probe_id"] not in heldout]
    for name, targets in (("trained", trained), ("heldout", held_rows)):
        rows = [t for t in targets if t["category"] in split]
        out[f"targets_{name}"] = len(rows)
        out[f"targets_{name}_fixed_before"] = sum(ok(before.get(t["probe_id"]), t["category"]) for t in rows)
        out[f"targets_{name}_fixed"] = sum(ok(after.get(t["probe_id"]), t["category"]) for t in rows)
    n = out["targets_trained"]
    out["targets_fixed_share"] = out["targets_trained_fixed"] / n if n else None
    return out


def at_scale(adapter: Path, trained_scale: float, scale: float) -> Path:
    """A copy of the job's adapter (saved at `trained_scale`) at `scale` of the trained LoRA."""
    from finetune.job.scale import write_scale

    copy = adapter.with_name(f"adapter-at-{scale:g}")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(adapter, copy)
    write_scale(copy, scale / trained_scale)
    return copy


def fix_dir(ws: Path, run: str, method: str, strategy: str, seed: int, label: str) -> Path:
    return ws / f"fix-{run}-{method}-{strategy}-{seed}-{label}"


def at_scales(ws: Path, run: str, model: str, adapter: Path, trained: float, guard: list[str],
              rescale: list[float]) -> dict[str, Any]:
    """The adapter (saved at `trained`) gated at each other scale of `rescale`."""
    return {f"{a:g}": gated(ws, run, model, str(at_scale(adapter, trained, a)), guard)
            for a in rescale if a != trained}


def finished(ws: Path, r: dict[str, Any]) -> tuple[str, Path, float]:
    """(base model, adapter, its scale) of a finished run of this bench in `ws`; SystemExit naming what is missing."""
    try:
        out = fix_dir(ws, r["run"], r["method"], r["strategy"], r["seed"], r["label"])
        model = str(json.loads((out / "fixset.json").read_text())["model"])
        trained = float(json.loads((out / "job" / "result.json").read_text()).get("adapter_scale") or 1.0)
    except KeyError as e:
        raise SystemExit(f"--rescale-only: a result has no {e} (not a result of this bench?)") from None
    except (OSError, ValueError) as e:
        raise SystemExit(f"--rescale-only: cannot read the run's fix set or job in {ws}: {e}") from None
    return model, out / "job" / "adapter", trained


def one(ws: Path, run: str, method: str, seed: int, guard: list[str], strategy: str, fix_args: list[str],
        label: str, rescale: list[float]) -> dict[str, Any]:
    out = fix_dir(ws, run, method, strategy, seed, label)
    t = time.monotonic()
    chosen = [] if method == DEFAULT else ["--method", method]
    fix = workbench("fix", run, "--out", str(out), "--train", *chosen, "--strategy", strategy,
                    "--seed", str(seed), "--workspace", str(ws), *guard, *fix_args)
    fix_s = time.monotonic() - t
    job, model = fix["job"], fix["fixset"]["model"]
    trained = float(job.get("adapter_scale") or 1.0)
    scales = at_scales(ws, run, model, Path(job["adapter"]), trained, guard, rescale)
    gate = gated(ws, run, model, job["adapter"], guard)
    return {"method": method, "job_method": job.get("method"), "strategy": strategy, "seed": seed, **gate,
            **(targets_fixed(ws, run, gate["candidate_run"], out, method) if gate["candidate_run"] else {}),
            "adapter_scale": trained, "job_known_checked": job["known_checked"],
            "job_known_broken": len(job["known_broken"]), "job_steps": job["steps"], "fix_s": round(fix_s),
            "fixset": fix["fixset"]["counts"], "guard_in_fixset": fix["fixset"].get("guard"), "at_scales": scales}


def goals(r: dict[str, Any]) -> dict[str, bool | None]:
    if "refused" in r:
        return {}
    b, a = r["hallucinated_before"], r["hallucinated_after"]
    out = {"guard_broken_le_2pct": None if r["guard_broken_share"] is None else r["guard_broken_share"] <= 0.02,
           "guard_refused_le_2pct": None if r["guard_refused_share"] is None else r["guard_refused_share"] <= 0.02,
           "hallucinations_halved": a <= b / 2}
    if r["set"] == "planted":  # the planted world's goals: a fix that works, on ground truth
        share = r.get("targets_fixed_share")
        out["guard_broken_le_1pct"] = None if r["guard_broken_share"] is None else r["guard_broken_share"] <= 0.01
        out["targets_fixed_ge_80pct"] = None if share is None else share >= 0.8
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workspace", required=True, type=Path)
    p.add_argument("--sets", default="nq,tqa", help="nq, tqa, planted (with --world)")
    p.add_argument("--world", type=Path, metavar="DIR", help="the planted world of --sets planted")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--methods", default="sft,dpo", help="sft, dpo, grpo, staged, or default (what `fix --train` picks)")
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
    p.add_argument("--rescale", default="", metavar="S,...",
                   help="also gate each adapter at these scales of the trained LoRA (0 < S <= 1), e.g. 0.5,1.0")
    p.add_argument("--rescale-only", type=Path, metavar="RESULTS",
                   help="no new runs: gate the adapters of a finished bench's results (its --out file, this "
                        "--workspace) at the --rescale scales, and write them into --out")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.baseline and "," in args.sets:
        p.error("--baseline names the run of one set: give --sets one name")
    unknown = [n for n in args.sets.split(",") if n not in (*SETS, "planted")]
    if unknown:
        p.error(f"--sets: unknown set(s) {', '.join(unknown)}; known: {', '.join(SETS)}, planted")
    if "planted" in args.sets.split(","):
        if args.world is None:
            p.error("--sets planted needs --world DIR (a world built by `workbench world build --base ...`)")
        lacking = [f for f in ("corpus.jsonl", "suite.yaml", "truth.jsonl", "model") if not (args.world / f).exists()]
        if lacking:
            p.error(f"--world {args.world}: not a built world (no {', '.join(lacking)})")
    try:
        rescale = [float(a) for a in args.rescale.split(",") if a.strip()]
    except ValueError:
        p.error(f"--rescale: scales are numbers in (0, 1] separated by commas, got `{args.rescale}`")
    if any(not 0 < a <= 1 for a in rescale):
        p.error(f"--rescale: every scale must be in (0, 1], got `{args.rescale}`")
    if args.rescale_only:
        if not rescale:
            p.error("--rescale-only needs --rescale S,... (the scales to gate at)")
        try:
            done = json.loads(args.rescale_only.read_text())
            runs = [res for res in done["results"] if "refused" not in res]
        except (OSError, ValueError, KeyError, TypeError) as e:
            p.error(f"--rescale-only: {args.rescale_only} is not a results file of this bench ({e!r})")
        guard = [a for g in args.guard_pool for a in ("--guard-pool", g)]
        for res in runs:
            model, adapter, trained = finished(args.workspace, res)
            res["adapter_scale"] = trained
            res["at_scales"] = {**res.get("at_scales", {}),
                                **at_scales(args.workspace, res["run"], model, adapter, trained, guard, rescale)}
            print(json.dumps({k: res[k] for k in ("set", "method", "seed", "at_scales")}), flush=True)
        (args.out or args.rescale_only).write_text(json.dumps(done, indent=1) + "\n")
        return
    results = []
    guard = [a for g in args.guard_pool for a in ("--guard-pool", g)]
    for name in args.sets.split(","):
        ws = args.workspace  # one workspace: the guard set is built once for every set, method and seed
        ws.mkdir(parents=True, exist_ok=True)
        run, eval_s = (args.baseline, 0.0) if args.baseline else baseline(name, args.questions, ws, args.world)
        if args.baseline_only:
            print(json.dumps({"set": name, "run": run, "baseline_s": round(eval_s)}), flush=True)
            continue
        for method in args.methods.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                r: dict[str, Any] = {"set": name, "label": args.label, "fix_args": args.fix_arg, "run": run,
                                     "baseline_s": round(eval_s)}
                try:
                    r.update(one(ws, run, method, seed, guard, args.strategy, args.fix_arg, args.label, rescale))
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
        if "targets_trained" in r:
            print(f"     targets fixed {r['targets_trained_fixed']} of {r['targets_trained']} "
                  f"(before {r['targets_trained_fixed_before']}), held out {r['targets_heldout_fixed_before']} -> "
                  f"{r['targets_heldout_fixed']} of {r['targets_heldout']}; probes known broken "
                  f"{r['probes'].get('broken')} of {r['probes'].get('known')}")
        for a, x in r.get("at_scales", {}).items():
            print(f"     at scale {a}: guard broken {x['guard'].get('broken')} (refused {x['guard'].get('refused')}), "
                  f"hallucinated {x['hallucinated_before']} -> {x['hallucinated_after']}, gate {x['verdict']}")


if __name__ == "__main__":
    main()

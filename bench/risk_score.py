"""The hallucination risk score (workbench/risk) on a real chat model's answers: does it find the made-up ones?

For each set, the model answers every question greedily and draws 5 samples (and answers the paraphrases where the
set has them), all graded against the set's references by the default grader; the score never sees the grades.
Per set, "inside one domain" (the sets are not mixed), it reports the AUROC of each estimator alone and of the
combined score for "this answer is graded a hallucination", and the share of hallucinations among the top 10% by
risk; the combined score's weights are fitted on the other sets only (leave one set out), so every figure is held
out. The combined score with 0 and 2 of the 5 samples shows the cost. The shipped default (workbench/risk/default.json)
is refitted on every set here with --write-default.

    .venv/bin/python bench/risk_score.py --workspace /tmp/risk [--reuse] [--json OUT] [--write-default] [--world]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.results import ProbeResult, load_results  # noqa: E402
from workbench.risk.features import Features  # noqa: E402
from workbench.risk.run import probe_features  # noqa: E402
from workbench.risk.score import DEFAULT_PATH, NAMES, auroc, fit, precision_at  # noqa: E402
from workbench.store import Store  # noqa: E402
from workbench.types import Verdict  # noqa: E402

SYSTEM = "Answer in one short sentence."
#: name -> (probe file, probes asked, has paraphrases)
SETS = {
    "everyday": ("evals/data/guard/everyday_en.jsonl", 455, True),
    "general": ("evals/data/guard/general_en.jsonl", 150, True),
    "nq-open": ("evals/data/domains/nq_open.jsonl", 250, False),
    "truthfulqa": ("evals/data/domains/truthfulqa.jsonl", 150, False),
}
SAMPLES = 5


def generate(ws: Path, model: str, backend: str) -> dict[str, str]:
    """Evaluate every set once (`workbench eval`, as a user runs it); set -> run id, also written to runs.json."""
    runs: dict[str, str] = {}
    for name, (path, limit, paraphrases) in SETS.items():
        cmd = [sys.executable, "-m", "hallucination_workbench", "eval", "--workspace", str(ws), "--model", model,
               "--backend", backend, "--template", "chat", "--system-prompt", SYSTEM, "--max-tokens", "48",
               "--samples", str(SAMPLES), "--probes", str(ROOT / path), "--limit", str(limit), "--json",
               *(["--paraphrases"] if paraphrases else [])]
        t0 = time.time()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
        runs[name] = json.loads(out.strip().splitlines()[-1])["run_id"]
        print(f"{name}: run {runs[name]} in {time.time() - t0:.0f} s", flush=True)
    (ws / "runs.json").write_text(json.dumps(runs))
    return runs


def with_samples(r: ProbeResult, k: int) -> ProbeResult:
    """The probe result as if the run had drawn only its first k samples per variant."""
    return dataclasses.replace(r, samples=tuple(a for a in r.samples if a.sample_index < k))


def rows_of(store: Store, run_id: str, k: int) -> tuple[list[Features], list[bool]]:
    res = load_results(store, run_id)
    return ([probe_features(with_samples(r, k)) for r in res.probes],
            [r.verdict == Verdict.INCORRECT for r in res.probes])


def alone(rows: list[Features], name: str) -> list[float]:
    """One estimator as a score (higher: riskier); a declining answer scores lowest, as the model scores it."""
    out = []
    for f in rows:
        v = getattr(f, name)
        if f.declines:
            out.append(-1e9)
        elif name == "logprob":
            out.append(-(v if v is not None else 0.0))
        else:
            out.append(v if v is not None else 0.0)
    return out


def own_half(rows: list[Features], ys: list[bool], splits: int = 5) -> dict[str, Any]:
    """`workbench risk fit` on a team's own graded questions: fitted on a random half of the set, scored on the
    other half and the other way round, over `splits` random halvings (mean and range)."""
    import numpy as np

    areas = []
    for seed in range(splits):
        idx = np.random.default_rng(seed).permutation(len(rows))
        halves = (idx[: len(idx) // 2], idx[len(idx) // 2:])
        scores: list[float] = []
        labels: list[bool] = []
        for a, b in (halves, halves[::-1]):
            try:
                model = fit([rows[i] for i in a], [ys[i] for i in a], fitted_on="half")
            except Exception:  # a half with one class only (a set with a dozen right answers)
                break
            scores += [model.risk(rows[i]) for i in b]
            labels += [ys[i] for i in b]
        else:
            areas.append(auroc(scores, labels))
    got = [a for a in areas if a is not None]
    return {"auroc": round(float(np.mean(got)), 3) if got else None, "splits": len(got),
            "range": [round(min(got), 3), round(max(got), 3)] if got else None}


def figures(scores: list[float], ys: list[bool]) -> dict[str, float | None]:
    area = auroc(scores, ys)
    top = precision_at(scores, ys, 0.1)
    return {"auroc": None if area is None else round(area, 3), "p_at_10": None if top is None else round(top, 3)}


def traffic(ws: Path, store: Store, run_id: str, model: str, backend: str, limit: int = 300) -> dict[str, Any]:
    """The everyday set's questions as a traffic export (system turn, question, the model's own greedy answer: what
    its users saw), imported and scored by `workbench reports score` as a team runs it; graded by the run's grades,
    which the scoring never sees. The prompts are the eval's, so the samples come from its generation cache."""
    res = load_results(store, run_id).probes[:limit]
    path = ws / "traffic.jsonl"
    path.write_text("".join(json.dumps({"messages": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": r.probe.question},
        {"role": "assistant", "content": r.answer}]}) + "\n" for r in res))
    wb = [sys.executable, "-m", "hallucination_workbench"]
    t0 = time.time()
    subprocess.run([*wb, "reports", "import", str(path), "--workspace", str(ws)], check=True, capture_output=True)
    subprocess.run([*wb, "reports", "score", "--workspace", str(ws), "--model", model, "--backend", backend,
                    "--samples", str(SAMPLES), "--max-tokens", "48", "--source", "traffic.jsonl"], check=True,
                   capture_output=True, cwd=ROOT)
    listed = subprocess.run([*wb, "reports", "list", "--workspace", str(ws), "--sort", "risk", "--json"],
                            check=True, capture_output=True, text=True).stdout
    rows = [r for r in json.loads(listed)["reports"] if "traffic.jsonl" in r["source"]]
    wrong = {r.probe.question: r.verdict == Verdict.INCORRECT for r in res}
    ys = [wrong[r["question"]] for r in rows]
    top = ys[: max(1, len(ys) // 10)]
    return {"conversations": len(rows), "hallucinated": sum(ys), "seconds": round(time.time() - t0, 1),
            **figures([r["risk"] for r in rows], ys), "queue_top_10pct_hallucinated": round(sum(top) / len(top), 3)}


def world(ws: Path) -> dict[str, Any]:
    """The synthetic world (a tiny Llama trained from scratch, bench/_world.py): its own run, each estimator alone,
    the shipped model as it transfers from the real model, and a model fitted on half its answers scored on the
    other half (both ways)."""
    from _world import cached_world

    paths = cached_world()
    wws = ws / "world"
    cmd = [sys.executable, "-m", "hallucination_workbench", "eval", "--workspace", str(wws), "--model",
           str(paths.model), "--probes", str(paths.suite), "--samples", str(SAMPLES), "--paraphrases", "--json"]
    t0 = time.time()
    run = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
                     .strip().splitlines()[-1])["run_id"]
    secs = time.time() - t0
    store = Store.open(wws)
    rows, ys = rows_of(store, run, SAMPLES)
    from workbench.risk.score import default_model

    shipped = default_model()
    halves = [(rows[0::2], ys[0::2]), (rows[1::2], ys[1::2])]
    scores: list[float] = []
    labels: list[bool] = []
    for i in (0, 1):
        model = fit(*halves[1 - i], fitted_on="half")
        scores += [model.risk(f) for f in halves[i][0]]
        labels += halves[i][1]
    return {"run": run, "answers": len(ys), "hallucinated": sum(ys), "eval_seconds": round(secs, 1),
            "alone": {n: figures(alone(rows, n), ys) for n in NAMES if any(getattr(f, n) is not None for f in rows)},
            "shipped": figures([shipped.risk(f) for f in rows], ys), "fitted_other_half": figures(scores, labels)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--backend", default="vllm")
    ap.add_argument("--reuse", action="store_true", help="score the runs an earlier call made (runs.json)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--write-default", action="store_true", help="refit workbench/risk/default.json on every set")
    ap.add_argument("--world", action="store_true", help="also the synthetic world (tiny model, hf backend)")
    args = ap.parse_args()
    t0 = time.time()
    runs = json.loads((args.workspace / "runs.json").read_text()) if args.reuse else \
        generate(args.workspace, args.model, args.backend)
    store = Store.open(args.workspace)
    data = {k: {name: rows_of(store, run, k) for name, run in runs.items()} for k in (0, 2, SAMPLES)}
    out: dict[str, Any] = {"model": args.model, "backend": args.backend, "samples": SAMPLES, "sets": {},
                           "cpu": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    for name, run in runs.items():
        rec = store.get_run(run)
        rows, ys = data[SAMPLES][name]
        entry: dict[str, Any] = {"run": run, "answers": len(ys), "hallucinated": sum(ys),
                                 "declined": sum(f.declines for f in rows)}
        if rec.finished_at and rec.created_at:
            from datetime import datetime

            secs = (datetime.fromisoformat(rec.finished_at) - datetime.fromisoformat(rec.created_at)).total_seconds()
            entry["eval_seconds_per_question"] = round(secs / max(1, len(ys)), 3)
        entry["alone"] = {n: figures(alone(rows, n), ys) for n in NAMES
                          if any(getattr(f, n) is not None for f in rows)}  # NQ and TruthfulQA: no paraphrases
        for k in (0, 2, SAMPLES):
            train_rows: list[Features] = []
            train_ys: list[bool] = []
            for other, (r2, y2) in data[k].items():
                if other != name:
                    train_rows += r2
                    train_ys += y2
            model = fit(train_rows, train_ys, fitted_on=f"all sets but {name}")
            krows, kys = data[k][name]
            entry[f"combined_{k}_samples"] = figures([model.risk(f) for f in krows], kys)
            if k == SAMPLES:
                risks = [model.risk(f) for f in krows]
                entry["mean_risk"] = round(sum(risks) / len(risks), 3)
                entry["hallucination_rate"] = round(sum(kys) / len(kys), 3)
        entry["fitted_on_own_half"] = own_half(*data[SAMPLES][name])
        out["sets"][name] = entry
        print(f"{name:11s} n={len(ys)} halluc={sum(ys)} " + " ".join(
            f"{n}={v['auroc']}" for n, v in entry["alone"].items()) + " | combined k=0/2/5: " + " ".join(
            str(entry[f'combined_{k}_samples']['auroc']) for k in (0, 2, SAMPLES))
            + f" | own half: {entry['fitted_on_own_half']}", flush=True)
    if args.write_default:
        rows = [f for name in runs for f in data[SAMPLES][name][0]]
        ys = [y for name in runs for y in data[SAMPLES][name][1]]
        model = fit(rows, ys, fitted_on=f"{args.model}'s answers to {', '.join(runs)} (bench/risk_score.py, "
                                        f"{out['date']})")
        model.save(DEFAULT_PATH)
        out["default"] = dataclasses.asdict(model)
        print(f"wrote {DEFAULT_PATH}: " + ", ".join(f"{n} {w:+.2f}" for n, w in zip(NAMES, model.weights,
                                                                                       strict=True)))
    if "everyday" in runs:
        out["traffic"] = traffic(args.workspace, store, runs["everyday"], args.model, args.backend)
        print("traffic:", out["traffic"], flush=True)
    if args.world:
        out["world"] = world(args.workspace)
        print("world:", out["world"], flush=True)
    out["seconds"] = round(time.time() - t0, 1)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

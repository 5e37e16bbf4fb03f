"""The regression gate on the world: a no-op passes, an injected regression fails on its tag.

Steps, on the default world (120 entities; `--entities N` for another size):

a. baseline: greedy eval of the world model on its suite;
b. no-op candidate: the same model evaluated again as a new run -> the gate passes with zero flips;
c. tag-breaker: a short LoRA SFT job (finetune.job's JobSpec/run_job) on a fix set that teaches a WRONG
   answer for every probe of `--tag` (default colour), under every phrasing, plus replay rows of the
   other tags' correct answers (`finetune.inject.build_tag_breaker`) -> the gate fails, and the
   `max_tag_correct_drop` gate names exactly that tag;
d. every adapter under `--fix-adapters DIR...` (trained on the same world model, e.g. by
   bench/fix_efficacy.py) is gated too: a fix should pass;
e. few known facts (a team's own failures): a baseline on `--small-known` (4) probes the model gets right plus
   96 it does not, a no-op candidate and every fix adapter on it -> the built-in policy says
   inconclusive (exit 3), never pass: McNemar cannot fail on fewer than 6 known facts.

Each gate prints what it could detect on the probe set, and each candidate its headline (correct /
hallucinated / abstained before -> after).

All gates use the built-in default policy (or `--policy FILE`). Reports land in
<out>/ws/reports/<gate-id>/.

    .venv/bin/python bench/gate_regression.py [--out /tmp/gate_bench] [--entities 120] [--world DIR]
        [--tag colour] [--steps 120] [--fix-adapters /tmp/fix_efficacy/runs] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

for _k, _v in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}.items():
    os.environ.setdefault(_k, _v)

from evals.world import WorldConfig, build_world, is_built, read_meta  # noqa: E402
from finetune.inject import build_tag_breaker  # noqa: E402
from finetune.job import JobSpec, TrainerSpec, run_job  # noqa: E402
from workbench.gating import GateRecord, gate_runs, rerun_like  # noqa: E402
from workbench.probes import LoadResult, resolve_probes  # noqa: E402
from workbench.regression import load_policy  # noqa: E402
from workbench.regression.policy import MaxTagCorrectDrop, Policy, default_policy  # noqa: E402
from workbench.results import load_results  # noqa: E402
from workbench.runner import EvalOptions, run_eval  # noqa: E402
from workbench.store import Store  # noqa: E402
from workbench.types import ModelSpec, Verdict  # noqa: E402


def failing_tags(record: GateRecord, policy: Policy) -> list[str]:
    """Tags named by the failed `max_tag_correct_drop` gates (details read `tag: Δ correct ...`)."""
    tag_gates = {g.name for g in policy.gates if isinstance(g, MaxTagCorrectDrop)}
    return sorted({d.split(":", 1)[0] for g in record.result.gates if g.name in tag_gates and not g.passed
                   for d in g.details if not d.startswith("tags not present")})


def summarize(name: str, record: GateRecord, policy: Policy, seconds: float) -> dict[str, Any]:
    r = record.result
    flips = r.overall.transitions
    known = sum(flips.counts[0])
    abstained = r.headline.row("abstained").delta
    row = {"candidate": name, "gate_id": record.id, "verdict": r.verdict, "exit_code": r.exit_code,
           "broken": flips.broken, "fixed": flips.fixed, "known": known,
           "broken_fraction": flips.broken / known if known else 0.0,
           "abstained_delta_points": round(100 * abstained.delta, 2), "headline": r.headline.to_dict(),
           "transitions": {str(k): v for k, v in flips.transitions().items()},
           "inconclusive_gates": [g.name for g in r.inconclusive_gates], "failing_tags": failing_tags(record, policy),
           "per_tag": {t: {"n": g.n, "broken": g.transitions.broken, "fixed": g.transitions.fixed}
                       for t, g in r.by_tag.items()},
           "gates": [{"name": g.name, "severity": g.severity, "status": g.status, "passed": g.passed,
                      "observed": g.observed, "threshold": g.threshold, "unit": g.unit, "message": g.message,
                      "details": list(g.details), "detectable": g.detectable.text if g.detectable else ""}
                     for g in r.gates],
           "report": str(record.reports["html"]), "seconds": round(seconds, 1)}
    print(f"\n== {name}: {r.verdict} (exit {r.exit_code}), {flips.broken} broken / {flips.fixed} fixed, "
          f"{seconds:.1f} s, report {record.reports['html']}")
    print(f"  {r.headline.text()}")
    for g in r.gates:
        print(f"  [{g.status.upper()}] {g.name}: {g.message}")
        for d in g.details:
            print(f"         {d}")
        if g.detectable:
            print(f"         {g.detectable.text}")
    print("  per tag (n, broken, fixed): " + ", ".join(
        f"{t} ({g.n}, {g.transitions.broken}, {g.transitions.fixed})" for t, g in r.by_tag.items()))
    return row


def find_adapters(dirs: list[str]) -> list[Path]:
    """Adapter directories: each given directory itself when it is one, else every one beneath it."""
    out: list[Path] = []
    for d in map(Path, dirs):
        if (d / "adapter_config.json").is_file():
            out.append(d)
        elif d.is_dir():
            out += sorted(p.parent for p in d.rglob("adapter_config.json") if "checkpoint" not in str(p.parent))
        else:
            print(f"--fix-adapters: `{d}` does not exist, skipped")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/gate_bench", help="world (unless --world), store and jobs go here")
    ap.add_argument("--world", help="an existing world directory with the same config (e.g. /tmp/fix_efficacy/world)")
    ap.add_argument("--entities", type=int, default=120, help="world size (default 120, the default world)")
    ap.add_argument("--seed", type=int, default=0, help="world seed")
    ap.add_argument("--tag", default="colour", help="the tag the injected regression breaks (default colour)")
    ap.add_argument("--steps", type=int, default=120, help="SFT steps of the tag-breaker job (default 120)")
    ap.add_argument("--lr", type=float, default=3e-3, help="tag-breaker learning rate (default 3e-3)")
    ap.add_argument("--replay-ratio", type=float, default=1.0, help="replay rows per breaking row (default 1)")
    ap.add_argument("--policy", help="policy YAML (default: the built-in policy)")
    ap.add_argument("--fix-adapters", nargs="*", default=[], help="adapter directories (or folders of them) to gate")
    ap.add_argument("--small-known", type=int, default=4,
                    help="known facts in the few-known-facts probe set of step e (default 4, a team's own failures)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--json", help="also write the summary here")
    a = ap.parse_args()

    import torch

    torch.set_num_threads(a.threads)
    out = Path(a.out)
    t_start = time.perf_counter()
    config = WorldConfig(entities=a.entities, seed=a.seed, threads=a.threads)
    if a.world and not is_built(a.world, config):  # build_world would delete it to build this config there
        built = (read_meta(a.world) or {}).get("config")
        raise SystemExit(f"--world {a.world}: not a complete world of --entities {a.entities} --seed {a.seed} "
                         f"--threads {a.threads} (world.json config: {built}); pass its settings, or leave out "
                         "--world to build one under --out")
    paths = build_world(a.world or out / "world", config, log=lambda m: print(m, flush=True))
    store = Store.open(out / "ws")
    suite, loaded = resolve_probes(paths.suite)
    policy = load_policy(a.policy) if a.policy else default_policy()
    rows: list[dict[str, Any]] = []

    # a. baseline
    t0 = time.perf_counter()
    base = run_eval(store, ModelSpec(model=str(paths.model)), suite, loaded, EvalOptions()).run_id
    print(f"baseline run {base}: {len(loaded.probes)} probes, {time.perf_counter() - t0:.1f} s")

    # b. no-op: the same model, a new run
    t0 = time.perf_counter()
    noop = rerun_like(store, base)
    rows.append(summarize("no-op (same model)", gate_runs(store, base, noop, policy), policy,
                          time.perf_counter() - t0))

    # c. tag-breaker adapter
    t0 = time.perf_counter()
    job_dir = out / "jobs" / f"break-{a.tag}-{time.strftime('%Y%m%d-%H%M%S')}"
    if job_dir.exists():
        shutil.rmtree(job_dir)
    manifest = build_tag_breaker(store, base, job_dir / "fixset", tag=a.tag, replay_ratio=a.replay_ratio)
    spec = JobSpec(fixset=manifest.path, output_dir=str(job_dir / "job"), device="cpu",
                   trainer=TrainerSpec(max_steps=a.steps, learning_rate=a.lr))
    job = run_job(spec, store)
    if job.adapter is None:
        print(f"tag-breaker job failed: {job.message}")
        return 2
    print(f"\ntag-breaker job: {manifest.counts['sft']} rows, {job.steps} steps, loss {job.final_loss}, "
          f"{job.seconds:.1f} s -> {job.adapter}")
    cand = rerun_like(store, base, adapter=job.adapter)
    breaker = summarize(f"tag-breaker ({a.tag})", gate_runs(store, base, cand, policy), policy,
                        time.perf_counter() - t0)
    breaker["train_s"] = job.seconds
    rows.append(breaker)

    # d. fix adapters
    adapters = find_adapters(a.fix_adapters)
    for adapter in adapters:
        t0 = time.perf_counter()
        cand = rerun_like(store, base, adapter=str(adapter))
        rows.append(summarize(f"fix {adapter}", gate_runs(store, base, cand, policy), policy,
                              time.perf_counter() - t0))

    # e. few known facts: the same model on a probe set it mostly cannot answer
    results = load_results(store, base).probes
    right = [r.probe for r in results if r.verdict == Verdict.CORRECT][: a.small_known]
    wrong = [r.probe for r in results if r.verdict != Verdict.CORRECT][: 100 - a.small_known]
    small = run_eval(store, ModelSpec(model=str(paths.model)), suite,
                     LoadResult(probes=tuple(right + wrong), skipped=0, problems=(), source="few known facts"),
                     EvalOptions()).run_id
    small_rows = []
    for maybe in [None, *adapters]:
        t0 = time.perf_counter()
        cand = rerun_like(store, small, adapter=None if maybe is None else str(maybe))
        what = "no-op" if maybe is None else f"fix {maybe}"
        label = f"{len(right)} known of {len(right) + len(wrong)}: {what}"
        small_rows.append(summarize(label, gate_runs(store, small, cand, policy), policy, time.perf_counter() - t0))
    rows += small_rows

    print(f"\n== summary (world {paths.root}, {len(loaded.probes)} probes, policy "
          f"{a.policy or 'built-in'}, {time.perf_counter() - t_start:.0f} s in all)")
    print(f"{'candidate':<58} {'verdict':<12} {'exit':>4} {'broken':>12} {'fixed':>5} {'Δ abst pt':>9}  "
          "failing tags / inconclusive gates")
    for r in rows:
        name = r["candidate"] if len(r["candidate"]) <= 58 else "..." + r["candidate"][-55:]
        broken = f"{r['broken']}/{r['known']} {100 * r['broken_fraction']:.1f}%"
        print(f"{name:<58} {r['verdict']:<12} {r['exit_code']:>4} {broken:>12} {r['fixed']:>5} "
              f"{r['abstained_delta_points']:>+9.2f}  {', '.join(r['failing_tags'] + r['inconclusive_gates']) or '-'}")
    ok_noop = rows[0]["exit_code"] == 0 and rows[0]["broken"] == rows[0]["fixed"] == 0
    ok_break = breaker["exit_code"] == 1 and breaker["failing_tags"] == [a.tag]
    ok_small = all(r["verdict"] in ("inconclusive", "fail") for r in small_rows) if a.small_known < 6 else True
    print(f"no-op passes with zero flips: {ok_noop}; tag-breaker fails on exactly [{a.tag}]: {ok_break}; "
          f"few known facts never pass: {ok_small}")
    if a.json:
        Path(a.json).write_text(json.dumps({"world": str(paths.root), "baseline_run": base, "rows": rows},
                                           indent=2) + "\n")
    return 0 if ok_noop and ok_break and ok_small else 1


if __name__ == "__main__":
    sys.exit(main())

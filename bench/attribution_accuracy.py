"""Attribution accuracy against the synthetic world's ground truth.

For each world (default 120 entities seed 0 llama; 60 entities seed 1; gpt2; alt style with an
unrelated seed; the Chinese world, default size and 60 entities seed 1; three held out when the thresholds were
chosen: seed 3, alt seed 11, 90 entities seed 5; four held out when the decision last changed: seed 13, alt seed
17, gpt2 seed 4, Chinese seed 2): build it, eval with 10 samples
+ paraphrases, index the corpus, attribute, and score
the failed probes against truth.jsonl's expected category (read here only, never by the method).

    .venv/bin/python bench/attribution_accuracy.py [--out /tmp/attr_bench] [--worlds default,s1,...]
    .venv/bin/python bench/attribution_accuracy.py --world-dir PLANTED_DIR   # a planted world (real model)
    .venv/bin/python bench/attribution_accuracy.py --reuse ...   # attribute the stored runs again, no eval
    .venv/bin/python bench/attribution_accuracy.py --engine infini-gram ...   # the data axis from suffix arrays
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import torch

from evals.world import WorldConfig, WorldPaths, build_world
from workbench.attribution.attribute import attribute_run
from workbench.attribution.build import build_index
from workbench.attribution.engine import ENGINES, Engine, infinigram_dir, open_engine
from workbench.attribution.index import default_index_path
from workbench.attribution.infinigram_build import build_infinigram
from workbench.attribution.types import CATEGORIES
from workbench.probes import resolve_probes
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.types import ModelSpec

WORLDS = {
    "default": WorldConfig(),
    "s1": WorldConfig(entities=60, seed=1),
    "gpt2": WorldConfig(arch="gpt2"),
    "alt": WorldConfig(style="alt", seed=7),
    "zh": WorldConfig(lang="zh"),
    "zh-s1": WorldConfig(lang="zh", entities=60, seed=1),
    # Held out when the decision's thresholds were last chosen (workbench/attribution/decide.py `Thresholds`).
    "s3": WorldConfig(seed=3),
    "alt-s11": WorldConfig(style="alt", seed=11),
    "s5-e90": WorldConfig(entities=90, seed=5),
    # Held out when the decision last changed (the corpus-side contradiction, the rarely-stated paraphrase hit, the
    # trace's rate floor): never scored before it.
    "s13": WorldConfig(seed=13),
    "alt-s17": WorldConfig(style="alt", seed=17),
    "gpt2-s4": WorldConfig(arch="gpt2", seed=4),
    "zh-s2": WorldConfig(lang="zh", seed=2),
}
GOAL = {"default": 0.95}  # every other world: 0.90


def score(pairs: list[tuple[str, str]]) -> dict[str, object]:
    """pairs: (truth, predicted). Per-category precision/recall/F1 over the categories in truth,
    macro-F1 over those, and the confusion matrix truth -> predicted -> count."""
    cats = sorted({t for t, _ in pairs})
    per: dict[str, dict[str, float]] = {}
    for c in cats:
        tp = sum(t == c and p == c for t, p in pairs)
        fp = sum(t != c and p == c for t, p in pairs)
        fn = sum(t == c and p != c for t, p in pairs)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        per[c] = {"precision": prec, "recall": rec, "f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0,
                  "n": tp + fn}
    confusion: dict[str, Counter[str]] = {c: Counter() for c in cats}
    for t, p in pairs:
        confusion[t][p] += 1
    macro = sum(v["f1"] for v in per.values()) / len(per) if per else 0.0
    return {"per_category": per, "macro_f1": macro, "confusion": {k: dict(v) for k, v in confusion.items()},
            "n": len(pairs)}


def run_world(name: str, out: Path, reuse: bool = False, engine: Engine = "fts5") -> dict[str, object]:
    return measure(name, build_world(out / name, WORLDS[name]), out / name / "ws", reuse, engine)


def measure(name: str, paths: WorldPaths, ws: Path, reuse: bool = False, engine: Engine = "fts5") -> dict[str, object]:
    """Eval (10 samples + paraphrases), index the corpus, attribute, score against truth.jsonl: any world folder in
    the synthetic world's layout (a planted world on a real model too). `reuse`: attribute the workspace's last
    finished run of this model again (the eval is the slow part; a change to the attribution needs only this)."""
    store = Store.open(ws)
    t0 = time.perf_counter()
    done = [r.id for r in store.list_runs() if r.model == str(paths.model) and r.status == "done"]
    if reuse and done:
        run_id = done[-1]
    else:
        suite, loaded = resolve_probes(str(paths.suite))
        run_id = run_eval(store, ModelSpec(model=str(paths.model), dtype="float32"), suite, loaded,
                          EvalOptions(samples=10, paraphrases=True)).run_id
    t_eval = time.perf_counter() - t0
    if engine == "fts5":
        build_index(paths.corpus, default_index_path(ws))
    else:  # folded bytes, whole words, co-occurrence anywhere in a document (as FTS5 counts it)
        build_infinigram(paths.corpus, infinigram_dir(ws), window=0)
    t0 = time.perf_counter()
    with open_engine(default_index_path(ws) if engine == "fts5" else infinigram_dir(ws)) as index:
        items = attribute_run(store, run_id, index=index)
    t_attr = time.perf_counter() - t0
    truth = {row["probe_id"]: row for row in map(json.loads, paths.truth.read_text().splitlines())}
    # A failed known fact has no expected category (the world has no answer key for it): not scored.
    pairs = [(truth[a.probe_id]["expected_category"], a.category) for a in items
             if truth[a.probe_id]["expected_category"]]
    return {"world": name, "engine": engine, **score(pairs), "unscored_known_failures": len(items) - len(pairs),
            "run_id": run_id,
            "reused": reuse and bool(done), "eval_s": round(t_eval, 1), "attribute_s": round(t_attr, 2)}


def report(r: dict[str, object]) -> None:
    name = str(r["world"])
    goal = GOAL.get(name, 0.90)
    macro = float(r["macro_f1"])  # type: ignore[arg-type]
    print(f"\n== {name}: {r['n']} failed probes, macro-F1 {macro:.3f} (goal {goal}: "
          f"{'met' if macro >= goal else 'MISSED'}); {r['unscored_known_failures']} failed known facts "
          f"unscored; eval {r['eval_s']}s, attribute {r['attribute_s']}s")
    per: dict[str, dict[str, float]] = r["per_category"]  # type: ignore[assignment]
    for c, m in per.items():
        print(f"  {c:<27} P {m['precision']:.3f}  R {m['recall']:.3f}  F1 {m['f1']:.3f}  n={int(m['n'])}")
    conf: dict[str, dict[str, int]] = r["confusion"]  # type: ignore[assignment]
    cols = [c for c in CATEGORIES if any(c in row for row in conf.values())]
    short = {c: c.split(":")[1][:8] for c in cols}
    print("  truth \\ predicted".ljust(30) + " ".join(f"{short[c]:>9}" for c in cols))
    for t, row in conf.items():
        print(f"  {t:<28}" + " ".join(f"{row.get(c, 0):>9}" for c in cols))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/attr_bench", help="where worlds and workspaces go (reused)")
    ap.add_argument("--worlds", help=f"comma list of {', '.join(WORLDS)} (default: all, or none with --world-dir)")
    ap.add_argument("--world-dir", action="append", default=[], metavar="DIR",
                    help="score a world folder already built (e.g. `workbench world build --base smollm2`); "
                         "repeatable; with it, --worlds defaults to none")
    ap.add_argument("--reuse", action="store_true",
                    help="attribute each workspace's last finished eval run again instead of evaluating anew")
    ap.add_argument("--engine", choices=ENGINES, default="fts5",
                    help="the corpus index of the data axis (infini-gram: `pip install -e \".[infinigram]\"`)")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = args.worlds.split(",") if args.worlds else [] if args.world_dir else list(WORLDS)
    unknown = [n for n in names if n not in WORLDS]
    if unknown:
        ap.error(f"--worlds: unknown world(s) {', '.join(unknown)}; known: {', '.join(WORLDS)}")
    results = [run_world(name, Path(args.out), args.reuse, args.engine) for name in names]
    results += [measure(Path(d).name, WorldPaths.under(Path(d)), Path(args.out) / f"{Path(d).name}-ws", args.reuse,
                        args.engine) for d in args.world_dir]
    for r in results:
        report(r)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

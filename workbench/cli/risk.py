"""`workbench risk score|fit`: how likely each answer of a run is made up, from the model's own generations."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from workbench.cli._common import atomic_output, bounded, check_output_file, print_json, subcommand

HELP = "hallucination risk per answer with no reference: score a run's answers, or fit the score to graded runs"
EPILOG = ("The score reads what `workbench eval` stored: the greedy answer's mean log-prob, its samples (--samples) "
          "and its paraphrases' answers (--paraphrases); a run without samples is scored on the log-prob alone.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    sc = subcommand(sub, "score", "score every answer of a run, store the scores and list the riskiest")
    sc.add_argument("run", help="run id (a unique prefix, or `latest`)")
    sc.add_argument("--risk-model", metavar="FILE",
                    help="a risk model `workbench risk fit` wrote (default: the shipped one)")
    sc.add_argument("--top", type=bounded(0, 100_000), default=10, help="how many of the riskiest to list (default 10)")
    ft = subcommand(sub, "fit", "fit the risk model to graded runs (runs whose probes had references)")
    ft.add_argument("runs", nargs="+", metavar="RUN", help="run ids: their hallucinations are what the score learns")
    ft.add_argument("--out", required=True, metavar="FILE", help="where to write the model (JSON)")


def run(args: argparse.Namespace) -> int:
    return _score(args) if args.action == "score" else _fit(args)


def _score(args: argparse.Namespace) -> int:
    from workbench.risk.run import score_run
    from workbench.risk.score import RiskModel
    from workbench.store import Store

    model = RiskModel.load(Path(args.risk_model)) if args.risk_model else None
    store = Store.open(args.workspace)
    scored = score_run(store, args.run, model)
    print_scored(scored, top=args.top, as_json=args.json)
    return 0


def print_scored(scored: Any, *, top: int, as_json: bool) -> None:
    """The scores' summary (`Scored.summary`) and the riskiest answers (also how `eval --risk` reports)."""
    summary = scored.summary()
    ranked = sorted(scored.risks, key=lambda r: -r.risk)[:top]
    if as_json:
        print_json({**summary, "riskiest": [{"probe_id": r.probe_id, "risk": r.risk, **r.features.to_dict()}
                                            for r in ranked]})
        return
    print(f"run {scored.run_id}: {summary['scored']} answers scored; {summary['high_risk']} at risk >= 0.5 "
          f"(risk model: {scored.model.fitted_on})")
    if summary["auroc_vs_grades"] is not None:
        print(f"against the run's own grades: AUROC {summary['auroc_vs_grades']:.3f} (1.0: every hallucination "
              "scored above every right answer)")
    for r in ranked:
        f = r.features
        said = ", ".join(f"{k} {v:.2f}" for k, v in (("logprob", f.logprob), ("disagreement", f.disagreement),
                                                        ("paraphrase", f.paraphrase)) if v is not None)
        print(f"  {r.risk:.2f}  {r.probe_id}  ({said})")


def _fit(args: argparse.Namespace) -> int:
    from workbench.risk.run import score_run
    from workbench.risk.score import default_model, fit
    from workbench.store import Store

    out = check_output_file(args.out, "--out")
    store = Store.open(args.workspace)
    rows, labels, ids = [], [], []
    for ref in args.runs:
        scored = score_run(store, ref, default_model(), save=False)
        rows += [r.features for r in scored.risks]
        labels += scored.hallucinated()
        ids.append(scored.run_id)
    model = fit(rows, labels, fitted_on=f"runs {', '.join(ids)} of {store.workspace}")
    with atomic_output(out, "--out") as tmp:
        model.save(tmp)
    if args.json:
        print_json({"out": str(out), "answers": model.answers, "weights": dict(zip(model.uses, model.weights,
                                                                                  strict=True))})
    else:
        print(f"wrote {out}: fitted on {model.answers} attempted answers of {len(ids)} run(s); weights "
              + ", ".join(f"{n} {w:+.2f}" for n, w in zip(model.uses, model.weights, strict=True)))
    return 0

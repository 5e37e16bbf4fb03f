"""`workbench show RUN`: metrics with intervals, per tag, and the worst probes."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli._common import bounded, print_json

HELP = "print a run's metrics (with confidence intervals), per-tag metrics and its worst probes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id (a unique prefix, or `latest`)")
    p.add_argument("--worst", type=bounded(0, 100_000), default=10,
                   help="how many hallucinations to list, 0-100000 (default 10)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from workbench.store import Store

    store = Store.open(args.workspace)
    if args.json:
        from workbench.grading.metrics import truncation_warnings
        from workbench.results import load_results

        res = load_results(store, args.run)
        rec = res.run
        print_json({"run_id": rec.id, "status": rec.status, "model": rec.model, "adapter": rec.adapter,
                    "backend": rec.backend, "engines": res.engines(), "suite": rec.suite, "n": rec.n_probes,
                    "metrics": rec.metrics, "options": rec.options, "note": rec.note,
                    "warnings": truncation_warnings(rec.metrics)})
        return 0
    print_run(store, args.run, worst=args.worst)
    return 0


def _pct(m: dict[str, Any], key: str) -> str:
    v = float(m[key])
    ci = (m.get("ci") or {}).get(key)
    return f"{100 * v:5.1f}" + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")


def _judge_line(grader: dict[str, Any]) -> str | None:
    """What a judge grader did: the answers it judged, those answered from its cache, and its unparseable
    replies (graded by the match grader instead), so a judge that never names a grade is not silent."""
    if grader.get("name") != "judge":
        return None
    # .get: a run stored before a count existed (judge_cached came later) still shows; a missing count reads "?".
    calls, cached, bad = (grader.get(k, "?") for k in ("judge_calls", "judge_cached", "unparseable"))
    return (f"judge {grader.get('judge_model', '?')}: {calls} answers judged, {cached} from its cache, {bad} replies "
            "unparseable (graded by match instead)")


def print_run(store: object, run_id: str, *, worst: int = 10) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from workbench.grading.metrics import truncation_warnings
    from workbench.printable import printable
    from workbench.results import load_results
    from workbench.store import Store
    from workbench.types import Verdict

    assert isinstance(store, Store)
    res = load_results(store, run_id)
    rec = res.run
    console = Console()
    title = escape(printable(f"{rec.id}  {rec.model}" + (f" + {rec.adapter}" if rec.adapter else "")
                             + f"  on {rec.suite}"))
    table = Table(title=title)
    for col in ("slice", "n", "correct %", "halluc. %", "abstained %", "acc|attempted %", "F"):
        table.add_column(col, justify="right" if col != "slice" else "left")
    metrics = rec.metrics or {}
    rows = [("overall", metrics.get("overall")), *(metrics.get("by_tag") or {}).items()]
    for name, m in rows:
        if m:
            table.add_row(escape(printable(name)), str(m["n"]), _pct(m, "correct"), _pct(m, "incorrect"),
                          _pct(m, "not_attempted"), _pct(m, "accuracy_given_attempted"), f"{100 * m['f_score']:.1f}")
    console.print(table)
    console.print(f"generated {rec.generated}, from cache {rec.cached}, skipped bad rows {rec.skipped_bad}, "
                  f"status {rec.status}")
    if (budget := rec.suite_config.get("max_tokens")) is not None:
        rule = rec.options.get("max_tokens_rule")
        console.print(f"token budget: {budget} new tokens" + (f" ({rule})" if rule else ""), markup=False)
    if t := metrics.get("truncated"):
        console.print(f"cut by the token budget (finish_reason length): {t['n']} of {t['of']} answers"
                      + (f", {metrics['truncated_samples']['n']} of {metrics['truncated_samples']['of']} samples"
                         if "truncated_samples" in metrics else ""), markup=False)
    if line := _judge_line(metrics.get("grader") or {}):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for line in truncation_warnings(metrics):
        console.print(line, style="bold yellow", markup=False, highlight=False, soft_wrap=True)
    if rec.note:
        console.print(printable(rec.note), markup=False, highlight=False, soft_wrap=True)
    if engines := res.engines():
        console.print("answers by engine: " + "; ".join(f"{e} ({n})" for e, n in engines.items()), markup=False)
    bad = [r for r in res.probes if r.verdict == Verdict.INCORRECT]
    # Confident hallucinations first: high sample agreement, then high log-prob.
    bad.sort(key=lambda r: (-(r.agreement or 0.0), -(r.mean_logprob or -1e9)))
    if bad and worst:
        t = Table(title=f"hallucinations ({len(bad)}; most confident first)")
        for col in ("probe", "question", "answer", "accepted", "agreement"):
            t.add_column(col)
        for r in bad[:worst]:
            # the user's file and the model's words: escaped (and markup-quoted) before the terminal sees them
            t.add_row(*(escape(printable(x)) for x in (r.probe.id, r.probe.question, r.answer,
                                                       " | ".join(r.probe.answers[:3]))),
                      "" if r.agreement is None else f"{r.agreement:.2f}")
        console.print(t)

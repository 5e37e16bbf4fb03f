"""`workbench export RUN`: one row per answer, as JSONL, Parquet or CSV; or the run in lm-evaluation-harness's
results layout (`--format lm-eval`, workbench/lmeval_export.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from workbench.cli._common import atomic_output, check_output_dir, check_output_file, created_only_if_whole

HELP = "export a run's answers (one row per answer) as jsonl, parquet or csv, or its results as lm-eval writes them"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id (a unique prefix, or `latest`)")
    p.add_argument("--format", choices=("jsonl", "parquet", "csv", "lm-eval"), default="jsonl",
                   help="lm-eval: lm-evaluation-harness's results JSON and samples JSONL, in a folder")
    p.add_argument("--out", help="output file (default: <workspace>/exports/<run>.<format>); "
                   "lm-eval: a folder (default: <workspace>/exports/<run>-lm-eval)")


def run(args: argparse.Namespace) -> int:
    if args.format == "lm-eval":
        return _lm_eval(args)
    import pandas as pd

    from workbench.store import Store

    given = check_output_file(args.out, "--out") if args.out else None  # before any work
    store = Store.open(args.workspace)
    rec = store.get_run(args.run)
    probes = {p["id"]: p for p in store.probe_rows(rec.id)}
    from workbench.risk.stored import load_risks

    risks = load_risks(store, rec.id)  # the question's greedy answer, when the run was scored (`workbench risk`)
    rows = []
    for a in store.answer_rows(rec.id):
        p = probes[a["probe_id"]]
        rows.append({"run_id": rec.id, "probe_id": a["probe_id"], "question": p["question"],
                     "answers": list(p["answers"]), "tags": list(p["tags"]), "variant": a["variant"],
                     "kind": a["kind"], "sample_index": a["sample_index"], "prompt": a["prompt"],
                     "answer": a["text"], "verdict": a["verdict"], "mean_logprob": a["mean_logprob"],
                     "finish_reason": a["finish_reason"], "engine": a["engine"],
                     "graded_by": a.get("graded_by"), "risk": _risk_of(risks, a)})
    out = given or Path(args.workspace) / "exports" / f"{rec.id}.{args.format}"
    df = pd.DataFrame(rows)
    # Written beside, then renamed: a killed export leaves the old file or the whole new one.
    with atomic_output(out, "--out" if given else "export") as tmp:
        if args.format == "jsonl":
            df.to_json(tmp, orient="records", lines=True, force_ascii=False)
        elif args.format == "parquet":
            df.to_parquet(tmp, index=False)
        else:
            flat = df.assign(answers=df["answers"].map("; ".join), tags=df["tags"].map("; ".join))
            spreadsheet_safe(flat).to_csv(tmp, index=False)
    print(f"wrote {len(rows)} answers to {out}")
    return 0


def _risk_of(risks: dict[str, Any], a: dict[str, Any]) -> float | None:
    r = risks.get(a["probe_id"])
    return r.risk if r is not None and a["kind"] == "greedy" and a["variant"] == r.variant else None


#: What a spreadsheet reads as the start of a formula (OWASP's CSV injection list): such a cell gets a leading `'`.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(df: Any) -> Any:
    """`df` with every text cell that a spreadsheet would run as a formula (`=cmd|' /C calc'!A0`, `@SUM(...)`)
    prefixed with a quote, as OWASP advises: stored answers and questions are untrusted text. Numbers stay."""
    def cell(v: Any) -> Any:
        return "'" + v if isinstance(v, str) and v.startswith(FORMULA_START) else v

    from pandas.api.types import is_numeric_dtype

    return df.apply(lambda col: col if is_numeric_dtype(col.dtype) else col.map(cell))


def _lm_eval(args: argparse.Namespace) -> int:
    from workbench.lmeval_export import export_lm_eval
    from workbench.store import Store

    # lm-eval's layout is a folder: an existing file, a missing chain of folders or a read-only place is refused
    # before any work; a write that fails half-way (a full disk) takes what it made with it.
    given = check_output_dir(args.out, "--out") if args.out else None
    store = Store.open(args.workspace)
    rec = store.get_run(args.run)
    out = given or Path(args.workspace) / "exports" / f"{rec.id}-lm-eval"
    flag = "--out" if given else "export"
    if given is None:
        check_output_dir(str(out.parent), flag)  # <workspace>/exports: made when missing, as the other formats do
        out.parent.mkdir(exist_ok=True)
    with created_only_if_whole(out, flag):
        results, samples = export_lm_eval(store, rec.id, out)
    print(f"wrote {results}\nwrote {samples}")
    return 0

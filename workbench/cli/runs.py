"""`workbench runs`: list the workspace's runs (a run whose process is gone reads `interrupted`, with how to
resume it)."""

from __future__ import annotations

import argparse

from workbench.cli._common import print_json

HELP = "list runs in the workspace"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from workbench.store import Store, shown_time

    runs = Store.open(args.workspace).list_runs()
    rows = [{"run_id": r.id, "created_at": r.created_at, "status": r.status, "model": r.model,
             "adapter": r.adapter, "suite": r.suite, "n": r.n_probes,
             "correct": (r.metrics or {}).get("overall", {}).get("correct"),
             "incorrect": (r.metrics or {}).get("overall", {}).get("incorrect"), "note": r.note} for r in runs]
    if args.json:
        print_json(rows)
        return 0
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from workbench.printable import printable

    # The run id is what a user copies into the next command: never cut or wrapped. The other columns give way at
    # 80 columns (folded, not cut with an ellipsis, so a model path stays whole too), with no vertical rules.
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("run", no_wrap=True)
    for col in ("created", "status", "model", "adapter", "suite", "n", "correct %", "halluc. %"):
        table.add_column(col, overflow="fold", justify="right" if col in ("n", "correct %", "halluc. %") else "left")
    for r in rows:
        pct = [f"{100 * r[k]:.1f}" if isinstance(r[k], float) else "-" for k in ("correct", "incorrect")]
        table.add_row(str(r["run_id"]), shown_time(str(r["created_at"])), str(r["status"]), printable(r["model"]),
                      printable(r["adapter"]), printable(r["suite"]), str(r["n"]), *pct)
    console = Console()
    console.print(table)
    for r in rows:
        if r["note"]:
            console.print(f"{r['run_id']} {printable(r['note'])}", markup=False, highlight=False, soft_wrap=True)
    return 0

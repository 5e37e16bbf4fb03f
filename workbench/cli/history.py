"""`workbench history`: every gate verdict of the workspace, with release sign-offs."""

from __future__ import annotations

import argparse

from workbench.cli._common import print_json

HELP = "list past regression gates and release sign-offs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from workbench.regression.gate import history
    from workbench.store import Store, shown_time

    rows = history(Store.open(args.workspace))
    if args.json:
        print_json(rows)
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="regression gates")
    for col in ("gate", "when", "baseline", "candidate", "adapter", "verdict", "exit", "sign-off"):
        table.add_column(col)
    for r in rows:
        s = r["signoff"]
        table.add_row(r["gate_id"], shown_time(r["created_at"]), r["baseline_run"], r["candidate_run"],
                      r["adapter"] or "", r["verdict"], str(r["exit_code"]),
                      "" if s is None else f"{s['decision']} by {s['reviewer']}")
    Console().print(table)
    return 0

"""`workbench history`: every gate verdict of the workspace, with release sign-offs and their overrides."""

from __future__ import annotations

import argparse

from workbench.cli._common import print_json

HELP = "list past regression gates and release sign-offs"
EPILOG = ("The sign-off column names the gate a decision covers and its verdict, the override reason of a "
          "sign-off over a FAIL or INCONCLUSIVE gate (or none), and later gates of the same model and adapter "
          "that failed or were inconclusive. A decision outside any gate is a row without a gate.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.epilog = EPILOG


def run(args: argparse.Namespace) -> int:
    from workbench.releases import release_history
    from workbench.store import Store, shown_time

    rows = release_history(Store.open(args.workspace))
    if args.json:
        print_json(rows)
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from workbench.printable import printable

    table = Table(title="regression gates")
    for col in ("gate", "when", "baseline", "candidate", "adapter", "verdict", "exit", "sign-off"):
        table.add_column(col)
    for r in rows:
        s = r["signoff"]
        cells = (r["gate_id"] or "(no gate)", shown_time(r["created_at"]), r["baseline_run"], r["candidate_run"],
                 r["adapter"], r["verdict"], r["exit_code"], None if s is None else s["text"])
        table.add_row(*(escape(printable(c)) for c in cells))  # stored text: no control character reaches the tty
    Console().print(table)
    return 0

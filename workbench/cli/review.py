"""`workbench review RUN`: record a reviewer override or a release decision (append-only), or list them."""

from __future__ import annotations

import argparse
import getpass
import os
from typing import Any

from workbench.cli._common import print_json

HELP = "override a verdict or attribution, or sign off / block a run for release (append-only log)"
EPILOG = ("A sign-off covers one recorded gate of RUN (--gate, default its latest). Over a FAIL or INCONCLUSIVE "
          "gate, or with no gate at all, it is refused (exit 2) unless --override-reason says why the candidate "
          "may ship anyway; the override and its reason are recorded and shown by `workbench history`.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id (a unique prefix, or `latest`)")
    p.add_argument("--target", choices=("verdict", "attribution", "release"), help="what to decide (omit to list)")
    p.add_argument("--value", help="verdict, attribution category, or signoff | block")
    p.add_argument("--probe", help="probe id (verdict and attribution)")
    p.add_argument("--reason", help="why (required)")
    p.add_argument("--gate", default="", help="release: the recorded gate of RUN the decision is about "
                   "(default: RUN's latest gate as candidate)")
    p.add_argument("--confirm", action="store_true", help="release: sign off although reviewers changed grades "
                   "the gate saw since it was recorded")
    p.add_argument("--override-reason", metavar="TEXT", help="release: sign off although the gate is FAIL or "
                   "INCONCLUSIVE, or RUN has no gate; TEXT (required, not blank) says why, and is recorded")
    p.epilog = EPILOG
    p.add_argument("--reviewer", default=os.environ.get("WORKBENCH_REVIEWER") or getpass.getuser())
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from workbench import reviews
    from workbench.errors import WorkbenchError
    from workbench.printable import printable
    from workbench.store import Store

    store = Store.open(args.workspace)
    run_id = store.get_run(args.run).id
    if args.target is None:
        rows: list[dict[str, Any]] = [r.to_dict() for r in reviews.list_reviews(store, run_id)]
        if args.json:
            print_json(rows)
        else:
            for row in rows:  # stored text, typed in the app: escaped before a terminal can act on it
                s = {k: printable(v) for k, v in row.items()}
                over = f"; override: {s['override_reason']}" if row["override_reason"] else ""
                print(f"#{s['id']} {s['at']} {s['reviewer']}: {s['target']} {s['probe_id']} "
                      f"{s['old_value']} -> {s['new_value']} ({s['reason']}{over})")
        return 0
    if not args.value:
        raise WorkbenchError("--value is required with --target")
    r: reviews.Review
    if args.target == "release":
        r = reviews.record_release(store, reviewer=args.reviewer, run_id=run_id, decision=args.value,
                                   reason=args.reason or "", gate_id=args.gate, confirm=args.confirm,
                                   override_reason=args.override_reason)
    else:
        r = reviews.record_override(store, reviewer=args.reviewer, run_id=run_id, probe_id=args.probe or "",
                                    target=args.target, new_value=args.value, reason=args.reason or "")
    if args.json:
        print_json(r.to_dict())
    else:
        on = f" on {r.gate_id}" if r.gate_id else ""
        over = f" (override: {r.override_reason})" if r.override_reason else ""
        print(printable(f"recorded #{r.id}: {r.target} {r.probe_id or ''} {r.old_value} -> {r.new_value} by "
                        f"{r.reviewer}{on}{over}"))
    return 0

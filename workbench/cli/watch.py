"""`workbench watch DIR`: gate every new complete adapter that appears in a training output folder."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from workbench.cli._common import (
    add_field_arguments,
    add_guard_arguments,
    add_limit_arguments,
    bounded,
    limits_from_args,
    print_json,
)

HELP = ("watch a folder for new complete adapters/checkpoints and gate each against a baseline run; "
        "--once exits with the worst verdict of the scan: 1 fail, 3 inconclusive, 0 pass")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", help="training output folder to watch")
    p.add_argument("--baseline", required=True, help="baseline run id: its model, probes and settings are reused")
    p.add_argument("--policy", help="policy YAML (default: the built-in policy)")
    p.add_argument("--interval", type=bounded(0.1, 86_400, whole=False), default=60.0,
                   help="seconds between scans, 0.1 to 86400 (default 60)")
    p.add_argument("--once", action="store_true", help="scan once and exit (for cron / CI)")
    p.add_argument("--json", action="store_true", help="print one JSON line per gated candidate")
    add_guard_arguments(p)
    add_field_arguments(p)
    add_limit_arguments(p)


def run(args: argparse.Namespace) -> int:
    from workbench.backends import keep_engines
    from workbench.errors import WorkbenchError
    from workbench.gating import (
        complete_adapters,
        field_outcomes,
        gate_runs,
        gated_adapters,
        guard_outcomes,
        rerun_like,
    )
    from workbench.regression import load_policy, worst_exit_code
    from workbench.store import Store

    folder = Path(args.folder)
    if not folder.is_dir():
        raise WorkbenchError(f"watch folder `{folder}` does not exist")
    store = Store.open(args.workspace)
    baseline = store.get_run(args.baseline).id
    policy = load_policy(args.policy) if args.policy else None
    limits = limits_from_args(args)
    worst = 0
    # One vLLM engine serves every candidate while watch runs (each would otherwise start its own);
    # it shuts down when watch stops, Ctrl-C and SIGTERM included.
    with keep_engines():
        while True:
            done = gated_adapters(store)
            for adapter in complete_adapters(folder):
                if str(adapter) in done:
                    continue
                cand = rerun_like(store, baseline, adapter=str(adapter), limits=limits)
                guard = guard_outcomes(store, baseline, cand, pool=args.guard_pool, limits=limits,
                                       enabled=not args.no_guard)
                field = field_outcomes(store, baseline, cand, suite=args.field_suite, limits=limits,
                                       enabled=not args.no_field)
                record = gate_runs(store, baseline, cand, policy, guard=guard, field=field, policy_source=args.policy)
                worst = worst_exit_code((worst, record.result.exit_code))  # fail > inconclusive > pass
                line = {"adapter": str(adapter), "candidate_run": cand, "gate_id": record.id,
                        "verdict": record.result.verdict, "exit_code": record.result.exit_code,
                        "report": str(record.reports["html"])}
                print_json(line) if args.json else print(
                    f"{adapter}: {record.result.verdict} (report {record.reports['html']})", flush=True)
            if args.once:
                return worst
            time.sleep(args.interval)

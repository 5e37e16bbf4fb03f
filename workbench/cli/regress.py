"""`workbench regress`: may the candidate ship? Exit 0 pass, 1 a gate failed, 2 error."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import Any

from workbench.cli._common import add_eval_arguments, print_json
from workbench.cli._ray import BackendFor, add_ray_arguments, ray_backends

HELP = "gate a candidate against a baseline (runs or models) under a policy; exit 0 pass, 1 fail, 2 error"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", required=True, help="baseline run id, or a model directory / hub id")
    p.add_argument("--candidate", required=True, help="candidate run id, or a model directory / hub id")
    p.add_argument("--baseline-adapter", help="LoRA adapter on the baseline model")
    p.add_argument("--candidate-adapter", help="LoRA adapter on the candidate model")
    p.add_argument("--probes", help="suite or probe file (needed when --baseline/--candidate are models)")
    p.add_argument("--backend", default="hf")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--policy", help="policy YAML (default: the built-in policy)")
    p.add_argument("--report", help="also write the report here (.md or .html)")
    p.add_argument("--junit", help="write JUnit XML here (one test case per gate)")
    p.add_argument("--json", action="store_true")
    add_eval_arguments(p)
    add_ray_arguments(p)


def resolve_run(store: Any, ref: str, adapter: str | None, args: argparse.Namespace, *, what: str,
                like: str | None = None, backend_for: BackendFor | None = None) -> str:
    """A run id as given, or evaluate the model (cache makes repeats free) and return the new run's id.
    Without --probes, a model is evaluated like run `like` (its probes, suite settings and options)."""
    from workbench.errors import WorkbenchError

    is_model = os.path.exists(ref) or (adapter is not None)
    if not is_model:
        try:
            return str(store.get_run(ref).id)
        except WorkbenchError as e:
            if "/" not in ref:
                raise
            del e  # looks like a hub id: evaluate it
    if not args.probes and like is not None:
        from workbench.regression.gate import rerun_like

        return rerun_like(store, like, model=ref, adapter=adapter, backend_for=backend_for)
    if not args.probes:
        raise WorkbenchError(f"--{what} `{ref}` is a model: --probes is needed to evaluate it")
    from workbench.cli.eval import eval_options_from_args
    from workbench.probes import resolve_probes
    from workbench.runner import run_eval
    from workbench.types import ModelSpec

    if args.backend == "hf" and not os.path.exists(ref) and ref.startswith((".", "/")):
        raise WorkbenchError(f"model directory `{ref}` does not exist")
    suite, loaded = resolve_probes(args.probes, format=args.format, skip_bad=args.skip_bad)
    spec = ModelSpec(model=ref, adapter=adapter, backend=args.backend, dtype=args.dtype)
    backend = backend_for(spec) if backend_for else None
    return run_eval(store, spec, suite, loaded, eval_options_from_args(args), backend=backend).run_id


def run(args: argparse.Namespace) -> int:
    from workbench.regression import load_policy, print_terminal
    from workbench.regression.gate import gate_runs
    from workbench.store import Store

    store = Store.open(args.workspace)
    policy = load_policy(args.policy) if args.policy else None
    with ray_backends(args) as backend_for:
        base = resolve_run(store, args.baseline, args.baseline_adapter, args, what="baseline", backend_for=backend_for)
        cand = resolve_run(store, args.candidate, args.candidate_adapter, args, what="candidate", like=base,
                           backend_for=backend_for)
    record = gate_runs(store, base, cand, policy)
    result = record.result
    if args.report:
        kind = "html" if Path(args.report).suffix.lower() in (".html", ".htm") else "markdown"
        shutil.copyfile(record.reports[kind], args.report)
    if args.junit:
        shutil.copyfile(record.reports["junit"], args.junit)
    if args.json:
        print_json({"gate_id": record.id, "verdict": result.verdict, "exit_code": result.exit_code,
                    "baseline_run": base, "candidate_run": cand,
                    "reports": {k: str(v) for k, v in record.reports.items()}, **result.to_dict()})
    else:
        print_terminal(result)
        print(f"reports: {record.reports['html']}")
    return int(result.exit_code)

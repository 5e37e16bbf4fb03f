"""`workbench regress`: may the candidate ship? Exit 0 pass, 1 a gate failed, 2 error, 3 inconclusive."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from workbench.cli._common import (
    add_dtype_argument,
    add_eval_arguments,
    add_field_arguments,
    add_guard_arguments,
    add_limit_arguments,
    check_model,
    check_output_file,
    copy_atomic,
    limits_from_args,
    parse_options,
    print_json,
    progress_bar,
    resolve_model_ref,
    suite_with_generation,
)
from workbench.cli._ray import BackendFor, add_ray_arguments, ray_backends
from workbench.trackers import REPORT_TO_HELP

HELP = ("gate a candidate against a baseline (runs or models) under a policy; exit 0 pass, 1 fail, 2 error, "
        "3 inconclusive (a fail gate could not have failed on this probe set)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", required=True, help="baseline run id, or a model directory / hub id")
    p.add_argument("--candidate", required=True, help="candidate run id, or a model directory / hub id")
    p.add_argument("--baseline-adapter", help="LoRA adapter on the baseline model")
    p.add_argument("--candidate-adapter", help="LoRA adapter on the candidate model")
    p.add_argument("--probes", help="suite or probe file (needed when --baseline/--candidate are models)")
    p.add_argument("--backend", default="hf", help="backend of models evaluated here (default hf)")
    p.add_argument("--backend-option", action="append", default=[], metavar="KEY=VALUE", help="its options")
    p.add_argument("--candidate-backend", help="evaluate the candidate model on this backend instead "
                   "(e.g. vllm against an hf baseline run); its options: --candidate-backend-option")
    p.add_argument("--candidate-backend-option", action="append", default=[], metavar="KEY=VALUE")
    add_dtype_argument(p)
    p.add_argument("--policy", help="policy YAML (default: the built-in policy)")
    p.add_argument("--report", help="also write the report here (.md or .html)")
    p.add_argument("--junit", help="write JUnit XML here (one test case per gate)")
    add_guard_arguments(p)
    add_field_arguments(p)
    p.add_argument("--report-to", metavar="TRACKERS", help=REPORT_TO_HELP)
    p.add_argument("--json", action="store_true")
    add_eval_arguments(p)
    add_limit_arguments(p)
    add_ray_arguments(p)


def _backend(args: argparse.Namespace, what: str) -> tuple[str | None, tuple[tuple[str, object], ...]]:
    """The backend (None: the baseline run's) and options a model given as --baseline/--candidate runs on."""
    if what == "candidate" and args.candidate_backend:
        return args.candidate_backend, parse_options(args.candidate_backend_option)
    return None, parse_options(args.backend_option)


def resolve_run(store: Any, ref: str, adapter: str | None, args: argparse.Namespace, *, what: str,
                like: str | None = None, backend_for: BackendFor | None = None) -> str:
    """A run id as given, or evaluate the model (cache makes repeats free) and return the new run's id.
    Without --probes, a model is evaluated like run `like` (its probes, suite settings and options)."""
    from workbench.errors import WorkbenchError
    from workbench.models import BUILTIN

    if ref in BUILTIN or ref.lower().endswith(".gguf"):  # converted once into the workspace
        ref = resolve_model_ref(ref, args.workspace, args.backend)
    is_model = os.path.exists(ref) or (adapter is not None)
    if adapter is not None and os.path.isdir(adapter):  # stored absolute: the gate's lineage read from anywhere
        adapter = os.path.abspath(adapter)
    if not is_model:
        try:
            return str(store.get_run(ref).id)
        except WorkbenchError as e:
            if "/" not in ref:
                raise
            del e  # looks like a hub id: evaluate it
    backend, options = _backend(args, what)
    rerun_of = None if args.probes else like  # then evaluated like that run, on its backend unless told
    check_model(ref, adapter, backend or (store.get_run(rerun_of).backend if rerun_of else args.backend))
    if rerun_of is not None:
        from workbench.gating import rerun_like

        given = [flag for flag, v in (("--max-tokens", args.max_tokens), ("--stop", args.stop),
                                      ("--system-prompt", args.system_prompt), ("--template", args.template))
                 if v is not None]
        if given:  # the candidate must be generated as the baseline was, or the gate compares unlike runs
            raise WorkbenchError(f"{', '.join(given)}: --{what} `{ref}` is evaluated like baseline run {rerun_of}, "
                                 "with its settings; give --probes to evaluate both models under new ones")

        return rerun_like(store, rerun_of, model=ref, adapter=adapter, backend=backend, backend_options=options,
                          limits=limits_from_args(args), backend_for=backend_for)
    if not args.probes:
        raise WorkbenchError(f"--{what} `{ref}` is a model: --probes is needed to evaluate it")
    from workbench.cli.eval import eval_options_from_args
    from workbench.probes import resolve_probes
    from workbench.runner import run_eval
    from workbench.types import ModelSpec

    backend = backend or args.backend
    suite, loaded = resolve_probes(args.probes, format=args.format, skip_bad=args.skip_bad)
    suite = suite_with_generation(suite, args)
    spec = ModelSpec(model=ref, adapter=adapter, backend=backend, dtype=args.dtype, options=options)
    return run_eval(store, spec, suite, loaded, eval_options_from_args(args), limits=limits_from_args(args),
                    backend=backend_for(spec) if backend_for else None).run_id


#: `--report` file extension -> the report written there.
REPORT_KINDS = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown"}


def run(args: argparse.Namespace) -> int:
    from workbench.errors import WorkbenchError
    from workbench.gating import field_outcomes, gate_runs, guard_outcomes
    from workbench.regression import load_policy, print_terminal
    from workbench.store import Store
    from workbench.trackers import parse_report_to, report_gate

    report_to = parse_report_to(args.report_to)  # a missing tracker is refused before anything runs
    # Refuse an unwritable --report/--junit before anything runs or is recorded (the gate is recorded once).
    outputs = {flag: check_output_file(path, flag) for flag, path in (("--report", args.report),
                                                                       ("--junit", args.junit)) if path}
    if "--report" in outputs and outputs["--report"].suffix.lower() not in REPORT_KINDS:
        raise WorkbenchError(f"--report `{args.report}`: `{outputs['--report'].suffix or '(no extension)'}` is no "
                             "report format; name an .html or .md file (its extension picks the format)")
    store = Store.open(args.workspace)
    policy = load_policy(args.policy) if args.policy else None
    with ray_backends(args) as backend_for:
        base = resolve_run(store, args.baseline, args.baseline_adapter, args, what="baseline", backend_for=backend_for)
        cand = resolve_run(store, args.candidate, args.candidate_adapter, args, what="candidate", like=base,
                           backend_for=backend_for)
    with progress_bar("known-facts guard", not args.json) as update:
        guard = guard_outcomes(store, base, cand, pool=args.guard_pool, limits=limits_from_args(args),
                               enabled=not args.no_guard, progress=update)
    field = field_outcomes(store, base, cand, suite=args.field_suite, limits=limits_from_args(args),
                           enabled=not args.no_field)
    record = gate_runs(store, base, cand, policy, guard=guard, field=field, policy_source=args.policy)
    result = record.result
    report_gate(report_to, Path(args.workspace), record.id, result.to_dict())
    if "--report" in outputs:
        kind = REPORT_KINDS[outputs["--report"].suffix.lower()]
        copy_atomic(record.reports[kind], outputs["--report"], "--report")
    if "--junit" in outputs:
        copy_atomic(record.reports["junit"], outputs["--junit"], "--junit")
    if args.json:
        from workbench.regression import verdict_line

        print_json({"gate_id": record.id, "verdict": result.verdict, "exit_code": result.exit_code,
                    "verdict_line": verdict_line(result), "baseline_run": base, "candidate_run": cand,
                    "reports": {k: str(v) for k, v in record.reports.items()}, **result.to_dict()})
    else:
        print_terminal(result)
        print(f"reports: {record.reports['html']}")
        print(signoff_hint(record.id, base, cand, result.verdict))
    return int(result.exit_code)


def signoff_hint(gate_id: str, baseline: str, candidate: str, verdict: str) -> str:
    """The run ids a release decision needs, and the command that records it: `review` wants the candidate's run
    id, which the report's labels do not show. A gate that failed or was inconclusive needs an override reason."""
    override = " --override-reason TEXT" if verdict in ("fail", "inconclusive") else ""
    return (f"gate {gate_id}: baseline run {baseline}, candidate run {candidate}\n"
            f"sign off: workbench review {candidate} --target release --value signoff --reason TEXT{override}"
            " (every gate and sign-off: workbench history)")

"""`workbench eval`: generate and grade answers of one model on one suite."""

from __future__ import annotations

import argparse
import os
from typing import Any

from workbench.cli._common import (
    add_eval_arguments,
    add_model_arguments,
    parse_options,
    print_json,
    progress_bar,
)
from workbench.cli._ray import add_ray_arguments, ray_backends

HELP = "evaluate a model on probes: greedy answers, samples, paraphrases; grade and store"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--probes", required=True, help="suite YAML, suite name, or probe file (jsonl/csv/parquet)")
    add_eval_arguments(p)
    add_ray_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def model_spec_from_args(args: argparse.Namespace) -> Any:
    from workbench.backends import BACKENDS
    from workbench.errors import WorkbenchError, unknown_name
    from workbench.types import ModelSpec

    if args.backend not in BACKENDS:
        raise unknown_name("backend", args.backend, BACKENDS)
    if args.backend != "openai" and not os.path.exists(args.model) and (
        args.model.startswith((".", "/", "~")) or args.model.count("/") > 1
    ):
        raise WorkbenchError(f"model directory `{args.model}` does not exist")
    if args.adapter and not os.path.isdir(args.adapter):
        raise WorkbenchError(f"adapter directory `{args.adapter}` does not exist")
    return ModelSpec(model=args.model, adapter=args.adapter, backend=args.backend, revision=args.revision,
                     dtype=args.dtype, options=parse_options(args.backend_option))


def eval_options_from_args(args: argparse.Namespace) -> Any:
    from workbench.errors import WorkbenchError
    from workbench.runner import EvalOptions

    try:
        return EvalOptions(samples=args.samples, paraphrases=args.paraphrases, temperature=args.temperature,
                           seed=args.seed, template=args.template)
    except ValueError as e:
        raise WorkbenchError(str(e)) from e


def run(args: argparse.Namespace) -> int:
    from workbench.probes import resolve_probes
    from workbench.runner import run_eval
    from workbench.store import Store

    spec = model_spec_from_args(args)
    options = eval_options_from_args(args)
    suite, loaded = resolve_probes(args.probes, format=args.format, skip_bad=args.skip_bad)
    if options.template:
        from workbench.errors import WorkbenchError
        from workbench.prompting import check_template

        try:
            check_template(options.template)
        except ValueError as e:
            raise WorkbenchError(f"--template: {e}") from None
    store = Store.open(args.workspace)
    with ray_backends(args) as backend_for, progress_bar("generating", not args.json) as progress:
        summary = run_eval(store, spec, suite, loaded, options, backend=backend_for(spec), progress=progress)
    overall = summary.metrics["overall"]
    if args.json:
        print_json({"run_id": summary.run_id, "n": summary.n, "skipped_bad": summary.skipped_bad,
                    **{k: overall[k] for k in ("correct", "incorrect", "not_attempted",
                                               "accuracy_given_attempted", "f_score")},
                    "ci": overall["ci"], "generated": summary.generated, "cached": summary.cached})
        return 0
    from workbench.cli.show import print_run

    print_run(store, summary.run_id, worst=5)
    return 0

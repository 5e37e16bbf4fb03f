"""`workbench eval`: generate and grade answers of one model on one suite."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from workbench.cli._common import (
    add_eval_arguments,
    add_limit_arguments,
    add_model_arguments,
    bounded,
    check_model_args,
    limits_from_args,
    parse_options,
    print_json,
    progress_bar,
    suite_with_generation,
)
from workbench.cli._ray import add_ray_arguments, ray_backends
from workbench.trackers import REPORT_TO_HELP

log = logging.getLogger(__name__)

HELP = "evaluate a model on probes: greedy answers, samples, paraphrases; grade and store"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, required=False)
    p.add_argument("--probes", help="suite YAML, suite name, or probe file (jsonl/csv/parquet)")
    p.add_argument("--limit", type=bounded(1, 10_000_000), metavar="N",
                   help="evaluate only the first N probes: a quick first look (the run holds those N, and a gate "
                        "against it asks the same N)")
    add_eval_arguments(p)
    add_limit_arguments(p)
    p.add_argument("--resume", metavar="RUN",
                   help="continue an unfinished run (stalled, failed, interrupted, killed) under its own id, with "
                        "its model, probes and options: only the missing answers are generated")
    p.add_argument("--reuse-cache-from", metavar="ENGINE",
                   help='also take cached answers another engine made (as `workbench show` names it, e.g. '
                        '"hf transformers-5.19.0 float32 cpu"), or `any`; by default only this engine\'s count')
    p.add_argument("--risk", action="store_true",
                   help="also score each answer's hallucination risk from the model's own generations (no reference "
                        "needed; with --samples, e.g. 5, it reads their agreement too): `workbench risk`")
    add_ray_arguments(p)
    p.add_argument("--report-to", metavar="TRACKERS", help=REPORT_TO_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def model_spec_from_args(args: argparse.Namespace) -> Any:
    from workbench.backends import registration
    from workbench.types import ModelSpec

    registration(args.backend)  # an unknown or clashing name is refused before the model is looked at
    check_model_args(args)  # resolves a built-in name or .gguf file into a model directory
    adapter = args.adapter
    if adapter is not None and Path(adapter).is_dir():  # stored absolute: the run's lineage read from anywhere
        adapter = str(Path(adapter).absolute())
    return ModelSpec(model=args.model, adapter=adapter, backend=args.backend, revision=args.revision,
                     dtype=args.dtype, options=parse_options(args.backend_option))


def eval_options_from_args(args: argparse.Namespace) -> Any:
    from workbench.errors import WorkbenchError
    from workbench.runner import EvalOptions

    try:
        return EvalOptions(samples=args.samples, paraphrases=args.paraphrases, temperature=args.temperature,
                           seed=args.seed, template=args.template,
                           reuse_cache_from=getattr(args, "reuse_cache_from", None))
    except ValueError as e:
        raise WorkbenchError(str(e)) from e


def _say_missing_paraphrases(probes: Any) -> None:
    """--paraphrases asks each probe's paraphrases: one line when some probes (or all) have none to ask."""
    bare = sum(not p.paraphrases for p in probes)
    if bare:
        log.warning("--paraphrases: %d of %d probes have no paraphrases (only their question is asked); add a "
                    "`paraphrases` field, or have a model write them: workbench paraphrase PROBES --model MODEL "
                    "--out FILE", bare, len(probes))


def run(args: argparse.Namespace) -> int:
    from workbench.errors import WorkbenchError
    from workbench.probes import resolve_probes
    from workbench.runner import resume_eval, run_eval
    from workbench.store import Store
    from workbench.trackers import parse_report_to, report_run

    report_to = parse_report_to(args.report_to)  # a missing tracker is refused before anything runs
    limits = limits_from_args(args)
    limited: dict[str, int] | None = None  # --limit: how many of how many probes
    if args.resume:
        if args.model or args.probes or args.max_tokens or args.stop or args.system_prompt is not None \
                or args.limit is not None:
            raise WorkbenchError("--resume continues a run with its own model, probes and options: "
                                 "leave out --model, --probes, --limit, --max-tokens, --stop and --system-prompt")
        if getattr(args, "ray", None):
            raise WorkbenchError("--resume continues a run in this process: leave out --ray")
        store = Store.open(args.workspace)
        with progress_bar("generating", not args.json) as progress:
            summary = resume_eval(store, args.resume, limits=limits, progress=progress)
    else:
        if not args.model or not args.probes:
            raise WorkbenchError("--model and --probes are required (or --resume RUN to continue a run)")
        spec = model_spec_from_args(args)
        options = eval_options_from_args(args)
        suite, loaded = resolve_probes(args.probes, format=args.format, skip_bad=args.skip_bad)
        suite = suite_with_generation(suite, args)
        total = len(loaded.probes)
        if args.limit is not None and args.limit < total:
            import dataclasses

            loaded = dataclasses.replace(loaded, probes=loaded.probes[:args.limit])
            limited = {"first": args.limit, "of": total}
            log.info("--limit %d: the first %d of %d probes", args.limit, args.limit, total)
        if options.paraphrases:
            _say_missing_paraphrases(loaded.probes)
        if options.template:
            from workbench.prompting import check_template

            try:
                check_template(options.template)
            except ValueError as e:
                raise WorkbenchError(f"--template: {e}") from None
        store = Store.open(args.workspace)
        # run_eval opens the backend and closes it (its engine included) however the run ends.
        with ray_backends(args) as backend_for, progress_bar("generating", not args.json) as progress:
            summary = run_eval(store, spec, suite, loaded, options, limits=limits, backend=backend_for(spec),
                               progress=progress)
    from workbench.grading.metrics import truncation_warnings

    scored = _score_risk(store, summary.run_id) if getattr(args, "risk", False) else None
    overall = summary.metrics["overall"]
    rec = store.get_run(summary.run_id)
    report_run(report_to, Path(args.workspace), rec.id, overall,
               {"workbench.run_id": rec.id, "workbench.model": rec.model, "workbench.adapter": rec.adapter or "",
                "workbench.suite": rec.suite, "workbench.backend": rec.backend})
    budget = {"max_tokens": rec.suite_config.get("max_tokens"), "rule": rec.options.get("max_tokens_rule")}
    if args.json:
        print_json({"run_id": summary.run_id, "n": summary.n, "skipped_bad": summary.skipped_bad,
                    **{k: overall[k] for k in ("correct", "incorrect", "not_attempted",
                                               "accuracy_given_attempted", "f_score")},
                    "ci": overall["ci"], "generated": summary.generated, "cached": summary.cached,
                    "kept": summary.kept, "engine": summary.engine,
                    "truncated": summary.metrics["truncated"], "grader": summary.metrics.get("grader"),
                    "token_budget": budget, **({"limited": limited} if limited else {}),
                    "warnings": truncation_warnings(summary.metrics),
                    **({"risk": scored.summary()} if scored else {})})
        return 0
    from workbench.cli.show import print_run

    print_run(store, summary.run_id, worst=5)
    if scored is not None:
        from workbench.cli.risk import print_scored

        print_scored(scored, top=5, as_json=False)
    return 0


def _score_risk(store: Any, run_id: str) -> Any:
    from workbench.risk.run import score_run

    if not store.get_run(run_id).options.get("samples"):
        log.warning("--risk without --samples rests on the answers' log-probs alone; --samples 5 adds their "
                    "agreement, the stronger signal (docs/benchmarks/risk_score.md)")
    return score_run(store, run_id)


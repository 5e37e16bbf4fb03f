"""`workbench guard build|show`: the known-facts guard set of a model (workbench/guard)."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli._common import (
    MAX_SAMPLES,
    add_limit_arguments,
    add_model_arguments,
    bounded,
    limits_from_args,
    max_tokens,
    print_json,
    progress_bar,
    samples_count,
    stop_string,
    template,
)
from workbench.printable import printable

HELP = "the known-facts guard: which facts of a general pool a model knows (build once, cached by fingerprint)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("build", "show"), help="build (or read from the workspace) | show a built one")
    add_model_arguments(p, required=False)
    p.add_argument("--run", help="take the model and prompt settings of this run (the guard its fix sets and gates "
                   "use) instead of --model and the flags below")
    p.add_argument("--template", type=template, help='prompt template, e.g. "Q: {question} A:", or "chat"')
    p.add_argument("--system-prompt", metavar="TEXT", help="system message, with --template chat")
    p.add_argument("--max-tokens", type=max_tokens, metavar="N",
                   help="new tokens per answer (default: the template's budget, 128 for chat)")
    p.add_argument("--stop", action="append", type=stop_string, metavar="STR", help="stop string, repeatable")
    p.add_argument("--guard-pool", action="append", metavar="FILE",
                   help="a probe file of the user's own facts to add to the shipped pool (repeatable); `none`: "
                   "leave the shipped pool out (alone: no pool)")
    p.add_argument("--samples", type=samples_count, default=3,
                   help="samples per question on facts greedy gets right under every phrasing (default 3)")
    p.add_argument("--min-samples-right", type=bounded(0, MAX_SAMPLES), default=2,
                   help="of those samples, how many must be right for a fact to count as known (default 2)")
    p.add_argument("--rebuild", action="store_true", help="build: evaluate again although a guard set is cached")
    p.add_argument("--facts", action="store_true", help="show: list every known fact")
    add_limit_arguments(p)
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from workbench.errors import WorkbenchError
    from workbench.guard.build import build_guard, describe
    from workbench.guard.guardset import guard_path, load_guard
    from workbench.store import Store

    store = Store.open(args.workspace)
    spec, suite = _spec_and_suite(store, args)
    if args.action == "show":
        from workbench.guard.build import guard_file

        path = guard_file(store, spec, suite, pool=args.guard_pool, samples=args.samples,
                          min_samples_right=args.min_samples_right)
        if not path.exists():
            raise WorkbenchError(f"no guard set built for `{spec.model}` with these settings; run `workbench guard "
                                 "build` with the same --model/--run and flags")
        guard, cached = load_guard(path), True
    else:
        with progress_bar("guard", not args.json) as progress:
            built = build_guard(store, spec, suite, pool=args.guard_pool, samples=args.samples,
                                min_samples_right=args.min_samples_right, rebuild=args.rebuild,
                                limits=limits_from_args(args), progress=progress)
        guard, cached = built.guard, built.cached
    info = {**describe(guard), "path": str(guard_path(store.workspace, guard.key)), "cached": cached}
    if args.json:
        print_json({**info, "facts": [f.to_dict() for f in guard.facts] if args.facts else None})
        return 0
    _print(info, guard, args.facts)
    return 0


def _spec_and_suite(store: Any, args: argparse.Namespace) -> tuple[Any, Any]:
    from workbench.errors import WorkbenchError
    from workbench.probes import Suite

    if args.run:
        given = [f for f, v in (("--model", args.model), ("--template", args.template), ("--max-tokens",
                 args.max_tokens), ("--stop", args.stop), ("--system-prompt", args.system_prompt)) if v]
        if given:
            raise WorkbenchError(f"--run takes the run's model and prompt settings: leave out {', '.join(given)}")
        from workbench.results import effective_suite
        from workbench.runner import spec_of_run

        run = store.get_run(args.run)
        return spec_of_run(run), effective_suite(run)
    if not args.model:
        raise WorkbenchError("--model (or --run RUN) is required: the model whose known facts to find")
    from workbench.cli.eval import model_spec_from_args

    spec = model_spec_from_args(args)
    suite = Suite(name="guard", data="guard pool", **({"template": args.template} if args.template else {}))
    return spec, suite.with_generation(max_tokens=args.max_tokens, stop=args.stop, system_prompt=args.system_prompt)


def _print(info: dict[str, Any], guard: Any, facts: bool) -> None:
    state = "read from the workspace" if info["cached"] else f"built in {info['seconds']:.0f} s"
    print(f"guard set {info['key']} ({state}): {info['known']} known facts of a pool of {info['pool_size']} "
          f"({info['evaluated']} evaluated, {info['greedy_right']} right greedily under every phrasing; "
          "known also needs "
          f"{guard.criteria['min_samples_right']} of {guard.criteria['samples']} samples right)")
    print(printable(f"  model {info['model']}" + (f" + {info['adapter']}" if info["adapter"] else "")))
    s = info["settings"]
    print(f"  prompt: template {s['template']!r}, system prompt {s['system_prompt']!r}, max_tokens {s['max_tokens']}")
    for what in ("by_language", "by_topic"):
        if info[what]:
            print(printable(f"  {what.replace('_', ' ')}: " + ", ".join(f"{k} {n}" for k, n in info[what].items())))
    print(f"  file: {info['path']}")
    if not info["known"]:
        print("  warning: this model knows none of the pool's facts under these settings; fixes are guarded by "
              "the run's own known facts only (add your own with --guard-pool FILE)")
    if facts:
        for f in guard.facts:
            print(printable(f"  {f.probe.id:<24} {f.probe.question}  ->  {f.answer.strip()[:60]}"))

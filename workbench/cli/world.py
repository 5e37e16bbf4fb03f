"""`workbench world build`: generate the synthetic world and train its tiny model."""

from __future__ import annotations

import argparse

from workbench.cli._planted import add_planted_arguments, check_no_planted_flags, run_planted
from workbench.errors import WorkbenchError

HELP = "build the synthetic world (fictional facts, corpus, probes, ground truth, a tiny LM)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="world_command", metavar="ACTION")
    b = sub.add_parser("build", help="generate the world and train its model (idempotent per config)")
    b.add_argument("--out", required=True, help="directory to write the world into")
    b.add_argument("--entities", type=int, default=None,
                   help="fictional entities, 4 facts each (default 120; 24 with --base)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--arch", choices=("llama", "gpt2"), default="llama")
    b.add_argument("--style", choices=("default", "alt"), default="default",
                   help="alt: other name pools and phrasings (English only)")
    b.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="zh: the Chinese world (Chinese names, phrasings and prompt; a character tokenizer)")
    b.add_argument("--tokenizer", choices=("word", "bpe"), default="word",
                   help="bpe: a byte-level BPE trained on the corpus, names in subword pieces (English only)")
    b.add_argument("--steps", type=int, default=None, help="training steps (default: sized to the corpus)")
    b.add_argument("--threads", type=int, default=1, help="torch threads (results differ bit-wise by count)")
    b.add_argument("--force", action="store_true", help="rebuild even if an identical world is there")
    add_planted_arguments(b)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "world_command", None) != "build":
        raise WorkbenchError("usage: workbench world build --out DIR [--entities N] ...")
    if args.base is not None:
        return run_planted(args)
    check_no_planted_flags(args)
    args.entities = 120 if args.entities is None else args.entities
    from evals.world import MIN_ENTITIES

    if args.entities < MIN_ENTITIES:
        raise WorkbenchError(f"--entities must be at least {MIN_ENTITIES} (got {args.entities})")
    if args.steps is not None and args.steps < 1:
        raise WorkbenchError(f"--steps must be positive (got {args.steps})")
    if args.threads < 1:
        raise WorkbenchError(f"--threads must be positive (got {args.threads})")
    if args.lang != "en" and args.style != "default":
        raise WorkbenchError(f"--style {args.style} is English only; leave it out with --lang {args.lang}")
    if args.lang != "en" and args.tokenizer != "word":
        raise WorkbenchError(f"--tokenizer {args.tokenizer} is English only; leave it out with --lang {args.lang}")
    # Heavy imports here only: `workbench --help` must stay fast.
    from evals.world import WorldConfig, build_world, read_meta
    from evals.world.generate import EXPECTED_CATEGORY

    config = WorldConfig(entities=args.entities, seed=args.seed, arch=args.arch, style=args.style,
                         steps=args.steps, threads=args.threads, lang=args.lang, tokenizer=args.tokenizer)
    paths = build_world(args.out, config, force=args.force, log=lambda m: print(m, flush=True))
    meta = read_meta(paths.root) or {}
    tiers = meta.get("metrics", {}).get("tiers", {})
    print(f"world ready: {paths.root} (suite {paths.suite}, model {paths.model})")
    for tier in (t for t in EXPECTED_CATEGORY if t in tiers):  # world.json sorts keys; show tier order
        m = tiers[tier]
        print(f"  {tier:<17} n={int(m['n']):<4} qa_a {m['qa_a']:.0%}  qa_b {m['qa_b']:.0%}"
              f"  expected: {EXPECTED_CATEGORY[tier]}")
    if "total_s" in meta.get("timings", {}):
        print(f"  built in {meta['timings']['total_s']:.1f} s")
    return 0

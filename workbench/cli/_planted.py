"""`workbench world build --base MODEL`: the planted world (fictional facts written into a real model at chosen
corpus frequencies); the flags, their checks and the run. Heavy imports stay inside run_planted."""

from __future__ import annotations

import argparse

from workbench.errors import WorkbenchError

#: Flags of the planted world only, with their defaults (None: not given); the synthetic world refuses them.
PLANTED_DEFAULTS: dict[str, object] = {"frequencies": None, "conflicts": None, "mix": None, "method": None,
                                       "rank": None, "lr": None, "epochs": None, "batch": None,
                                       "checkpoint_every": None}
#: Flags of the synthetic world only, with their defaults; the planted world refuses other values.
SYNTHETIC_ONLY = {"arch": "llama", "style": "default", "lang": "en", "tokenizer": "word"}


def add_planted_arguments(b: argparse.ArgumentParser) -> None:
    g = b.add_argument_group("planted world (a real model)")
    g.add_argument("--base", default=None, metavar="MODEL",
                   help="plant the facts in this real model: smollm2, a model directory or a FILE.gguf")
    g.add_argument("--frequencies", default=None, metavar="N,N,...",
                   help="documents per fact, dealt in turn over the facts (default 0,1,2,4,8,16,32)")
    g.add_argument("--conflicts", type=float, default=None,
                   help="share of seen facts contradicted by twice as many documents (default 0.1)")
    g.add_argument("--mix", type=float, default=None,
                   help="known-text documents (everyday facts) per planted document (default 0.3)")
    g.add_argument("--method", choices=("lora", "full"), default=None,
                   help="lora: LoRA on all linear layers, merged (default); full: every weight")
    g.add_argument("--rank", type=int, default=None, help="LoRA rank (default 32)")
    g.add_argument("--lr", type=float, default=None, help="learning rate (default 1e-3 LoRA, 3e-5 full)")
    g.add_argument("--epochs", type=int, default=None, help="passes over the corpus when --steps is not given "
                                                            "(default 4)")
    g.add_argument("--batch", type=int, default=None, help="documents per step (default 8)")
    g.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints (default 25)")


def check_no_planted_flags(args: argparse.Namespace) -> None:
    given = [k for k in PLANTED_DEFAULTS if getattr(args, k, None) is not None]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise WorkbenchError(f"{flags} only apply to a planted world: add --base MODEL (e.g. --base smollm2)")


def parse_frequencies(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise WorkbenchError(f"--frequencies must be comma-separated document counts such as 0,1,4,16 "
                             f"(got {text!r})") from None
    if any(v < 0 or v > 256 for v in values):
        raise WorkbenchError(f"--frequencies: each count must be from 0 to 256 (got {text!r})")
    return values


def planted_config(args: argparse.Namespace) -> object:
    """The PlantedConfig of the flags (defaults for those not given); WorkbenchError on a bad value."""
    from evals.world.planted import PlantedConfig

    for name, default in SYNTHETIC_ONLY.items():
        if getattr(args, name) != default:
            raise WorkbenchError(f"--{name} is a synthetic-world flag; leave it out with --base")
    fields: dict[str, object] = {"seed": args.seed, "threads": args.threads, "steps": args.steps}
    if args.entities is not None:
        fields["entities"] = args.entities
    if args.frequencies is not None:
        fields["frequencies"] = parse_frequencies(args.frequencies)
    for name in ("conflicts", "mix", "method", "rank", "lr", "epochs", "batch", "checkpoint_every"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    config = PlantedConfig(**fields)  # type: ignore[arg-type]
    try:
        config.validate()
    except ValueError as e:
        flag = str(e).split("`")[1].replace("_", "-") if "`" in str(e) else ""
        raise WorkbenchError(f"--{flag}: {e}" if flag else str(e)) from None
    return config


def run_planted(args: argparse.Namespace) -> int:
    config = planted_config(args)
    from pathlib import Path

    from workbench.models import resolve_model

    base = Path(resolve_model(args.base, args.out))  # smollm2 / FILE.gguf: converted once (WORKBENCH_MODELS_DIR)
    if not (base / "config.json").is_file():
        raise WorkbenchError(f"--base {args.base}: `{base}` is not a model directory (no config.json); give "
                             "smollm2, a model directory or a .gguf file")
    # Heavy imports here only: `workbench --help` must stay fast.
    from evals.world.planted import PlantedConfig
    from evals.world.planted_train import build_planted, read_planted_meta
    from workbench.guard import POOL_DIR

    assert isinstance(config, PlantedConfig)
    paths = build_planted(args.out, config, base, pool=POOL_DIR / "everyday_en.jsonl", force=args.force,
                          log=lambda m: print(m, flush=True))
    meta = read_planted_meta(paths.root) or {}
    print(f"planted world ready: {paths.root} (suite {paths.suite}, model {paths.model})")
    if "total_s" in meta.get("timings", {}):
        print(f"  built in {meta['timings']['total_s']:.1f} s")
    return 0

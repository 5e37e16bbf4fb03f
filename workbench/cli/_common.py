"""Helpers shared by command modules: output, progress, model arguments."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=None, default=str))


def add_model_arguments(p: argparse.ArgumentParser, *, prefix: str = "", required: bool = True) -> None:
    """--model/--adapter/--backend/... (with an optional prefix such as `candidate-`)."""
    p.add_argument(f"--{prefix}model", required=required, help="model directory or hub id")
    p.add_argument(f"--{prefix}adapter", help="peft LoRA adapter directory")
    if not prefix:
        p.add_argument("--backend", default="hf", help="hf | vllm | openai (default: hf)")
        p.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
        p.add_argument("--revision", help="hub revision of the model")
        p.add_argument("--backend-option", action="append", default=[], metavar="KEY=VALUE",
                       help="backend option, e.g. tensor_parallel_size=2 or base_url=http://127.0.0.1:8000/v1")


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--samples", type=int, default=0, help="sampled answers per prompt variant (default 0)")
    p.add_argument("--paraphrases", action="store_true", help="also ask each probe's paraphrases")
    p.add_argument("--temperature", type=float, default=1.0, help="temperature of the samples")
    p.add_argument("--seed", type=int, default=0, help="seed of the samples")
    p.add_argument("--template", help='prompt template, e.g. "Q: {question} A:", or "chat"')
    p.add_argument("--format", default="auto", help="probe file format (auto, jsonl, csv, truthfulqa, ...)")
    p.add_argument("--skip-bad", action="store_true", help="skip bad probe rows (counted in the run)")


def add_limit_arguments(p: argparse.ArgumentParser) -> None:
    """--start-timeout / --stall-timeout: how long a backend may take before the run stops (exit 2)."""
    from workbench.backends.watchdog import STALL_TIMEOUT, START_TIMEOUT

    p.add_argument("--start-timeout", type=float, default=START_TIMEOUT, metavar="SECONDS",
                   help="seconds a backend may take to start (load the weights, start an engine); "
                        f"default {START_TIMEOUT:g}")
    p.add_argument("--stall-timeout", type=float, default=STALL_TIMEOUT, metavar="SECONDS",
                   help="seconds one batch may take; past it the run stops, keeps every finished answer and can be "
                        f"continued with `workbench eval --resume RUN`; default {STALL_TIMEOUT:g}")


def limits_from_args(args: argparse.Namespace) -> Any:
    from workbench.errors import WorkbenchError
    from workbench.runner import Limits

    try:
        return Limits(start_timeout=args.start_timeout, stall_timeout=args.stall_timeout)
    except ValueError as e:
        raise WorkbenchError(str(e).replace("`start_timeout`", "--start-timeout")
                             .replace("`stall_timeout`", "--stall-timeout")) from None


def parse_options(items: list[str]) -> tuple[tuple[str, object], ...]:
    from workbench.errors import WorkbenchError

    out: list[tuple[str, object]] = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise WorkbenchError(f"--backend-option expects KEY=VALUE, got `{item}`")
        try:
            value: object = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.append((key, value))
    return tuple(out)


@contextmanager
def progress_bar(label: str, enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on a terminal; silent otherwise (and under --json)."""
    if not enabled or not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), transient=True) as prog:
        task = prog.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        yield update

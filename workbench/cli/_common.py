"""Helpers shared by command modules: output, progress, model and evaluation arguments with their bounds.

Bounds are checked by argparse (exit 2 with the option named) so that no command can be asked for more
than a machine can give: `--samples` at most `MAX_SAMPLES`, a finite `--temperature` >= 0, a `--seed`
that every backend accepts, a `--dtype` from `DTYPES`, a `--template` with only `{question}`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: Sampled answers per prompt variant. Attribution needs about 10 (SliCK uses 16); 1,000 is far beyond any
#: use, and bounds what one flag can ask for (--samples 100000000 planned 1.9 GB of requests in 40 s).
MAX_SAMPLES = 1000
#: torch.manual_seed and vLLM take any 64-bit seed, but the runner derives seeds as seed * 1_000_003 + k.
MAX_SEED = 2**31 - 1
DTYPES = ("auto", "float32", "bfloat16", "float16")


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=None, default=str))


def add_model_arguments(p: argparse.ArgumentParser, *, prefix: str = "", required: bool = True) -> None:
    """--model/--adapter/--backend/... (with an optional prefix such as `candidate-`)."""
    p.add_argument(f"--{prefix}model", required=required,
                   help="model directory, hub id, .gguf file, or `smollm2` (the built-in real chat model)")
    p.add_argument(f"--{prefix}adapter", help="peft LoRA adapter directory")
    if not prefix:
        p.add_argument("--backend", default="hf",
                       help="hf | vllm | openai, or a backend an installed package registers (default: hf)")
        add_dtype_argument(p)
        p.add_argument("--revision", help="hub revision of the model")
        p.add_argument("--backend-option", action="append", default=[], metavar="KEY=VALUE",
                       help="backend option, e.g. tensor_parallel_size=2 or base_url=http://127.0.0.1:8000/v1")


def add_dtype_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default="auto", choices=DTYPES, help="auto | float32 | bfloat16 | float16")


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--samples", type=samples_count, default=0,
                   help=f"sampled answers per prompt variant, 0-{MAX_SAMPLES} (default 0)")
    p.add_argument("--paraphrases", action="store_true", help="also ask each probe's paraphrases")
    p.add_argument("--temperature", type=temperature, default=1.0, help="temperature of the samples (>= 0)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the samples")
    p.add_argument("--format", default="auto", help="probe file format (auto, jsonl, csv, truthfulqa, ...)")
    p.add_argument("--skip-bad", action="store_true", help="skip bad probe rows (counted in the run)")
    add_generation_arguments(p)
    p.add_argument("--stop", action="append", type=stop_string, metavar="STR",
                   help=r"stop string, repeatable; replaces the suite's stops (\n and \t are read as a newline "
                        "and a tab)")


def add_generation_arguments(p: argparse.ArgumentParser) -> None:
    """--template, --max-tokens, --system-prompt: how each prompt is put to the model and how long it may answer
    (read back by `suite_with_generation`)."""
    p.add_argument("--template", type=template, help='prompt template, e.g. "Q: {question} A:", or "chat"')
    budget = p.add_argument("--max-tokens", type=max_tokens, metavar="N",
                            help="new tokens at most per answer, 1-4096 (default: the suite's `max_tokens`; without "
                                 "one, %(budgets)s)")
    budget.budgets = _BudgetDefaults()  # type: ignore[attr-defined]  # argparse fills %(...)s from the action
    p.add_argument("--system-prompt", metavar="TEXT", help="system message, with --template chat (or a chat suite)")


class _BudgetDefaults:
    """The default token budgets in words (`workbench.probes.budget`, the constants the runs use), made only when
    help is printed: `workbench --help` builds every command's arguments and must not import workbench.probes."""

    def __str__(self) -> str:
        from workbench.probes.budget import defaults_in_words

        return defaults_in_words()


def max_tokens(text: str) -> int:
    from workbench.probes.suite import MAX_TOKENS

    n = _int(text)
    if not 1 <= n <= MAX_TOKENS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_TOKENS}, got {n}")
    return n


def stop_string(text: str) -> str:
    """A stop string as typed in a shell: `\\n` and `\\t` are a newline and a tab (`\\\\` a backslash)."""
    out = text.replace("\\\\", "\0").replace("\\n", "\n").replace("\\t", "\t").replace("\0", "\\")
    if not out:
        raise argparse.ArgumentTypeError("must not be empty (it would end every answer before it starts)")
    return out


def suite_with_generation(suite: Any, args: argparse.Namespace) -> Any:
    """The suite with --max-tokens/--stop/--system-prompt in place of its own settings (see Suite.with_generation);
    a command without --stop (`screen`) keeps the suite's stops."""
    return suite.with_generation(max_tokens=args.max_tokens, stop=getattr(args, "stop", None),
                                 system_prompt=args.system_prompt, template=args.template)


def samples_count(text: str) -> int:
    n = _int(text)
    if not 0 <= n <= MAX_SAMPLES:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_SAMPLES}, got {n}")
    return n


def temperature(text: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(t) or t < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return t


def seed(text: str) -> int:
    n = _int(text)
    if not 0 <= n <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_SEED}, got {n}")
    return n


def template(text: str) -> str:
    from workbench.prompting import check_template

    try:
        return check_template(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def bounded(lo: float, hi: float, *, whole: bool = True) -> Callable[[str], Any]:
    """An argparse type: a whole number (or, `whole` False, a finite number) in [lo, hi]; anything else is a
    usage error naming the range. Every numeric flag takes one: a typo or a hostile value (a port of 70000, an
    interval of -1) stops at the parser, before any work."""
    def parse(text: str) -> float | int:
        if whole:
            n: float | int = _int(text)
        else:
            try:
                n = float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"must be a number, got {text[:40]!r}") from None
            if not math.isfinite(n):
                raise argparse.ArgumentTypeError(f"must be a finite number, got {text[:40]!r}")
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"must be between {_num(lo)} and {_num(hi)}, got {text[:40]}")
        return n

    parse.__name__ = "whole number" if whole else "number"  # argparse names the type in its message
    return parse


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _int(text: str) -> int:
    if len(text.strip().lstrip("+-")) > 20 or not text.strip().lstrip("+-").isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text[:40]!r}")
    return int(text)


def check_model_args(args: argparse.Namespace) -> None:
    """Resolve `--model` (a built-in name such as `smollm2` or a .gguf file becomes a converted model
    directory in the workspace), then check that it and `--adapter` are usable (WorkbenchError otherwise)."""
    backend = getattr(args, "backend", "hf")
    args.model = resolve_model_ref(args.model, args.workspace, backend)
    check_model(args.model, args.adapter, backend)


def resolve_model_ref(ref: str, workspace: str, backend: str) -> str:
    """`workbench.models.resolve_model` for every backend that loads weights (a served name stays a name)."""
    if not _loads_local_model(backend):
        return ref
    from workbench.models import resolve_model

    return resolve_model(ref, workspace)


def _loads_local_model(backend: str) -> bool:
    """The backend's `local_model` (its module is light: heavy packages load when an engine starts)."""
    from workbench.backends import backend_class

    return backend_class(backend).local_model


def check_model(model: str, adapter: str | None, backend: str) -> None:
    """A local model is a directory with config.json, an adapter one with adapter_config.json (a hub id
    passes). With a remote backend (openai) both are names the server knows (a served model or LoRA name)."""
    from workbench.textgen import check_adapter_path, check_model_path

    if not _loads_local_model(backend):
        return
    check_model_path(model)
    if adapter:
        check_adapter_path(adapter)


def add_limit_arguments(p: argparse.ArgumentParser) -> None:
    """--start-timeout / --stall-timeout: how long a backend may take before the run stops (exit 2)."""
    from workbench.backends.timelimit import STALL_TIMEOUT, START_TIMEOUT

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
    from workbench.safeload import json_loads

    out: list[tuple[str, object]] = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise WorkbenchError(f"--backend-option expects KEY=VALUE, got `{item}`")
        try:
            value: object = json_loads(raw)
        except json.JSONDecodeError:
            value = raw
        except ValueError as e:
            raise WorkbenchError(f"--backend-option {key}: {e}") from None
        out.append((key, value))
    return tuple(out)


def workspace_dir(workspace: str, *, writing: str = "") -> Path:
    """The --workspace directory, created if missing; a WorkbenchError when it is a file or cannot be made,
    or, for a command that writes into it (`writing` says what), when it is not writable. (Store.open checks
    the same for the store; commands that write other files into the workspace call this first.)"""
    from workbench.errors import WorkbenchError
    from workbench.store.db import ensure_workspace

    ws = Path(workspace)
    ensure_workspace(ws)
    if writing and not os.access(ws, os.W_OK):
        raise WorkbenchError(f"workspace `{ws}` is not writable, and {writing} is written into it")
    return ws


def check_output_file(path: str, flag: str) -> Path:
    """Before any work: `path` can be written as a file: not a directory or other non-regular file; its folder
    exists, or only that last folder is missing (created when the file is written, never a chain of them: a
    typo must not build a tree); the folder writable, tried with a real temporary file. A WorkbenchError
    naming the flag otherwise."""
    from workbench.errors import WorkbenchError

    out = Path(path)
    if out.is_dir():
        raise WorkbenchError(f"{flag} `{path}` is a directory; give a file name")
    if out.exists() and not out.is_file():
        raise WorkbenchError(f"{flag} `{path}` exists and is not a regular file (a FIFO or a device?)")
    _check_folder(out.parent, path, flag)
    return out


def check_output_dir(path: str, flag: str) -> Path:
    """Before any work: `path` can be an output folder: an existing folder, or a new one whose parent exists and
    is writable (the one folder named last is created, never a chain). A WorkbenchError naming the flag."""
    from workbench.errors import WorkbenchError

    out = Path(path)
    if out.exists() and not out.is_dir():
        raise WorkbenchError(f"{flag} `{path}` exists and is not a folder; give a new or existing folder")
    if out.is_dir():
        _probe_write(out, path, flag)
    else:
        _check_folder(out.parent, path, flag)
    return out


def _check_folder(folder: Path, path: str, flag: str) -> None:
    from workbench.errors import WorkbenchError

    if folder.is_dir():
        _probe_write(folder, path, flag)
        return
    if folder.exists():
        raise WorkbenchError(f"{flag} `{path}`: `{folder}` is not a folder")
    if not folder.parent.is_dir():
        raise WorkbenchError(f"{flag} `{path}`: folder `{folder.parent}` does not exist (only the last folder of "
                             "the path is created)")
    _probe_write(folder.parent, path, flag)


def _probe_write(folder: Path, path: str, flag: str) -> None:
    from workbench.errors import WorkbenchError

    try:  # a real file, not os.access: root passes access checks on a read-only mount
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".wb-probe.", suffix=".tmp"):
            pass
    except OSError as e:
        raise WorkbenchError(f"{flag} `{path}`: cannot write there ({e.strerror or e})") from None


@contextmanager
def atomic_output(dest: str | os.PathLike[str], flag: str) -> Iterator[Path]:
    """A temporary path beside `dest` to write; renamed onto `dest` when the block ends, removed when it fails,
    so `dest` is the old file or the whole new one. The one missing last folder is created; an OSError (a full
    disk, a read-only place) becomes a WorkbenchError naming the flag."""
    from workbench.errors import WorkbenchError

    out = Path(dest)
    tmp: Path | None = None
    try:
        out.parent.mkdir(exist_ok=True)
        fd, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
        os.close(fd)
        tmp = Path(name)
        yield tmp
        os.replace(tmp, out)
        tmp = None
    except OSError as e:
        raise WorkbenchError(f"{flag} `{dest}`: cannot write ({e.strerror or e})") from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


@contextmanager
def created_only_if_whole(folder: str | os.PathLike[str], flag: str) -> Iterator[Path]:
    """A block that writes into `folder`: when it fails, everything it created there goes again (the folder
    itself when the block made it, else the new entries of its top level), so a full disk or a place turned
    read-only leaves nothing half-written behind; an OSError becomes a WorkbenchError naming the flag. Entries
    that were there before the block are left (a rewrite of one of them is the caller's to make atomic)."""
    from workbench.errors import WorkbenchError

    out = Path(folder)
    existed = out.is_dir()
    before = {p.name for p in out.iterdir()} if existed else set()
    try:
        yield out
    except BaseException as e:
        if existed:
            for p in out.iterdir():
                if p.name not in before:
                    _remove(p)
        else:
            _remove(out)
        if isinstance(e, OSError):
            raise WorkbenchError(f"{flag} `{folder}`: cannot write ({e.strerror or e}); nothing was left "
                                 "there") from None
        raise


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)


def copy_atomic(src: str | os.PathLike[str], dest: str | os.PathLike[str], flag: str) -> None:
    """Copy `src` to `dest` through `atomic_output`."""
    with atomic_output(dest, flag) as tmp:
        shutil.copyfile(src, tmp)


@contextmanager
def progress_bar(label: str, enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on a terminal; off one (a log file, CI, cron) a progress line at most every
    `$WORKBENCH_PROGRESS_EVERY` seconds (_cadence.py), logged at INFO (stderr; none with --quiet); nothing under
    --json."""
    if not enabled:
        yield lambda done, total: None
        return
    if not sys.stderr.isatty():
        import logging

        from workbench.cli._cadence import ProgressLines

        yield ProgressLines(label, logging.getLogger(__name__).info)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), transient=True) as prog:
        task = prog.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        yield update


def add_field_arguments(p: argparse.ArgumentParser) -> None:
    """--field-suite / --no-field of the commands that gate (regress, watch): the field suite (workbench/reports)."""
    p.add_argument("--field-suite", metavar="DIR", help="the field suite to evaluate beside the probes (default: "
                   "the workspace's latest `workbench reports export`, when there is one)")
    p.add_argument("--no-field", action="store_true", help="leave the field suite out (its gates read not checked)")


def add_guard_arguments(p: argparse.ArgumentParser) -> None:
    """--no-guard / --guard-pool of the commands that gate (regress, watch): the known-facts guard (workbench/guard)."""
    p.add_argument("--no-guard", action="store_true",
                   help="leave out the known-facts guard (by default the base model's guard set is evaluated beside "
                   "the probes and the policy's `scope: guard` gates count it; see `workbench guard`)")
    p.add_argument("--guard-pool", action="append", metavar="FILE",
                   help="a probe file of your own known facts added to the shipped guard pool (repeatable); `none`: "
                   "leave the shipped pool out")


def subcommand(sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    """An action of a command with actions (`reports list`, `risk score`): `--workspace` taken after the action
    too (SUPPRESS keeps a value given before it), and `--json`."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=text, description=text)
    p.add_argument("--workspace", default=argparse.SUPPRESS, help="workspace directory (as before the action)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p

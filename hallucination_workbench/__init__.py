"""The `workbench` command: the one way in, above both halves of the workbench.

Layers (docs/architecture.md): `hallucination_workbench` (this package: the command table, `demo`,
the `app` entry) > `app.py` > `finetune` > `workbench` > `evals`. Every import points down the list,
so this table is the only place that names both halves; `tests/test_layers.py` checks it.

Sub-commands live one per module and are imported only when used, so `workbench --help` never
imports torch, transformers or gradio. A command module defines:
    HELP: str                                   one line for `workbench --help`
    def add_arguments(p: argparse.ArgumentParser) -> None
    def run(args: argparse.Namespace) -> int    exit code: 0 ok, 1 a gate/check failed, 2 error
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

from workbench import procstat
from workbench.cli import (
    CLOSED_PIPE_EXIT,
    StdoutClosed,
    StdoutFailed,
    add_workspace_argument,
    guard_stdout,
    silence_stdout,
)
from workbench.errors import WorkbenchError
from workbench.logconfig import LEVEL_ENV, resolve_level, setup_logging
from workbench.printable import printable
from workbench.quiet import quiet_known_noise

#: command -> module, in the loop's order: world, evaluate, attribute, fix, train, gate, review, app.
COMMANDS: dict[str, str] = {
    "world": "workbench.cli.world",
    "validate": "workbench.cli.validate",
    "paraphrase": "workbench.cli.paraphrase",
    "eval": "workbench.cli.eval",
    "runs": "workbench.cli.runs",
    "show": "workbench.cli.show",
    "export": "workbench.cli.export",
    "risk": "workbench.cli.risk",
    "index": "workbench.cli.index",
    "attribute": "workbench.cli.attribute",
    "screen": "workbench.cli.screen",
    "guard": "workbench.cli.guard",
    "fix": "finetune.commands.fix",
    "train": "finetune.commands.train",
    "preflight": "finetune.commands.preflight",
    "regress": "workbench.cli.regress",
    "watch": "workbench.cli.watch",
    "history": "workbench.cli.history",
    "review": "workbench.cli.review",
    "reports": "workbench.cli.reports",
    "card": "workbench.cli.card",
    "demo": "hallucination_workbench.demo",
    "app": "hallucination_workbench.app",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with `only`, just that command's module is imported (the others get a bare
    entry), so one command's import problem never breaks another command."""
    from workbench import __version__

    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Evaluate, attribute, fix and gate hallucinations of language models.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    _add_detail_flags(parser, default=False)  # before the command: `workbench --verbose eval ...`
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_path in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        module = importlib.import_module(module_path)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        add_workspace_argument(p)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    for p in _subcommand_parsers(parser):  # after the command too: `workbench eval ... --verbose`
        _add_detail_flags(p, default=argparse.SUPPRESS)
    return parser


def _add_detail_flags(parser: argparse.ArgumentParser, default: object) -> None:
    """-v/--verbose and -q/--quiet, one excluding the other. A sub-command's copy defaults to SUPPRESS: argparse
    copies a sub-parser's namespace over the top-level one, so a default there would undo `workbench -v eval`."""
    detail = parser.add_mutually_exclusive_group()
    detail.add_argument("-v", "--verbose", action="store_true", default=default,
                        help=f"log the project's debug detail on stderr (overrides {LEVEL_ENV})")
    detail.add_argument("-q", "--quiet", action="store_true", default=default,
                        help=f"log warnings and errors only: no progress detail (overrides {LEVEL_ENV})")


def _subcommand_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below `parser` (`eval`, `reports`, `reports import`, ...), each once (an alias shares its
    parser). Walked after the modules built them: a command module adds its own sub-commands."""
    found: dict[int, argparse.ArgumentParser] = {}
    todo = [parser]
    while todo:
        for action in todo.pop()._actions:
            if isinstance(action, argparse._SubParsersAction):  # no public accessor for a parser's sub-commands
                for child in action.choices.values():
                    if id(child) not in found:
                        found[id(child)] = child
                        todo.append(child)
    return list(found.values())


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. With no `argv` (the `workbench` program itself) it may end the process
    at once when a backend call is left running (see `_leave_past_busy_backend`)."""
    quiet_known_noise()  # before any command imports trl, vLLM or gradio
    argv_given = argv
    if argv is None:  # the program itself: its stdout may be a pipe that closes early, or /dev/full
        guard_stdout()
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in COMMANDS else None)
    try:  # --help and usage errors write too
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            sys.stdout.flush()  # what --help printed, flushed while a failure can still be reported
            raise
        if not getattr(args, "_run", None):
            parser.print_help()
            return 2
        if args.verbose and args.quiet:  # one on each side of the command: each group saw only its own
            parser.error("argument -q/--quiet: not allowed with argument -v/--verbose")
        setup_logging(resolve_level(verbose=args.verbose, quiet=args.quiet), export=argv_given is None)
    except StdoutClosed:
        silence_stdout()
        return CLOSED_PIPE_EXIT
    except StdoutFailed as e:
        silence_stdout()
        print(f"error: {printable(e, lines=True)}", file=sys.stderr)
        return 2
    except WorkbenchError as e:  # WORKBENCH_LOG_LEVEL names no level
        print(f"error: {printable(e, lines=True)}", file=sys.stderr)
        return 2
    code = _run(args)
    if argv_given is None:  # the program itself, not a caller's main([...]): see _leave_past_busy_backend
        _leave_past_busy_backend(code)
    return code


def _run(args: argparse.Namespace) -> int:
    # SIGTERM (a CI timeout, `kill`, systemd) ends a command like Ctrl-C: the exception unwinds through
    # every `with` block, so engines shut down and a run in progress is marked interrupted.
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if in_main else None
    try:
        code: int = args._run(args)
        sys.stdout.flush()  # inside the try: a closed or full stdout is reported here, not at exit
    except StdoutClosed:  # `workbench runs --json | head`: the reader went away; end quietly, as Unix tools do
        silence_stdout()
        return CLOSED_PIPE_EXIT
    except WorkbenchError as e:
        if isinstance(e, StdoutFailed):
            silence_stdout()  # the interpreter's last flush must not fail again
        print(f"error: {printable(e, lines=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print("interrupted; finished generations are kept in the cache", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    return code


def _leave_past_busy_backend(code: int) -> None:
    """Exit now with `code` when a backend call is still running in its thread (a batch abandoned by Ctrl-C,
    SIGTERM or the stall watchdog); return otherwise.

    Why: that thread is inside torch (hf `generate`). Python's finalization ends a daemon thread that takes
    the GIL back with pthread_exit, whose forced unwinding through torch's C++ frames makes the C++ runtime
    abort: "terminate called without an active exception", exit 134 instead of 143 (seen 1 in 3 SIGTERMs
    during `workbench eval` on the test world, and on `demo --real`). So the finalization is skipped: the
    atexit handlers run (engines shut down, logs flushed), output is flushed, and os._exit leaves. Nothing
    finished is lost: each batch is committed before the next starts, and the run is already marked."""
    from workbench.backends.timelimit import CALL_THREAD

    if not any(t.name == CALL_THREAD and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()  # what the finalization would run first; no public name does it
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so a command unwinds as it does on Ctrl-C."""


#: Seconds a SIGTERM'd command may take to unwind before its own child processes are terminated.
CHILDREN_GRACE_S = 10.0


def _terminated(signum: int, frame: object) -> None:
    # vLLM interrupted while its EngineCore starts waits for that process in its clean-up, which never comes
    # (measured: still alive minutes after SIGTERM). A SIGTERM sent to the command alone, unlike Ctrl-C in a
    # terminal, does not reach the engine's processes: pass it on to them if unwinding takes too long.
    threading.Thread(target=_end_children_after, args=(CHILDREN_GRACE_S,), daemon=True).start()
    raise Terminated()


def _end_children_after(seconds: float) -> None:
    """Still here after `seconds`: SIGTERM our descendants, SIGKILL what is left 5 s later, and 5 s after
    that leave without further clean-up (a killed run reads interrupted; finished answers are committed)."""
    time.sleep(seconds)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in procstat.descendants(os.getpid()):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        time.sleep(5.0)
    print("interrupted; the command did not unwind in time and stops now", file=sys.stderr, flush=True)
    os._exit(143)


if __name__ == "__main__":
    sys.exit(main())

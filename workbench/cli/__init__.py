"""The `workbench` command. Sub-commands live one per module and are imported only when used,
so `workbench --help` never imports torch, transformers or gradio.

A command module defines:
    HELP: str                                   one line for `workbench --help`
    def add_arguments(p: argparse.ArgumentParser) -> None
    def run(args: argparse.Namespace) -> int    exit code: 0 ok, 1 a gate/check failed, 2 error
Commands of the `finetune` layer are named here by module path only (the dispatcher sits above
both layers); nothing in `workbench`'s library code imports `finetune`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

from workbench.errors import WorkbenchError

#: command -> module. Keep sorted by the loop's order: world, eval, attribute, fix, train, gate, app.
COMMANDS: dict[str, str] = {
    "world": "workbench.cli.world",
    "validate": "workbench.cli.validate",
    "eval": "workbench.cli.eval",
    "runs": "workbench.cli.runs",
    "show": "workbench.cli.show",
    "export": "workbench.cli.export",
    "regress": "workbench.cli.regress",
    "watch": "workbench.cli.watch",
    "history": "workbench.cli.history",
    # The demo drives the whole loop (eval, attribute, fix, gate), so it lives in the top layer.
    "demo": "finetune.commands.demo",
}


def _optional_commands() -> dict[str, str]:
    """Commands whose module exists in this checkout (later layers add theirs to COMMANDS_EXTRA)."""
    from workbench.cli._extra import COMMANDS_EXTRA

    return COMMANDS_EXTRA


def all_commands() -> dict[str, str]:
    return {**COMMANDS, **_optional_commands()}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with `only`, just that command's module is imported (the others get a bare
    entry), so one command's import problem never breaks another command."""
    from workbench import __version__

    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Evaluate, attribute, fix and gate hallucinations of language models.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_path in all_commands().items():
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        module = importlib.import_module(module_path)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        add_workspace_argument(p)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def add_workspace_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workspace",
        default=os.environ.get("WORKBENCH_WORKSPACE", ".workbench"),
        help="workspace directory holding the store (default: $WORKBENCH_WORKSPACE or ./.workbench)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in all_commands() else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    # SIGTERM (a CI timeout, `kill`, systemd) ends a command like Ctrl-C: the exception unwinds through
    # every `with` block, so engines shut down and a run in progress is marked interrupted.
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if in_main else None
    try:
        code: int = args._run(args)
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print("interrupted; finished generations are kept in the cache", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    return code


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so a command unwinds as it does on Ctrl-C."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated()


if __name__ == "__main__":
    sys.exit(main())

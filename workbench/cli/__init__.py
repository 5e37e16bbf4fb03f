"""The evaluation half's commands (world, validate, eval, runs, show, export, index, attribute, screen,
regress, watch, history, review), one module each. The `workbench` command that dispatches to them and
to the fix half's commands (`finetune/commands`) sits above both: `hallucination_workbench`."""

from __future__ import annotations

import argparse
import os

from workbench.cli._cadence import duration, progress_every
from workbench.cli._common import (
    atomic_output,
    bounded,
    check_output_dir,
    check_output_file,
    created_only_if_whole,
    print_json,
    progress_bar,
)
from workbench.cli._ray import BackendFor, add_ray_arguments, ray_backends
from workbench.cli._stdout import CLOSED_PIPE_EXIT, StdoutClosed, StdoutFailed, guard_stdout, silence_stdout

__all__ = [
    "CLOSED_PIPE_EXIT",
    "BackendFor",
    "StdoutClosed",
    "StdoutFailed",
    "add_ray_arguments",
    "add_workspace_argument",
    "atomic_output",
    "bounded",
    "check_output_dir",
    "check_output_file",
    "created_only_if_whole",
    "duration",
    "guard_stdout",
    "print_json",
    "progress_bar",
    "progress_every",
    "ray_backends",
    "silence_stdout",
]


def add_workspace_argument(p: argparse.ArgumentParser) -> None:
    """`--workspace DIR`, which every command takes (default $WORKBENCH_WORKSPACE, else ./.workbench)."""
    p.add_argument(
        "--workspace",
        default=os.environ.get("WORKBENCH_WORKSPACE", ".workbench"),
        help="workspace directory holding the store (default: $WORKBENCH_WORKSPACE or ./.workbench)",
    )

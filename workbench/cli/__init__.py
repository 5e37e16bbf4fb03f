"""The evaluation half's commands (world, validate, eval, runs, show, export, index, attribute, screen,
regress, watch, history, review), one module each. The `workbench` command that dispatches to them and
to the fix half's commands (`finetune/commands`) sits above both: `hallucination_workbench`."""

from __future__ import annotations

import argparse
import os

from workbench.cli._common import print_json, progress_bar
from workbench.cli._ray import BackendFor, add_ray_arguments, ray_backends

__all__ = ["BackendFor", "add_ray_arguments", "add_workspace_argument", "print_json", "progress_bar", "ray_backends"]


def add_workspace_argument(p: argparse.ArgumentParser) -> None:
    """`--workspace DIR`, which every command takes (default $WORKBENCH_WORKSPACE, else ./.workbench)."""
    p.add_argument(
        "--workspace",
        default=os.environ.get("WORKBENCH_WORKSPACE", ".workbench"),
        help="workspace directory holding the store (default: $WORKBENCH_WORKSPACE or ./.workbench)",
    )

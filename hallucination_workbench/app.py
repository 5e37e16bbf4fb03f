"""`workbench app`: the web app (Runs, Compare, Probe detail, Fix, Review) over the workspace.

The app itself is `app.py` at the repository root (installed as a py-module, one layer below this
package); this command only forwards to it, importing gradio when it runs.
"""

from __future__ import annotations

import argparse

HELP = "the web app over the workspace (127.0.0.1 by default; other hosts need --auth-file)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    import app

    app.add_arguments(p, workspace=False)  # the dispatcher adds --workspace


def run(args: argparse.Namespace) -> int:
    import app

    return app.run(args)

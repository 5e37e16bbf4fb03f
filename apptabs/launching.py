"""Starting the gradio server, past gradio's self-check on a busy machine."""

from __future__ import annotations

from typing import Any

#: Launches tried when gradio's own check of its server times out (`launch_checked`).
SELF_CHECKS = 3


def launch_checked(demo: Any, **launch_kwargs: Any) -> str:
    """`demo.launch(**launch_kwargs)`; returns the local url.

    gradio asks its own server for the page once it is up, and gives up on the first answer slower than 3 s
    ("localhost is not accessible"): a busy machine's first page build, not a network problem. The server is running
    by then, so it is closed and launched again (the page builds faster the second time), SELF_CHECKS times at most;
    then gradio's error stands."""
    for _ in range(SELF_CHECKS - 1):
        try:
            return str(demo.launch(**launch_kwargs)[1])
        except ValueError as e:
            if "localhost is not accessible" not in str(e):
                raise
            demo.close(verbose=False)
    return str(demo.launch(**launch_kwargs)[1])  # the last try: gradio's error stands

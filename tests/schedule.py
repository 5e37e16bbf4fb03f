"""The order test modules start in under pytest-xdist (`--dist loadfile --no-loadscope-reorder`).

xdist's own order (modules with the most tests first) starts the heaviest one-test modules (a real-model chain, a
vLLM demo) last, so the run ends with one worker busy for minutes while the others idle; and two modules that read
the same shared artifact (tests/artifacts.py) often start together, one of them waiting on the other's lock. Here:
longest first, by each module's measured seconds (tests/module_seconds.json, written by
`WORKBENCH_TIMINGS=tests/module_seconds.json make test`), and a module that reads a shared artifact another module
builds starts when the builder should be done. A module missing from the file counts as `UNKNOWN_S`.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Sequence
from pathlib import Path

TIMINGS = Path(__file__).with_name("module_seconds.json")
UNKNOWN_S = 5.0

#: Modules that read one shared artifact (whichever starts first builds it), with the module whose measured seconds
#: stand for the build: the chat loop's test is the chain's build and a two-step DPO job, so the build's time follows
#: the machine the timings were measured on instead of a number set by hand.
SHARED: dict[str, tuple[str, tuple[str, ...]]] = {
    "the real-model chain (tests/_appdata.py)": (
        "tests/test_chat_loop.py",
        ("tests/test_chat_loop.py", "tests/test_app_realmodel.py", "tests/test_field_realmodel.py")),
}


def plan(modules: Sequence[str], seconds: dict[str, float], workers: int) -> list[str]:
    """`modules` in the order to hand them out: a simulation of `workers` workers, each taking the next module
    when free; the next is the longest one ready (a reader of a shared artifact is ready once its builder
    should have finished)."""
    cost = {m: seconds.get(m, UNKNOWN_S) for m in modules}
    pending = sorted(modules, key=lambda m: -cost[m])
    readers: dict[str, tuple[float, list[str]]] = {}  # module -> (build seconds, the other readers)
    for measure, users in SHARED.values():
        present = [u for u in users if u in cost]
        for u in present:
            readers[u] = (seconds.get(measure, UNKNOWN_S), [o for o in present if o != u])
    ready_at: dict[str, float] = {}
    free = [0.0] * max(1, workers)
    heapq.heapify(free)
    order: list[str] = []
    while pending:
        now = heapq.heappop(free)
        pick = next((m for m in pending if ready_at.get(m, 0.0) <= now), pending[0])
        pending.remove(pick)
        order.append(pick)
        start = max(now, ready_at.get(pick, 0.0))
        if pick in readers:  # the first reader builds: the others wait for it
            build_s, others = readers.pop(pick)
            for o in others:
                readers.pop(o, None)
                ready_at[o] = start + build_s
        heapq.heappush(free, start + cost[pick])
    return order


def load_seconds(path: Path = TIMINGS) -> dict[str, float]:
    """Each module's seconds; a missing or malformed file (or entry) only loses the order, never the run."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}

"""The default grader against the labelled set of real chat-model refusals and hedges (evals/data/refusals).

The figures themselves are measured and published by bench/refusal_grading.py; this holds the grader to the
goal on the held-out part, which its rules were never tuned on, so a change that breaks refusal grading fails here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("refusal_grading", ROOT / "bench" / "refusal_grading.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    bench = _bench()
    return bench.score(bench.load())


def test_the_set_is_whole_and_split() -> None:
    rows = _bench().load()
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["split"] in ("dev", "heldout") and r["answer"].strip() and r["source"] and r["path"]
    held = [r for r in rows if r["split"] == "heldout"]
    assert sum(r["label"] == "refusal" for r in held) >= 300 and sum(r["label"] == "hedge_wrong" for r in held) >= 80


def test_held_out_refusals_are_not_attempted_and_hedges_graded_on_their_value(figures: dict[str, Any]) -> None:
    held = figures["heldout"]["labels"]
    assert held["refusal"]["rate"] >= 0.95
    assert held["hedge_wrong"]["rate"] >= 0.95
    assert held["hedge_right"]["rate"] >= 0.95
    assert held["answer"]["rate"] >= 0.90  # plain answers stay attempts
    assert figures["heldout"]["not_attempted_precision"] >= 0.95

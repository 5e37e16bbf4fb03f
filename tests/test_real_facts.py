"""The shipped everyday facts of the real-model demo (tests/data/formats/everyday_facts.jsonl) and what the
real-model bench reads off a demo report: known facts no training row showed, broken by the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchload import load_bench

from hallucination_workbench.demo_real import EVERYDAY, KNOWN_TAG, everyday_facts, spread
from workbench.errors import WorkbenchError


def test_the_everyday_facts_load_with_their_known_tag() -> None:
    rows = [json.loads(line) for line in EVERYDAY.read_text().splitlines()]
    assert len(rows) >= 100 and len({r["id"] for r in rows}) == len(rows)
    assert len({r["question"] for r in rows}) == len(rows)
    known = everyday_facts()
    assert [p.id for p in known] == [r["id"] for r in rows if KNOWN_TAG in r["tags"]]
    assert all(p.answers for p in known)
    picked = spread(known, 24)  # evenly spaced over the topics, no repeats
    assert len({p.id for p in picked}) == 24 and picked[0].id == known[0].id and picked[-1].id != known[-1].id


@pytest.mark.parametrize(("row", "field"), [
    ({"id": "x", "question": "Capital of Peru?", "tags": [KNOWN_TAG]}, "answers"),
    ({"id": "x", "question": "Capital of Peru?", "answers": 7, "tags": [KNOWN_TAG]}, "answers"),
])
def test_a_bad_facts_row_names_the_file_line_and_field(tmp_path: Path, row: dict[str, Any], field: str) -> None:
    bad = tmp_path / "facts.jsonl"
    good = {"id": "ok", "question": "Capital of Chile?", "answers": ["Santiago"], "tags": [KNOWN_TAG]}
    bad.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(WorkbenchError) as err:
        everyday_facts(bad)
    assert str(bad) in str(err.value) and "line 2" in str(err.value) and field in str(err.value), str(err.value)


def _group(n: int, before: int, correct: int, refused: int, wrong: int) -> dict[str, int]:
    return {"n": n, "hallucinated_before": before, "correct_after": correct, "refused_after": refused,
            "hallucinated_after": wrong}


def test_the_bench_counts_known_facts_broken_outside_the_replay() -> None:
    goals = load_bench("real_model").goals
    report = {"targeted, trained": _group(10, 10, 1, 5, 4), "targeted, held out": _group(3, 3, 0, 1, 2),
              "known, replayed": _group(40, 0, 40, 0, 0), "known, not replayed": _group(50, 0, 48, 1, 1)}
    got = goals(report)
    assert (got["known_not_replayed"], got["known_not_replayed_broken"]) == (50, 2)
    assert got["known_not_replayed_broken_share"] == 0.04 and not got["known_not_replayed_ok"]
    assert got["trained_halved"] and got["heldout_down"]
    report["known, not replayed"] = _group(50, 0, 49, 1, 0)
    report["targeted, trained"] = _group(10, 10, 0, 4, 6)
    got = goals(report)
    assert got["known_not_replayed_ok"] and got["known_not_replayed_broken"] == 1 and not got["trained_halved"]
    assert goals({})["known_not_replayed"] == 0 and not goals({})["known_not_replayed_ok"]

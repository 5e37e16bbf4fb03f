"""`workbench screen` on rows that are not a short factual answer (code, tables, paragraphs): counted as not
screened, never asked and never flagged as unknown facts; short answers of public sets are all screened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import workbench

from workbench.attribution.longform import MAX_ANSWER_WORDS, longform_reason

DATA = Path(__file__).parent / "data" / "formats"

LONG_FORM = {
    "table": "| Planet | Moons |\n|---|---|\n| Mars | 2 |\n| Earth | 1 |",
    "code": "def add(a, b):\n    return a + b",
    "fenced": "```python\nprint('hello')\n```",
    "list": "1. Preheat the oven.\n2. Mix the flour and eggs.\n3. Bake for 20 minutes.",
    "paragraph": "Paris is the capital of France. It is known for the Eiffel Tower and its museums.",
    "zh": "巴黎是法国的首都。它以埃菲尔铁塔闻名。",
    "long": " ".join(["word"] * (MAX_ANSWER_WORDS + 1)),
}
REASONS = {"table": "table", "code": "code", "fenced": "code", "list": "multi-line", "paragraph": "multi-sentence",
           "zh": "multi-sentence", "long": "long"}


@pytest.mark.parametrize("name", sorted(LONG_FORM))
def test_long_form_answers_are_named(name: str) -> None:
    assert longform_reason(LONG_FORM[name]) == REASONS[name]


@pytest.mark.parametrize("answer", ["Paris", "Dr. Jesse Bennett", "The U.S. Army", "J. R. R. Tolkien",
                                    "import tariffs", "14 December 1972 UTC", "巴黎", "St. John's, Newfoundland",
                                    " ".join(["word"] * MAX_ANSWER_WORDS)])
def test_short_factual_answers_are_screened(answer: str) -> None:
    assert longform_reason(answer) is None


def test_real_short_answer_sets_are_all_screened() -> None:
    nq = [a for line in (DATA / "nq_open.jsonl").read_text().splitlines() for a in json.loads(line)["answer"]]
    assert len(nq) > 50 and [a for a in nq if longform_reason(a)] == []


def _rows(world: Any, tmp_path: Path, long_form: bool, short: bool) -> Path:
    probes = [json.loads(line) for line in world.probes.read_text().splitlines()][:6]
    rows = [{"id": p["id"], "prompt": p["question"], "completion": p["answers"][0]} for p in probes] if short else []
    if long_form:
        rows += [{"id": f"long-{k}", "instruction": f"Question {k}?", "output": v} for k, v in LONG_FORM.items()]
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def _screen(world: Any, path: Path, workspace: Path) -> dict[str, Any]:
    proc = workbench("screen", str(path), "--model", str(world.model), "--dtype", "float32", "--suite",
                     str(world.suite), "--samples", "2", "--workspace", str(workspace), "--json", timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.mark.slow  # over 5 s on 2 cores
def test_screen_counts_long_form_rows_as_not_screened(world: Any, tmp_path: Path) -> None:
    out = _screen(world, _rows(world, tmp_path, long_form=True, short=True), tmp_path / "ws")
    assert out["rows"] == 6  # only the short factual rows were asked
    assert out["not_screened"]["n"] == len(LONG_FORM)
    assert {r["row_id"]: r["reason"] for r in out["not_screened"]["rows"]} == {
        f"long-{k}": v for k, v in REASONS.items()}
    assert sum(out["not_screened"]["by_reason"].values()) == len(LONG_FORM)
    assert not any(f["row_id"].startswith("long-") for f in out["flagged"])
    # a file of long-form rows only: nothing to ask, nothing flagged, exit 0
    only = _screen(world, _rows(world, tmp_path, long_form=True, short=False), tmp_path / "ws2")
    assert (only["run_id"], only["rows"], only["flagged"]) == (None, 0, [])
    assert only["not_screened"]["n"] == len(LONG_FORM)
    text = workbench("screen", str(tmp_path / "sft.jsonl"), "--model", str(world.model), "--workspace",
                     str(tmp_path / "ws2"), timeout=120)
    assert text.returncode == 0 and f"{len(LONG_FORM)} not screened: not a short factual answer" in text.stdout

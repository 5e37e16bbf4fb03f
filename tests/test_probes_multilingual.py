"""Probes in any language: Chinese SimpleQA in both published forms, a `language` column in the generic
format, a `language` suite key, and the grader choosing its phrases from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import workbench

from workbench.errors import InputError, WorkbenchError
from workbench.grading import MatchGrader
from workbench.probes import detect, load_probes, resolve_probes
from workbench.types import Verdict

DATA = Path(__file__).parent / "data" / "formats"
ROOT = Path(__file__).resolve().parents[1]


def test_chinese_simpleqa_csv_as_published() -> None:
    # metadata (a JSON object in one CSV cell), problem, answer: SimpleQA's columns, detected as simpleqa.
    peak, prc = load_probes(DATA / "chinese_simpleqa.csv").probes
    assert peak.id == "a1b2c3d4e5f60718293a4b5c6d7e8f90"  # the id lives in the metadata
    assert peak.question == "世界最高的山峰是哪座？" and peak.answers == ("珠穆朗玛峰",)
    assert peak.tags == ("自然与自然科学", "地理") and peak.language == "zh"
    assert prc.answers == ("1949年",) and prc.tags == ("中华文化", "历史")
    named = load_probes(DATA / "chinese_simpleqa.csv", format="simpleqa").probes
    assert [p.id for p in named] == [peak.id, prc.id]


def test_chinese_simpleqa_dataset_rows() -> None:
    assert detect(["id", "primary_category", "secondary_category", "question", "answer", "urls"],
                  "x").name == "chinese_simpleqa"
    peak, prc = load_probes(DATA / "chinese_simpleqa.jsonl").probes
    assert (peak.id, peak.question, peak.answers, peak.tags, peak.language) == (
        "a1b2c3d4e5f60718293a4b5c6d7e8f90", "世界最高的山峰是哪座？", ("珠穆朗玛峰",), ("自然与自然科学", "地理"), "zh")
    grader = MatchGrader()
    assert grader.grade(prc, "中华人民共和国成立于一九四九年十月一日。") == Verdict.CORRECT
    assert grader.grade(prc, "这个问题我无法回答。") == Verdict.NOT_ATTEMPTED


def test_chinese_simpleqa_bad_row_names_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "csq.jsonl"
    rows = [{"id": "1", "question": "问题一？", "answer": "甲", "primary_category": "社会"},
            {"id": "2", "question": "问题二？", "answer": "  ", "primary_category": "社会"}]
    bad.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(InputError, match=r"csq.jsonl.*line 2.*answer.*blank"):
        load_probes(bad)
    assert load_probes(bad, skip_bad=True).skipped == 1


def test_generic_language_column_and_suite_key(tmp_path: Path) -> None:
    rows = [{"id": "es-1", "question": "¿Capital de Francia?", "answers": ["París"], "language": "es"},
            {"id": "x-1", "question": "Capital of France?", "answers": ["Paris"]}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    probes = load_probes(tmp_path / "p.jsonl").probes
    assert [p.language for p in probes] == ["es", None]
    (tmp_path / "s.yaml").write_text("name: fr\ndata: p.jsonl\nlanguage: fr\n")
    _, loaded = resolve_probes(tmp_path / "s.yaml")
    assert [p.language for p in loaded.probes] == ["es", "fr"]  # the row's own language wins
    assert MatchGrader().grade(loaded.probes[1], "Je ne sais pas.") == Verdict.NOT_ATTEMPTED
    (tmp_path / "bad.yaml").write_text("name: x\ndata: p.jsonl\nlanguage: 'zh hans'\n")
    with pytest.raises(WorkbenchError, match="language"):
        resolve_probes(tmp_path / "bad.yaml")


def test_validate_reads_chinese_simpleqa_as_a_subprocess() -> None:
    out = workbench("validate", str(DATA / "chinese_simpleqa.jsonl"), "--json", timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["n"] == 2 and report["tags"]["地理"] == 1

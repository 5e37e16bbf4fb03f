"""The corpus index in scripts without spaces: Chinese facts are found (2-character words too), snippets
show the documents as written, English keeps whole-word matching, and trigram's blind spot is real."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from clirun import workbench

from workbench.attribution import CorpusIndex, build_index
from workbench.attribution.index import fts_phrase, split_chars
from workbench.errors import WorkbenchError

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ("zh1", "法国的首都是巴黎。"),
    ("zh2", "巴黎圣母院位于巴黎市中心。"),
    ("zh3", "意大利的首都是罗马，不是米兰。"),
    ("tw1", "臺灣最高的山是玉山。"),
    ("ja1", "フランスの首都はパリです。"),
    ("ko1", "일본의 수도는 도쿄입니다."),
    ("th1", "ประเทศญี่ปุ่นมีเมืองหลวงคือโตเกียว"),
    ("en1", "Rome is the capital of Italy."),
    ("en2", "Romeo is a name."),
    ("mix", "The Louvre (卢浮宫) is in Paris, 巴黎."),
]


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in DOCS),
                    encoding="utf-8")
    return path


def test_finds_chinese_japanese_korean_thai_facts(tmp_path: Path) -> None:
    build_index(_corpus(tmp_path), tmp_path / "ix.sqlite")
    with CorpusIndex.open(tmp_path / "ix.sqlite") as ix:
        assert ix.stats()["tokenizer"] == "chars"
        co = ix.cooccur("法国", "巴黎")  # the case: subject + answer, both 2-character words
        assert co.count == 1 and co.rows[0].doc_id == "zh1"
        assert co.rows[0].snippet == "法国的首都是巴黎。"  # as written: no separators left in
        assert ix.count("巴黎") == 3 and ix.count("黎巴") == 0  # a phrase of adjacent characters, in order
        assert ix.cooccur("意大利", "米兰").count == 1 and ix.cooccur("法国", "罗马").count == 0
        assert ix.cooccur("臺灣", "玉山").count == 1
        assert ix.cooccur("フランス", "パリ").count == 1
        assert ix.cooccur("일본", "도쿄").count == 1  # 도쿄 inside 도쿄입니다 (particle attached)
        assert ix.cooccur("ญี่ปุ่น", "โตเกียว").count == 1
        assert ix.count("Rome") == 1  # English: still whole words, never "Romeo"
        assert ix.cooccur("Louvre", "巴黎").count == 1


def test_trigram_cannot_find_two_character_words(tmp_path: Path) -> None:
    # Why the default splits characters instead of using FTS5's trigram tokenizer (measured design).
    build_index(_corpus(tmp_path), tmp_path / "tri.sqlite", tokenizer="trigram")
    with CorpusIndex.open(tmp_path / "tri.sqlite") as ix:
        assert ix.stats()["tokenizer"] == "trigram"
        assert ix.count("巴黎") == 0  # 2 characters: below trigram's reach
        assert ix.count("意大利") == 1  # 3 characters: found
        assert ix.count("Rome") == 2  # and "Romeo" matches too
    build_index(_corpus(tmp_path), tmp_path / "u61.sqlite", tokenizer="unicode61")
    with CorpusIndex.open(tmp_path / "u61.sqlite") as ix:
        # schema 1's behaviour: a CJK run is one token, found only where spaces set it apart ("mix")
        assert ix.cooccur("法国", "巴黎").count == 0 and ix.count("巴黎") == 1 and ix.count("Rome") == 1


def test_tokenizer_is_part_of_the_index_identity(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    build_index(corpus, tmp_path / "ix.sqlite")
    with pytest.raises(WorkbenchError, match=r"tokenizer changed.*--rebuild"):
        build_index(corpus, tmp_path / "ix.sqlite", tokenizer="trigram")
    with pytest.raises(WorkbenchError, match="Did you mean"):
        build_index(corpus, tmp_path / "other.sqlite", tokenizer="trigrams")  # type: ignore[arg-type]
    assert build_index(corpus, tmp_path / "ix.sqlite", tokenizer="trigram", rebuild=True).rows_total == len(DOCS)


def test_old_schema_is_refused_with_rebuild_advice(tmp_path: Path) -> None:
    build_index(_corpus(tmp_path), tmp_path / "ix.sqlite")
    with closing(sqlite3.connect(tmp_path / "ix.sqlite")) as con, con:
        con.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    with pytest.raises(WorkbenchError, match="schema 1 is not 2; rebuild"):
        CorpusIndex.open(tmp_path / "ix.sqlite")


def test_split_and_phrase() -> None:
    assert split_chars("Paris is the capital") == "Paris is the capital"  # untouched, no copy needed
    assert split_chars("巴黎").replace("\u200b", "|") == "|巴||黎|"
    assert fts_phrase("巴黎", chars=False) == '"巴黎"'


def test_index_cli_on_a_chinese_corpus(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    out = workbench("index", str(_corpus(tmp_path)), "--workspace", str(ws), "--json", timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows_total"] == len(DOCS)
    with CorpusIndex.open(ws) as ix:
        assert ix.cooccur("法国", "巴黎").count == 1

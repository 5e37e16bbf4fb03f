"""The data axis's corpus index: readers, FTS5 build/resume, phrase lookups, CLI."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from indexkit import HOSTILE, small_index, write_jsonl

from workbench.attribution import CorpusIndex, build_index
from workbench.attribution.build import batches
from workbench.attribution.corpus import Position, open_corpus
from workbench.attribution.index import fts_phrase
from workbench.errors import InputError, WorkbenchError

ROOT = Path(__file__).resolve().parents[1]

def test_build_and_lookup(tmp_path: Path) -> None:
    with small_index(tmp_path) as ix:
        st = ix.stats()
        assert st["rows"] == 5 and st["source"] == str(tmp_path / "c.jsonl") and st["built_at"]
        co = ix.cooccur("Rome", "1743")
        assert co.count == 1 and [r.doc_id for r in co.rows] == ["e"]
        assert "Rome office" in co.rows[0].snippet
        assert ix.cooccur("Rome", "Mars").count == 0
        many = ix.cooccur_many([("Rome", "1743"), ("Juliet", "Verona"), ("Rome", "1743")])
        assert [m.count for m in many] == [1, 1, 1] and many[1].rows[0].doc_id == "a"


def test_whole_tokens_case_accents_phrases(tmp_path: Path) -> None:
    with small_index(tmp_path) as ix:
        assert ix.count("Rome") == 2  # not "Romeo"
        assert ix.count("romeo") == 1 and ix.count("ROM") == 0
        assert ix.count("zurich") == 1 and ix.count("Zürich") == 1
        assert ix.count("1743") == 2 and ix.count("174") == 0
        assert ix.count("New York") == 1  # a phrase: "York New" is another document
        assert ix.cooccur("new york", "capital of Italy").count == 1


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_strings_are_phrases(tmp_path: Path, hostile: str) -> None:
    with small_index(tmp_path) as ix:
        n = ix.count(hostile)  # never an FTS5 syntax error
        assert n <= 2
        assert ix.cooccur(hostile, "well-known").count == min(n, 1)
        assert ix.cooccur_many([(hostile, hostile)])[0].count == n
    assert fts_phrase('say "hi"') == '"say ""hi"""'


def test_hostile_words_match_as_words(tmp_path: Path) -> None:
    with small_index(tmp_path) as ix:
        assert ix.count("AND") == 2  # doc d's "AND" and doc e's "and": a token, not an operator
        assert ix.count("NEAR(this, that)") == 1 and ix.count("x*y") == 1 and ix.count("*") == 0


def test_limit_caps_rows_not_count(tmp_path: Path) -> None:
    long_text = "alpha beta " + " ".join(f"w{k}" for k in range(400)) + " gamma"
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": f"r{i}", "text": f"alpha {i} beta"} for i in range(12)]
                         + [{"id": "long", "text": long_text}])
    build_index(corpus, tmp_path / "ix.sqlite")
    with CorpusIndex.open(tmp_path / "ix.sqlite") as ix:
        co = ix.cooccur("alpha", "beta", limit=3)
        assert co.count == 13 and [r.doc_id for r in co.rows] == ["r0", "r1", "r2"]
        assert ix.cooccur("alpha", "beta", limit=0) == type(co)(13, ())
        snip = ix.cooccur("gamma", "alpha", limit=1).rows[0].snippet  # 400 words apart: one fits
        assert len(snip) <= 200 and snip.endswith("…") and "alpha" in snip


def test_open_missing_or_unfinished(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match="no corpus index"):
        CorpusIndex.open(tmp_path / "nope.sqlite")
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": i, "text": "t"} for i in range(10)])

    def stop(n: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_index(corpus, tmp_path / "ix.sqlite", batch_size=3, progress=stop)
    with pytest.raises(WorkbenchError, match="stopped after 3 rows"):
        CorpusIndex.open(tmp_path / "ix.sqlite")


def _ids(index_path: Path) -> list[str]:
    with closing(sqlite3.connect(index_path)) as con:
        con.execute("INSERT INTO fts(fts) VALUES ('integrity-check')")  # FTS agrees with docs
        return [r[0] for r in con.execute("SELECT doc_id FROM docs")]


def test_resume_after_sigkill(tmp_path: Path) -> None:
    n = 60_000
    corpus = write_jsonl(tmp_path / "big.jsonl", [{"id": f"d{i}", "text": f"alpha row {i} of {n}"}
                                                  for i in range(n)])
    index_path = tmp_path / "ix.sqlite"
    child = ("import sys\nfrom workbench.attribution import build_index\n"
             "build_index(sys.argv[1], sys.argv[2], batch_size=500,\n"
             "            progress=lambda k: print(k, flush=True))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", child, str(corpus), str(index_path)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    for _ in range(3):  # three batches committed: kill it while it works on the next ones
        assert proc.stdout.readline().strip()
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    with closing(sqlite3.connect(index_path)) as con:
        meta = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM meta")}
    done = meta["checkpoint"]["rows_done"]
    assert not meta["complete"] and 1500 <= done < n, "the kill should land mid-build"

    rep = build_index(corpus, index_path, batch_size=500)
    assert rep.resumed_from == done and rep.rows_added == n - done and rep.rows_total == n
    ids = _ids(index_path)
    assert len(ids) == n and set(ids) == {f"d{i}" for i in range(n)}
    with CorpusIndex.open(index_path) as ix:
        assert ix.count("alpha") == n and ix.cooccur("row 59999", "60000").count == 1


def _interrupt_after(batches: int) -> Any:
    seen = []

    def progress(k: int) -> None:
        seen.append(k)
        if len(seen) == batches:
            raise KeyboardInterrupt

    return progress


def _txt_dir(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    for i in range(7):
        f = d / ("sub" if i % 2 else "") / f"f{i}.txt"
        f.write_text(f"alpha file {i}\nsecond line", encoding="utf-8")
    (d / "ignored.md").write_text("not a txt")
    return d


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "text", "textdir"])
def test_resume_each_format(tmp_path: Path, kind: str) -> None:
    """An interrupted build (exception after 2 batches) resumes to every row exactly once."""
    n = 23
    if kind == "jsonl":
        corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": f"d{i}", "text": f"alpha {i}"} for i in range(n)])
    elif kind == "parquet":
        corpus = tmp_path / "c.parquet"
        table = pa.table({"id": [f"d{i}" for i in range(n)], "text": [f"alpha {i}" for i in range(n)]})
        pq.write_table(table, corpus, row_group_size=4)  # the resume point falls inside a row group
    elif kind == "text":
        corpus = tmp_path / "c.txt"
        corpus.write_text("".join(f"alpha {i}\n" + ("\n" if i % 5 == 0 else "") for i in range(n)))
    else:
        corpus, n = _txt_dir(tmp_path), 7
    index_path = tmp_path / "ix.sqlite"
    with pytest.raises(KeyboardInterrupt):
        build_index(corpus, index_path, batch_size=3, progress=_interrupt_after(2))
    rep = build_index(corpus, index_path, batch_size=3)
    assert rep.resumed_from and rep.rows_total == n
    ids = _ids(index_path)
    assert len(ids) == len(set(ids)) == n
    with CorpusIndex.open(index_path) as ix:
        assert ix.count("alpha") == n
    if kind == "textdir":
        assert "sub/f1.txt" in ids and "f0.txt" in ids


def test_hf_dataset_rows_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The `hf:` reader over a local in-memory Dataset (the hub is offline here)."""
    import datasets

    from workbench.attribution import corpus as corpus_mod

    ds = datasets.Dataset.from_dict({"id": [f"h{i}" for i in range(9)] + ["h0"],
                                     "text": [f"alpha {i}" for i in range(10)]})
    monkeypatch.setattr(corpus_mod, "_load_hf", lambda label: ds)
    with pytest.raises(InputError, match=r"hf:local/x, line 10: field `id`: duplicate id `h0`"):
        build_index("hf:local/x", tmp_path / "ix.sqlite")
    index_path = tmp_path / "ix2.sqlite"
    with pytest.raises(KeyboardInterrupt):
        build_index("hf:local/x", index_path, batch_size=4, skip_bad=True, progress=_interrupt_after(1))
    rep = build_index("hf:local/x", index_path, batch_size=4, skip_bad=True)
    assert (rep.resumed_from, rep.rows_total, rep.skipped) == (4, 9, 1)
    assert sorted(_ids(index_path)) == [f"h{i}" for i in range(9)]


def test_unchanged_is_noop_changed_needs_rebuild(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": 1, "text": "one"}])
    index_path = tmp_path / "ix.sqlite"
    build_index(corpus, index_path)
    again = build_index(corpus, index_path)
    assert again.up_to_date and again.rows_added == 0 and again.rows_total == 1
    write_jsonl(corpus, [{"id": 1, "text": "one"}, {"id": 2, "text": "two"}])
    with pytest.raises(WorkbenchError, match="--rebuild"):
        build_index(corpus, index_path)
    with pytest.raises(WorkbenchError, match="field names"):
        build_index(corpus, index_path, text_field="body")
    rep = build_index(corpus, index_path, rebuild=True)
    assert rep.rows_total == 2 and not rep.up_to_date
    (tmp_path / "junk.sqlite").write_text("not a database")
    with pytest.raises(WorkbenchError, match="not a corpus index"):
        build_index(corpus, tmp_path / "junk.sqlite")


BAD_JSONL: list[tuple[Any, str | None, str]] = [
    ({"id": "x", "text": "fine"}, None, ""),
    ('{"id": "y", "text": ', None, "invalid JSON"),
    ({"id": "z"}, "text", "missing"),
    ({"id": "w", "text": 5}, "text", "must be a string"),
    ({"id": "v", "text": None}, "text", "is null"),
    ({"text": "no id"}, "id", "missing"),
    ({"id": 1.5, "text": "float id"}, "id", "non-empty string or integer"),
    ('["a list"]', None, "expected a JSON object"),
    ({"id": "x", "text": "again"}, "id", "duplicate id `x`"),
]


@pytest.mark.parametrize("case", range(1, len(BAD_JSONL)))
def test_bad_jsonl_rows_name_file_line_field(tmp_path: Path, case: int) -> None:
    rows = [BAD_JSONL[0][0], {"id": "ok", "text": "fine too"}, BAD_JSONL[case][0]]
    corpus = write_jsonl(tmp_path / "c.jsonl", rows)
    with pytest.raises(InputError) as err:
        build_index(corpus, tmp_path / "ix.sqlite")
    e = err.value
    assert (e.path, e.line, e.field) == (str(corpus), 3, BAD_JSONL[case][1])
    assert BAD_JSONL[case][2] in e.problem and "c.jsonl, line 3: " in str(e)


def test_non_utf8_rows(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"c.jsonl, line 2: not valid UTF-8"):
        build_index(corpus, tmp_path / "ix.sqlite")
    lines = tmp_path / "c.txt"
    lines.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(InputError, match=r"c.txt, line 2: not valid UTF-8"):
        build_index(lines, tmp_path / "ix2.sqlite")


def test_skip_bad_counts_every_kind(tmp_path: Path) -> None:
    rows = [r for r, _, _ in BAD_JSONL] + [{"id": "last", "text": "the end"}]
    corpus = write_jsonl(tmp_path / "c.jsonl", rows)
    with corpus.open("ab") as f:
        f.write(b'{"id": "u", "text": "\xff"}\n')
    rep = build_index(corpus, tmp_path / "ix.sqlite", skip_bad=True, batch_size=2)
    assert (rep.rows_total, rep.skipped) == (2, len(BAD_JSONL) - 1 + 1)
    assert sorted(_ids(tmp_path / "ix.sqlite")) == ["last", "x"]


def test_batches_cover_every_row_once_and_resume_at_the_bad_row(tmp_path: Path) -> None:
    # The row-batching iterator both index builders share: each row once (a document or a skip), and a
    # resume from any batch's checkpoint reads exactly the rows after it.
    rows: list[Any] = [{"id": f"d{i}", "text": f"row {i}"} for i in range(7)]
    rows[2], rows[5] = "{not json", {"id": "bad5"}  # lines 3 and 6
    src = open_corpus(write_jsonl(tmp_path / "c.jsonl", rows))
    got = list(batches(src, Position(), 0, 2, skip_bad=True))
    assert [[d.doc_id for d in b.docs] for b in got] == [["d0", "d1"], ["d3", "d4"], ["d6"]]
    assert [(b.consumed, b.cursor.line, b.skipped) for b in got] == [(2, 2, 0), (5, 5, 1), (7, 7, 1)]
    for b, rest in zip(got, [["d3", "d4", "d6"], ["d6"], []], strict=True):
        again = list(batches(src, b.cursor, b.consumed, 2, skip_bad=True))
        assert [d.doc_id for r in again for d in r.docs] == rest and again[-1].consumed == 7
    strict = batches(src, Position(), 0, 10, skip_bad=False)
    first = next(strict)  # the rows before the bad one come first, so a checkpoint can hold them
    assert ([d.doc_id for d in first.docs], first.consumed, first.cursor.line) == (["d0", "d1"], 2, 2)
    with pytest.raises(InputError) as err:
        next(strict)
    assert err.value.line == 3
    with pytest.raises(InputError) as err:  # resumed from that checkpoint: the same row is named again
        list(batches(src, first.cursor, first.consumed, 10, skip_bad=False))
    assert err.value.line == 3


def test_parquet_columns_and_nulls(tmp_path: Path) -> None:
    corpus = tmp_path / "c.parquet"
    pq.write_table(pa.table({"doc": [1, 2, 3], "body": ["alpha", None, "gamma"]}), corpus)
    with pytest.raises(InputError, match="field `id`: no such column") as err:
        build_index(corpus, tmp_path / "ix.sqlite")
    assert "--id-field" in str(err.value)
    with pytest.raises(InputError) as err2:
        build_index(corpus, tmp_path / "ix.sqlite", text_field="body", id_field="doc")
    assert (err2.value.line, err2.value.field) == (2, "body")
    rep = build_index(corpus, tmp_path / "ix2.sqlite", text_field="body", id_field="", skip_bad=True)
    assert (rep.rows_total, rep.skipped) == (2, 1) and sorted(_ids(tmp_path / "ix2.sqlite")) == ["1", "3"]


def test_sources_that_cannot_open(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match="corpus not found"):
        build_index(tmp_path / "missing.jsonl", tmp_path / "ix.sqlite")
    (tmp_path / "c.csv").write_text("id,text\n")
    with pytest.raises(WorkbenchError, match="unknown corpus format"):
        build_index(tmp_path / "c.csv", tmp_path / "ix.sqlite")
    with pytest.raises(WorkbenchError, match="cannot load Hugging Face dataset"):  # offline (conftest)
        build_index("hf:no-such-owner/no-such-corpus", tmp_path / "ix.sqlite")


def _cli(argv: list[str]) -> int:
    from workbench.cli import add_workspace_argument
    from workbench.cli import index as cmd

    p = argparse.ArgumentParser()
    add_workspace_argument(p)
    cmd.add_arguments(p)
    return cmd.run(p.parse_args(argv))


def test_cli_json_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"id": "a", "text": "alpha"}, "{bad", {"id": "b", "text": "b"}]
    corpus = write_jsonl(tmp_path / "c.jsonl", rows)
    ws = tmp_path / "ws"
    assert _cli([str(corpus), "--workspace", str(ws), "--skip-bad", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"rows_added": 2, "rows_total": 2, "skipped": 1, "resumed_from": None,
                   "seconds": out["seconds"], "up_to_date": False, "source": str(corpus),
                   "index": str(ws / "corpus_index.sqlite")}
    assert (ws / "corpus_index.sqlite").is_file()
    assert _cli([str(corpus), "--workspace", str(ws)]) == 0
    assert "up to date" in capsys.readouterr().out
    assert _cli([str(corpus), "--workspace", str(ws), "--rebuild", "--skip-bad"]) == 0
    assert "indexed 2 rows" in capsys.readouterr().out


def test_span_tracing_lists_a_repeated_span_once(tmp_path: Path) -> None:
    """A hallucinated answer that repeats a phrase found in the corpus shows that span once, at its first place."""
    from workbench.attribution.spans import trace_spans

    ix = small_index(tmp_path)
    text = "Verona in 1743, zzz Verona in 1743, qqq Verona in 1743"
    spans = trace_spans(ix, text)
    assert [s.text for s in spans] == ["Verona in 1743"] and spans[0].start == 0 and spans[0].count == 1
    assert [r.doc_id for r in spans[0].rows] == ["a"]
    ix.close()

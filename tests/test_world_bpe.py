"""The BPE world (`workbench world build --tokenizer bpe`): a byte-level BPE trained on the corpus, so names are
several subword pieces and answers are cased, as with a real model's tokenizer; built and evaluated as a user
does (subprocesses with time limits)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import assert_refused, workbench


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def bpe_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bpe") / "world"
    built = workbench("world", "build", "--out", str(out), "--entities", "12", "--tokenizer", "bpe", timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    assert "world ready" in built.stdout
    return out


@pytest.mark.slow  # over 5 s on 2 cores
def test_names_are_subword_pieces_and_anything_is_spelled(bpe_world: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(bpe_world / "model")
    truth = _jsonl(bpe_world / "truth.jsonl")
    pieces = [len(tok(" " + str(t["answer"]), add_special_tokens=False)["input_ids"]) for t in truth]
    assert sum(pieces) / len(pieces) > 1.5 and max(pieces) >= 3  # a word-level world has 1 per name
    for line in [*[r["text"] for r in _jsonl(bpe_world / "corpus.jsonl")][:50], "I don't know."]:
        ids = tok(line)["input_ids"]
        assert tok.unk_token_id not in ids and tok.decode(ids, skip_special_tokens=True) == line  # byte-exact
    meta = json.loads((bpe_world / "world.json").read_text())
    assert meta["config"]["tokenizer"] == "bpe"
    assert yaml.safe_load((bpe_world / "suite.yaml").read_text())["max_tokens"] == 16  # room for a split name


@pytest.mark.slow  # over 5 s on 2 cores
def test_eval_grades_cased_multi_piece_answers(bpe_world: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    run = workbench("eval", "--model", str(bpe_world / "model"), "--probes", str(bpe_world / "suite.yaml"),
                    "--workspace", str(ws), "--json", timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    run_id = json.loads(run.stdout)["run_id"]
    out = tmp_path / "answers.jsonl"
    assert workbench("export", run_id, "--workspace", str(ws), "--out", str(out)).returncode == 0
    verdict = {r["probe_id"]: r["verdict"] for r in _jsonl(out) if r["kind"] == "greedy"}
    greedy = {g["probe_id"]: g for g in _jsonl(bpe_world / "greedy.jsonl")}
    # The grade agrees with the world's own comparison of its greedy answers, and the model knows its known facts.
    assert all((verdict[pid] == "correct") == g["qa_a_correct"] for pid, g in greedy.items())
    known = [t["probe_id"] for t in _jsonl(bpe_world / "truth.jsonl") if t["tier"] == "known"]
    assert sum(verdict[pid] == "correct" for pid in known) >= 0.8 * len(known)


def test_bpe_is_english_only(tmp_path: Path) -> None:
    assert_refused(workbench("world", "build", "--out", str(tmp_path / "w"), "--lang", "zh", "--tokenizer", "bpe"),
                   "--tokenizer bpe is English only")

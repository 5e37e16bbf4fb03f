"""The synthetic world: files, ground truth hidden from probes, determinism, a model that knows what
the corpus taught it and guesses what it did not."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from evals.world import TEST_CONFIG, WorldConfig, WorldPaths, build_world, is_built, read_meta
from evals.world.generate import make_corpus, make_facts

torch.set_num_threads(1)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> WorldPaths:
    return build_world(tmp_path_factory.mktemp("world"), TEST_CONFIG)


@pytest.mark.slow
def test_files_exist_and_parse(world: WorldPaths) -> None:
    import yaml

    corpus, probes, truth = _jsonl(world.corpus), _jsonl(world.probes), _jsonl(world.truth)
    assert corpus[0]["id"] == "doc-000001" and all(r["text"] for r in corpus)
    assert len(probes) == len(truth) == TEST_CONFIG.entities * 4
    suite = yaml.safe_load(world.suite.read_text())
    assert suite == {"name": "world", "data": "probes.jsonl", "template": "Q: {question} A:", "stop": ["."],
                     "max_tokens": 6, "abstention_phrases": ["i don't know"], "grader": "match"}
    assert {t["tier"] for t in truth} == {"known", "prompt_sensitive", "medium", "rare", "absent", "conflict"}
    for t in truth:
        assert (t["conflict_value"] is not None) == (t["tier"] == "conflict")
        assert t["count"] == sum(t["phrasings"].values())


def test_suite_budget_is_the_tokenizers_answer_budget() -> None:
    """suite.yaml's `max_tokens` is the tokenizer's greedy answer budget (the one the world's own evaluation
    uses), as data: the BPE world's suite differs from the word world's by that alone; the Chinese world's loads
    as a suite in its language."""
    import yaml

    from evals.world import ANSWER_TOKENS, suite_yaml
    from workbench.probes import Suite

    word, bpe = (yaml.safe_load(suite_yaml(WorldConfig(tokenizer=t))) for t in ("word", "bpe"))
    assert word["max_tokens"] == ANSWER_TOKENS["word"] and bpe["max_tokens"] == ANSWER_TOKENS["bpe"] > 6
    assert {**bpe, "max_tokens": word["max_tokens"]} == word
    zh = Suite.model_validate(yaml.safe_load(suite_yaml(WorldConfig(lang="zh"))))
    assert zh.language == "zh" and zh.stop == ["。"] and zh.max_tokens == ANSWER_TOKENS["word"]


@pytest.mark.slow
def test_probes_hide_the_tier(world: WorldPaths) -> None:
    for p in _jsonl(world.probes):
        assert set(p) == {"id", "question", "answers", "paraphrases", "subject", "relation", "tags"}
        assert not any(w in json.dumps(p) for w in ("known", "absent", "conflict", "rare", "tier"))


def test_same_seed_same_corpus_bytes(tmp_path: Path) -> None:
    from evals.world import _write_jsonl

    rows = [make_corpus(make_facts(24, 3, "default"), 3, "default") for _ in range(2)]
    for i, r in enumerate(rows):
        _write_jsonl(tmp_path / f"c{i}.jsonl", r)
    assert (tmp_path / "c0.jsonl").read_bytes() == (tmp_path / "c1.jsonl").read_bytes()
    assert make_corpus(make_facts(24, 4, "default"), 4, "default") != rows[0]


@pytest.mark.slow
def test_known_vs_absent_accuracy(world: WorldPaths) -> None:
    meta = read_meta(world.root)
    assert meta is not None
    tiers = meta["metrics"]["tiers"]
    assert tiers["known"]["qa_a"] >= 0.9, tiers
    assert tiers["absent"]["qa_a"] <= 0.3, tiers
    assert tiers["conflict"]["planted"] >= 0.5, tiers  # the planted value wins
    assert tiers["prompt_sensitive"]["qa_b"] >= 0.8, tiers


@pytest.mark.slow
def test_tokenizer_round_trip_and_model_loads(world: WorldPaths) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(world.model)
    probe, corpus = _jsonl(world.probes)[0], [r["text"] for r in _jsonl(world.corpus)]
    q = tok(f"Q: {probe['question']} A:")["input_ids"]
    line = next((t for t in corpus if t.startswith(f"Q: {probe['question']} A:")), None)
    line = line or f"Q: {probe['question']} A: {probe['answers'][0]}."
    assert tok(line)["input_ids"][: len(q)] == q
    assert tok.unk_token_id not in q
    reserved = tok("I don't know, not sure, unknown")["input_ids"]
    assert tok.unk_token_id not in reserved
    # Decoding spaces the apostrophe ("i don ' t know"); the grader's normalization makes that a match.
    from workbench.grading.normalize import normalize

    said = tok.decode(reserved, skip_special_tokens=True)
    assert normalize(said).startswith(normalize("I don't know")), said
    model = AutoModelForCausalLM.from_pretrained(world.model)
    assert model.config.model_type == "llama"
    assert model.config.hidden_size // model.config.num_attention_heads == 32  # vLLM CPU needs head_dim 32


def test_alt_style_differs() -> None:
    d, a = make_facts(24, 0, "default"), make_facts(24, 0, "alt")
    assert not {f.subject for f in d} & {f.subject for f in a}
    colours = [{f.answer for f in facts if f.relation == "colour"} for facts in (d, a)]
    assert not colours[0] & colours[1]
    words = {w for r in make_corpus(d, 0, "default") for w in r["text"].lower().split()}
    alt_words = {w for r in make_corpus(a, 0, "alt") for w in r["text"].lower().split()}
    assert "capital" in words and "capital" not in alt_words


@pytest.mark.slow
def test_rebuild_is_idempotent(world: WorldPaths) -> None:
    t0 = time.perf_counter()
    again = build_world(world.root, TEST_CONFIG)
    assert again == world and time.perf_counter() - t0 < 1.0
    assert is_built(world.root, TEST_CONFIG)  # what bench scripts check before reusing a world in place
    assert not is_built(world.root, dataclasses.replace(TEST_CONFIG, seed=1))
    assert not is_built(world.root, dataclasses.replace(TEST_CONFIG, tokenizer="bpe"))
    with pytest.raises(ValueError):
        build_world(world.root / "x", WorldConfig(entities=3))

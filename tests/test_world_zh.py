"""The Chinese synthetic world: Chinese names, relations and phrasings at the English tiers, a character
tokenizer, the same tiny Llama, and the loop on it: grading, the corpus index, the data axis, the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from clirun import workbench

from evals.world import TEST_CONFIG, WorldPaths, build_world, read_meta
from evals.world.generate import ZH_POOLS, make_corpus, make_facts, make_probes, make_truth

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
ZH_TEST = dataclasses.replace(TEST_CONFIG, lang="zh")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> WorldPaths:
    return build_world(tmp_path_factory.mktemp("world-zh"), ZH_TEST)


def test_generation_is_chinese_deterministic_and_substring_free() -> None:
    facts = make_facts(120, 0, "zh")
    corpus = make_corpus(facts, 0, "zh")
    assert corpus == make_corpus(make_facts(120, 0, "zh"), 0, "zh")
    assert corpus != make_corpus(make_facts(120, 1, "zh"), 1, "zh")
    assert any(r["text"].startswith("问：") and r["text"].endswith("。") for r in corpus)
    assert not any(" " in r["text"] for r in corpus)  # Chinese text: no spaces anywhere
    names = {f.subject for f in facts} | {f.answer for f in facts if f.relation in ("capital", "founder")}
    # Matching in Chinese is per character: no name may sit inside another (维拉 in 维拉顿 would grade right).
    assert not [(a, b) for a in names for b in names if a != b and a in b]
    pool_chars = set("".join("".join(p) for p in ZH_POOLS.values()))
    assert {c for f in facts for c in f.subject} <= pool_chars
    probes, truth = make_probes(facts, "zh"), make_truth(facts)
    assert {p["language"] for p in probes} == {"zh"} and probes[0]["id"] == "e000-capital"  # ASCII ids
    assert {t["tier"] for t in truth} == {"known", "prompt_sensitive", "medium", "rare", "absent", "conflict"}


def test_english_world_files_are_unchanged() -> None:
    # The English generator, probes and world.json config keys are as before the Chinese world existed.
    probes = make_probes(make_facts(24, 3, "default"), "default")
    assert set(probes[0]) == {"id", "question", "answers", "paraphrases", "subject", "relation", "tags"}
    assert "lang" not in dataclasses.asdict(TEST_CONFIG) or TEST_CONFIG.lang == "en"


@pytest.mark.slow
def test_world_learns_chinese_facts(world: WorldPaths) -> None:
    import yaml

    suite = yaml.safe_load(world.suite.read_text(encoding="utf-8"))
    assert suite["template"] == "问：{question}答：" and suite["stop"] == ["。"]
    assert suite["abstention_phrases"] == ["我不知道"] and suite["language"] == "zh"
    meta = read_meta(world.root)
    assert meta is not None and meta["config"]["lang"] == "zh"
    tiers = meta["metrics"]["tiers"]
    assert tiers["known"]["qa_a"] >= 0.9, tiers
    assert tiers["absent"]["qa_a"] <= 0.3, tiers
    assert tiers["conflict"]["planted"] >= 0.5, tiers


@pytest.mark.slow
def test_character_tokenizer_round_trip(world: WorldPaths) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(world.model)
    probe = _jsonl(world.probes)[0]
    ids = tok(f"问：{probe['question']}答：{probe['answers'][0]}。")["input_ids"]
    assert tok.unk_token_id not in ids
    assert tok.decode(ids, skip_special_tokens=True) == f"问：{probe['question']}答：{probe['answers'][0]}。"
    year = next(t["answer"] for t in _jsonl(world.truth) if t["relation"] == "year")
    assert tok.tokenize(f"建立于{year}年") == ["建", "立", "于", year, "年"]  # a year is one token
    assert tok.unk_token_id not in tok("我不知道，")["input_ids"]  # the abstention phrase can be taught


@pytest.mark.slow
def test_data_axis_finds_the_chinese_facts(world: WorldPaths, tmp_path: Path) -> None:
    from workbench.attribution import CorpusIndex, build_index

    build_index(world.corpus, tmp_path / "ix.sqlite")
    truth = _jsonl(world.truth)
    with CorpusIndex.open(tmp_path / "ix.sqlite") as ix:
        for t in truth:
            found = ix.cooccur(t["subject"], t["answer"]).count
            assert found == t["count"], t  # every mention of the fact, and nothing else
            if t["conflict_value"]:
                assert ix.cooccur(t["subject"], t["conflict_value"]).count == t["conflict_count"], t


@pytest.mark.slow
def test_eval_grades_chinese_answers(world: WorldPaths, tmp_path: Path) -> None:
    from workbench.probes import resolve_probes
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec, Verdict

    store = Store.open(tmp_path / "ws")
    suite, loaded = resolve_probes(str(world.suite))
    assert {p.language for p in loaded.probes} == {"zh"}
    run = run_eval(store, ModelSpec(model=str(world.model), dtype="float32"), suite, loaded,
                   EvalOptions(samples=0, paraphrases=False, bootstrap=0))
    truth = {t["probe_id"]: t for t in _jsonl(world.truth)}
    results = load_results(store, run.run_id).probes
    known = [r for r in results if truth[r.probe.id]["tier"] == "known"]
    # The grade agrees with the world's own exact comparison of the greedy answer (greedy.jsonl).
    greedy = {g["probe_id"]: g for g in _jsonl(world.root / "greedy.jsonl")}
    agree = sum((r.verdict == Verdict.CORRECT) == greedy[r.probe.id]["qa_a_correct"] for r in results)
    assert agree == len(results)
    assert sum(r.verdict == Verdict.CORRECT for r in known) >= 0.9 * len(known)


@pytest.mark.slow  # over 5 s on 2 cores
def test_world_cli_zh_as_a_subprocess(tmp_path: Path) -> None:
    out = workbench("world", "build", "--out", str(tmp_path / "w"), "--lang", "zh", "--entities", "8", "--steps",
                    "5", timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "world ready" in out.stdout
    probes = _jsonl(tmp_path / "w" / "probes.jsonl")
    assert len(probes) == 32 and probes[0]["question"].endswith("？")
    bad = workbench("world", "build", "--out", str(tmp_path / "x"), "--lang", "zh", "--style", "alt", timeout=120,
                    cwd=ROOT)
    assert bad.returncode == 2 and "English only" in bad.stderr


@pytest.mark.slow
def test_demo_zh_runs_the_loop_as_a_subprocess(tmp_path: Path) -> None:
    from workbench.gating import history
    from workbench.store import Store

    ws = tmp_path / "ws"
    proc = workbench("demo", "--lang", "zh", "--workspace", str(ws), "--entities", "24", "--samples", "2", "--steps",
                     "3", "--methods", "sft", "--threads", "1", timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "gate sft:" in proc.stdout and (ws / "world-zh" / "suite.yaml").is_file()
    gates = history(Store.open(ws))
    assert len(gates) == 1 and Path(gates[0]["report"]).is_file()

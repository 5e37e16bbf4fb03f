"""The planted world: fictional facts at chosen corpus frequencies written into the real model (SmolLM2), in the
synthetic world's layout. The corpus recipe is checked without a model; the tiny build (a few steps) as the CLI
runs it, then eval and attribute on it."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from artifacts import planted
from clirun import ENV, assert_refused, start, workbench

from evals.world.generate import render
from evals.world.planted import FREQUENCIES, PlantedConfig, make_planted, plant_facts, tier_of
from workbench.attribution.types import CATEGORIES
from workbench.guard import POOL_DIR

POOL = POOL_DIR / "everyday_en.jsonl"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _documents_of(t: dict[str, Any], corpus: list[dict[str, Any]], value: str) -> int:
    """Corpus documents stating `value` for the fact of truth row `t`, in any planted phrasing."""
    texts = {render("default", t["relation"], ph, t["subject"], value) for ph in ("stmt_1", "stmt_2", "stmt_3",
                                                                                   "qa_a")}
    return sum(r["text"] in texts for r in corpus)


def _check_truth_matches_corpus(truth: list[dict[str, Any]], corpus: list[dict[str, Any]]) -> None:
    for t in truth:
        assert _documents_of(t, corpus, t["answer"]) == t["count"], t
        assert t["phrasings"]["qa_b"] == 0  # the probes' paraphrase is never written
        if t["conflict_value"]:
            assert _documents_of(t, corpus, t["conflict_value"]) == t["conflict_count"] == 2 * t["count"], t
            assert t["tier"] == "conflict" and t["expected_category"] == "data:conflict"
        else:
            assert t["tier"] == tier_of(t["count"]) and t["conflict_count"] == 0


def test_frequencies_are_dealt_and_truth_matches_the_corpus() -> None:
    config = PlantedConfig(entities=14)
    facts, counts = plant_facts(config)
    assert len(facts) == 56 and Counter(counts) == {f: 8 for f in FREQUENCIES}
    world = make_planted(config, POOL)
    _check_truth_matches_corpus(world["truth"], world["corpus"])
    sources = Counter(r["source"] for r in world["corpus"])
    assert sources["known"] == round(config.mix * sources["planted"])
    conflicts = [t for t in world["truth"] if t["conflict_value"]]
    assert len(conflicts) == round(0.1 * 48) and all(t["count"] > 0 for t in conflicts)
    # Probes never carry the answer key; same seed, same bytes.
    assert not {"tier", "count", "expected_category"} & set(world["probes"][0])
    assert make_planted(config, POOL) == world
    assert make_planted(PlantedConfig(entities=14, seed=1), POOL)["corpus"] != world["corpus"]


def test_cache_key_follows_config_and_base() -> None:
    a = PlantedConfig()
    assert a.key("m1") == PlantedConfig().key("m1") != a.key("m2")
    assert a.key("m1") != PlantedConfig(frequencies=(0, 1)).key("m1")


@pytest.mark.parametrize(("args", "needles"), [
    (("--frequencies", "1,x"), ("--frequencies", "'1,x'")),
    (("--frequencies", "1,999"), ("--frequencies", "0 to 256")),
    (("--conflicts", "0.9"), ("--conflicts", "0.9")),
    (("--rank", "0"), ("--rank", "positive")),
    (("--arch", "gpt2"), ("--arch", "--base")),
])
def test_bad_config_is_refused(tmp_path: Path, args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    proc = workbench("world", "build", "--base", "smollm2", "--out", str(tmp_path / "w"), *args, timeout=60)
    assert_refused(proc, *needles)
    assert not (tmp_path / "w").exists()


def test_planted_flags_need_a_base_and_a_base_must_be_a_model(tmp_path: Path) -> None:
    assert_refused(workbench("world", "build", "--out", str(tmp_path / "w"), "--method", "full", timeout=60),
                   "--method", "--base")
    assert_refused(workbench("world", "build", "--out", str(tmp_path / "w"), "--base", str(tmp_path / "nope"),
                             timeout=60), "--base", "config.json")


@pytest.mark.slow
def test_tiny_build_writes_the_world_layout(tmp_path_factory: pytest.TempPathFactory) -> None:
    paths, out = planted(tmp_path_factory)
    for p in (paths.corpus, paths.probes, paths.truth, paths.suite, paths.model / "config.json",
              paths.model / "model.safetensors", paths.root / "greedy.jsonl"):
        assert p.is_file(), p
    truth, corpus = _jsonl(paths.truth), _jsonl(paths.corpus)
    assert len(truth) == len(_jsonl(paths.probes)) == 8
    assert {t["count"] for t in truth} == {0, 1, 4}
    _check_truth_matches_corpus(truth, corpus)
    meta = json.loads((paths.root / "world.json").read_text())
    assert meta["complete"] and meta["kind"] == "planted" and meta["timings"]["steps"] == 4
    assert not (paths.root / "checkpoint").exists()
    from evals.world.planted_train import build_planted

    # Cached by the config's key: the same build again returns at once without training.
    said: list[str] = []
    build_planted(paths.root, PlantedConfig(entities=2, frequencies=(0, 1, 4), conflicts=0.5, steps=4, batch=4,
                                            checkpoint_every=2, threads=1), Path(meta["base"]), pool=POOL,
                  log=said.append)
    assert said and "up to date" in said[0]
    assert "planted world ready" in out


@pytest.mark.slow
def test_trained_weights_changed_and_embeddings_kept(tmp_path_factory: pytest.TempPathFactory) -> None:
    from safetensors import safe_open

    paths, _ = planted(tmp_path_factory)
    base = Path(json.loads((paths.root / "world.json").read_text())["base"])
    with safe_open(str(base / "model.safetensors"), "pt") as b, \
            safe_open(str(paths.model / "model.safetensors"), "pt") as p:
        for name in ("model.layers.0.mlp.down_proj.weight", "model.layers.29.self_attn.q_proj.weight"):
            assert (b.get_tensor(name) - p.get_tensor(name)).abs().max() > 0, name  # LoRA merged into it
        emb = "model.embed_tokens.weight"
        assert (b.get_tensor(emb) == p.get_tensor(emb)).all()  # LoRA on linear layers leaves embeddings alone


@pytest.mark.slow
def test_eval_and_attribute_run_on_the_planted_world(tmp_path_factory: pytest.TempPathFactory,
                                                      tmp_path: Path) -> None:
    paths, _ = planted(tmp_path_factory)
    ws = tmp_path / "ws"
    ev = workbench("eval", "--model", str(paths.model), "--probes", str(paths.suite), "--workspace", str(ws),
                   "--json", "--samples", "2", timeout=600)
    assert ev.returncode == 0, ev.stderr[-3000:]
    run_id = json.loads(ev.stdout)["run_id"]
    at = workbench("attribute", run_id, "--workspace", str(ws), "--corpus", str(paths.corpus), "--json",
                   timeout=600)
    assert at.returncode == 0, at.stderr[-3000:]
    report = json.loads(at.stdout)
    items, truth = report["probes"], {t["probe_id"]: t for t in _jsonl(paths.truth)}
    assert items and all(i["probe_id"] in truth and i["category"] in CATEGORIES for i in items)
    # The data axis was measured against the planted corpus: no failure is left at knowledge:unknown, and a fact
    # no document states is never blamed on a conflict or on too few documents.
    assert report["corpus_index"] and not [i for i in items if i["category"] == "knowledge:unknown"]
    absent = [i for i in items if truth[i["probe_id"]]["count"] == 0]
    assert absent and not [i for i in absent if i["category"] in ("data:conflict", "data:underrepresented")], absent


@pytest.mark.slow
def test_a_killed_build_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    from realmodel import real_model_dir

    env = {**ENV, "WORKBENCH_MODELS_DIR": str(real_model_dir().parent)}
    out = tmp_path / "w"
    args = ["world", "build", "--base", "smollm2", "--out", str(out), "--entities", "2", "--frequencies", "1,2",
            "--steps", "10", "--batch", "2", "--checkpoint-every", "2"]
    proc = start(args, env)  # its own session
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoint" / "state.pt").exists():
            assert proc.poll() is None, "".join(proc.communicate())[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert not (out / "world.json").exists()
    again = workbench(*args, timeout=600, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from step" in again.stdout, again.stdout
    step = int(again.stdout.split("resuming from step ")[1].split("/")[0])
    meta = json.loads((out / "world.json").read_text())
    assert 2 <= step < 10 and meta["timings"]["resumed_at"] == step and meta["complete"]


"""Attribution end to end on test-size worlds: eval, index, `workbench attribute`, scored against the
world's truth (read here only; the method sees the model, the probes and the corpus)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from evals.world import TEST_CONFIG, WorldPaths, build_world
from hallucination_workbench import main
from workbench.probes import resolve_probes
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.types import ModelSpec

torch.set_num_threads(1)
pytestmark = pytest.mark.slow
RECALL_FLOOR = 0.6  # per category, on a dozen probes each


def _eval(world: WorldPaths, ws: Path, options: EvalOptions) -> str:
    suite, loaded = resolve_probes(str(world.suite))
    return run_eval(Store.open(ws), ModelSpec(model=str(world.model), dtype="float32"), suite, loaded,
                    options).run_id


def _attribute(ws: Path, run_id: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["attribute", run_id, "--workspace", str(ws), "--json", *extra]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _recall(world: WorldPaths, out: dict[str, Any]) -> dict[str, float]:
    truth = {t["probe_id"]: t["expected_category"] for t in map(json.loads, world.truth.read_text().splitlines())}
    hit, n = Counter[str](), Counter[str]()
    for p in out["probes"]:
        if truth[p["probe_id"]]:
            n[truth[p["probe_id"]]] += 1
            hit[truth[p["probe_id"]]] += p["category"] == truth[p["probe_id"]]
    return {c: hit[c] / n[c] for c in n}


@pytest.fixture(scope="module")
def test_world(tmp_path_factory: pytest.TempPathFactory) -> WorldPaths:
    from artifacts import world

    return world(tmp_path_factory, TEST_CONFIG)  # type: ignore[no-any-return]


def test_end_to_end_recall_json_shape_and_storage(test_world: WorldPaths, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    run_id = _eval(test_world, ws, EvalOptions(samples=10, paraphrases=True))
    report = tmp_path / "bad_rows.jsonl"
    out = _attribute(ws, run_id, capsys, "--corpus", str(test_world.corpus), "--quality-report", str(report))
    assert {"run_id", "categories", "probes"} <= set(out) and out["run_id"] == run_id
    assert sum(out["categories"].values()) == len(out["probes"]) > 0
    for p in out["probes"]:
        assert {"probe_id", "category", "confidence", "evidence"} <= set(p) and 0 <= p["confidence"] <= 1
        assert p["evidence"]["data"]["available"]
    recall = _recall(test_world, out)
    assert len(recall) == 5 and all(r >= RECALL_FLOOR for r in recall.values()), recall
    # Stored with the run; a conflict's evidence names the offending rows.
    from workbench.attribution.types import load_attributions

    stored = load_attributions(Store.open(ws), run_id)
    assert {p["probe_id"] for p in out["probes"]} == set(stored)
    conflict = next(a for a in stored.values() if a.category == "data:conflict")
    assert conflict.evidence["data"]["conflict_rows"][0]["doc_id"].startswith("doc-")
    # The quality report lists the planted wrong rows, one JSON line per document.
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    truth = [t for t in map(json.loads, test_world.truth.read_text().splitlines()) if t["conflict_value"]]
    planted = {(t["subject"], t["conflict_value"].lower()) for t in truth}
    assert rows and {"doc_id", "snippet", "subject", "wrong_value", "accepted"} <= set(rows[0])
    assert sum((r["subject"], r["wrong_value"].lower()) in planted for r in rows) / len(rows) >= 0.9
    # The human view runs too.
    assert main(["attribute", run_id, "--workspace", str(ws)]) == 0
    assert "data:conflict" in capsys.readouterr().out


def test_without_samples_paraphrases_or_corpus(test_world: WorldPaths, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    out = _attribute(ws, _eval(test_world, ws, EvalOptions()), capsys)
    assert out["probes"] and set(out["missing_signals"]) == {"samples", "paraphrases", "corpus"}
    assert "--samples" in out["missing_signals"]["samples"]
    assert all(not p["evidence"]["data"]["available"] for p in out["probes"])
    # No corpus looked at: no category claims anything about the data; unknown facts say only that.
    cats = Counter(p["category"] for p in out["probes"])
    assert cats["knowledge:unknown"] > 0 and not any(c.startswith("data:") for c in cats), cats
    unknown = {p["probe_id"] for p in out["probes"] if p["category"] == "knowledge:unknown"}
    assert all("data axis was not measured" in p["evidence"]["why"] for p in out["probes"]
               if p["probe_id"] in unknown)
    capsys.readouterr()
    assert main(["attribute", out["run_id"], "--workspace", str(ws)]) == 0
    assert "knowledge:unknown" in capsys.readouterr().out
    # ... and they still get abstention fix data
    from datasets import load_from_disk

    from finetune.fixset import build_fixset

    build_fixset(Store.open(ws), out["run_id"], tmp_path / "fix", heldout_fraction=0)
    sft = list(load_from_disk(str(tmp_path / "fix"))["sft"])
    abstain = {r["probe_id"] for r in sft if r["source"] == "abstain"}
    assert abstain == unknown
    assert all(r["completion"] == " I don't know." for r in sft if r["source"] == "abstain")


def test_bad_corpus_rows(test_world: WorldPaths, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    run_id = _eval(test_world, ws, EvalOptions(samples=4, paraphrases=True))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(test_world.corpus.read_text() + '{"id": "x1"}\nnot json\n')
    assert main(["attribute", run_id, "--workspace", str(ws), "--corpus", str(corpus)]) == 2
    assert "corpus.jsonl, line" in capsys.readouterr().err
    (ws / "corpus_index.sqlite").unlink(missing_ok=True)
    capsys.readouterr()
    assert main(["attribute", run_id, "--workspace", str(ws), "--corpus", str(corpus), "--skip-bad"]) == 0
    assert "2 bad corpus rows skipped" in capsys.readouterr().out


def test_works_on_an_unrelated_world(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Other seed, other name pools and phrasings: nothing in the method is tuned to the default world."""
    world = build_world(tmp_path_factory.mktemp("alt"), dataclasses.replace(TEST_CONFIG, style="alt", seed=11))
    ws = tmp_path / "ws"
    out = _attribute(ws, _eval(world, ws, EvalOptions(samples=10, paraphrases=True)), capsys,
                     "--corpus", str(world.corpus))
    recall = _recall(world, out)
    assert len(recall) == 5 and all(r >= RECALL_FLOOR for r in recall.values()), recall


def test_screen_flags_unknown_rows(test_world: WorldPaths, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    truth = {t["probe_id"]: t for t in map(json.loads, test_world.truth.read_text().splitlines())}
    probes = [json.loads(line) for line in test_world.probes.read_text().splitlines()]
    sft = tmp_path / "sft.jsonl"
    sft.write_text("".join(json.dumps({"id": p["id"], "prompt": p["question"], "completion": p["answers"][0],
                                       "subject": p["subject"], "relation": p["relation"]}) + "\n" for p in probes))
    assert main(["screen", str(sft), "--model", str(test_world.model), "--dtype", "float32", "--suite",
                 str(test_world.suite), "--corpus", str(test_world.corpus), "--workspace", str(tmp_path / "ws"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    flagged = {f["row_id"]: f for f in out["flagged"]}
    absent = [pid for pid, t in truth.items() if t["tier"] == "absent"]
    known = [pid for pid, t in truth.items() if t["tier"] == "known"]
    assert sum(pid in flagged and flagged[pid]["unknown"] for pid in absent) / len(absent) >= 0.8
    assert sum(pid in flagged and flagged[pid]["unknown"] for pid in known) / len(known) <= 0.1
    conflicts = [pid for pid, t in truth.items() if t["tier"] == "conflict"]
    assert sum(pid in flagged and flagged[pid]["contradicts"] for pid in conflicts) / len(conflicts) >= 0.8
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "Q?"}\n')
    assert main(["screen", str(bad), "--model", str(test_world.model), "--workspace", str(tmp_path / "ws")]) == 2
    assert "line 1: field `answer`" in capsys.readouterr().err

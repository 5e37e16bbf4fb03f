"""Cards: every job's adapter and every fix set carry a README.md in the Hub's format, written from the records
(read back with huggingface_hub's own card readers), rewritten when a gate or a release decision lands; `workbench
card` writes one again and refuses to push offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import ENV, assert_refused, workbench
from ftworld import FtWorld
from huggingface_hub import DatasetCard, ModelCard

from finetune.fixset import load_manifest
from finetune.job import JobSpec, TrainerSpec, run_job
from workbench.cards import push_to_hub, write_model_card
from workbench.cards.dataset import licence_of
from workbench.errors import WorkbenchError
from workbench.gating import gate_runs, rerun_like
from workbench.reviews import record_release

STEPS = 3


def _metrics(card: ModelCard) -> dict[str, float]:
    return {str(r.metric_name): float(r.metric_value) for r in card.data.eval_results or []}


def test_model_card_from_the_job_then_its_gate_and_decision(w: FtWorld, tmp_path: Path) -> None:
    res = run_job(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "job"),
                          trainer=TrainerSpec(max_steps=STEPS)), w.store)
    assert res.adapter is not None
    adapter = Path(res.adapter)
    card = ModelCard.load(adapter / "README.md")
    assert "Model Card for Model ID" not in card.text  # peft's empty template is gone
    d = card.data
    assert d.library_name == "peft" and d.base_model == str(w.paths.model) and d.datasets == [w.fixset.name]
    assert "hallucination-workbench" in d.tags and "sft" in d.tags
    sft = load_manifest(w.fixset).counts["sft"]
    fixes = {t for t in d.tags if t.startswith("fixes:")}
    assert fixes and fixes == {f"fixes:{c}" for c, n in sft.items() if n and c != "replay"}  # the sft split's
    assert all(f"| {c} | {n} |" in card.text for c, n in sft.items())
    m = _metrics(card)
    assert m["held-out, base model"] == pytest.approx(res.heldout_before)
    assert m["held-out, with adapter"] == pytest.approx(res.heldout_after)
    assert m[f"known facts broken (of {res.known_checked})"] == len(res.known_broken)
    assert f"| steps | {STEPS} |" in card.text and "Not gated yet" in card.text

    # a gate on a run of this adapter rewrites the card: its verdict and the candidate's scores
    cand = rerun_like(w.store, w.run_id, adapter=str(adapter))
    gate = gate_runs(w.store, w.run_id, cand, report_dir=tmp_path / "report")
    card = ModelCard.load(adapter / "README.md")
    assert f"Gate `{gate.id}`" in card.text and f"**{gate.result.verdict}**" in card.text
    overall = gate.result.overall.metrics
    m = _metrics(card)
    assert m[f"correct (baseline {overall['correct'].baseline:.3f})"] == pytest.approx(overall["correct"].candidate,
                                                                                       abs=1e-4)
    assert "No release decision recorded" in card.text
    # so does a release decision on that gate
    record_release(w.store, reviewer="ana", run_id=cand, decision="block", reason="breaks a known fact")
    card = ModelCard.load(adapter / "README.md")
    assert "Release decision: **block** by ana" in card.text and "breaks a known fact" in card.text
    # `workbench card ADAPTER` writes the same card again from the records
    text = (adapter / "README.md").read_text()
    (adapter / "README.md").unlink()
    out = workbench("card", str(adapter), "--workspace", str(w.store.workspace), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == f"model card: {adapter / 'README.md'}" and (adapter / "README.md").read_text() == text
    # pushing an adapter of a local model needs the base's Hub id; offline, nothing is sent either way
    proc = workbench("card", str(adapter), "--push", "me/adapter", "--workspace", str(w.store.workspace),
                     env={**ENV, "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert_refused(proc, f"`{w.paths.model}` is a local path", "--base-model OWNER/NAME")
    with pytest.raises(WorkbenchError, match="HF_HUB_OFFLINE is set"):
        push_to_hub(adapter, "me/adapter", base_model="org/base", store=w.store)
    write_model_card(adapter, w.store, base_model="org/base")
    assert ModelCard.load(adapter / "README.md").data.base_model == "org/base"


def test_dataset_card_of_the_fix_set(w: FtWorld) -> None:
    card = DatasetCard.load(w.fixset / "README.md")  # written by build_fixset in the session's setup
    manifest = load_manifest(w.fixset)
    assert "hallucination-workbench" in card.data.tags and card.data.task_categories == ["text-generation"]
    for split, cats in manifest.counts.items():
        total = sum(cats.values())
        assert f"| {split} | {total} | {manifest.train_rows[split]} | {total - manifest.train_rows[split]} |" \
            in card.text
        for cat, n in cats.items():
            assert f"| {split} | {cat} | {n} |" in card.text
    assert f"evaluation run: `{manifest.run_id}`" in card.text and manifest.sha256 in card.text
    sources = {p["source"] for p in w.store.probe_rows(manifest.run_id)}
    assert sources and all(f"- `{s}`: not known" in card.text for s in sources)  # the world's file: no licence


def test_licences_of_known_sources() -> None:
    assert licence_of("truthfulqa/truthful_qa") == "apache-2.0"
    assert licence_of("data/SimpleQA-test.csv") == "mit"
    assert licence_of("google-research-datasets/nq_open") == "cc-by-sa-3.0"
    assert licence_of("my/probes.jsonl") is None


def test_cli_card_and_push_refused_offline(w: FtWorld, tmp_path: Path) -> None:
    ws = str(w.store.workspace)
    (w.fixset / "README.md").unlink()
    out = workbench("card", str(w.fixset), "--workspace", ws, "--json", timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["kind"] == "dataset" and (w.fixset / "README.md").is_file()
    assert_refused(workbench("card", str(w.fixset), "--push", "me/fix", "--workspace", ws,
                             env={**ENV, "HF_HUB_OFFLINE": "1"}, timeout=120),
                   "cannot push", "HF_HUB_OFFLINE")
    assert_refused(workbench("card", str(tmp_path), "--workspace", ws, timeout=120),
                   str(tmp_path), "neither a job's adapter")
    (tmp_path / "fixset.json").write_text('{"counts": ')  # a broken record: named, no traceback
    assert_refused(workbench("card", str(tmp_path), "--workspace", ws, timeout=120),
                   f"{tmp_path / 'fixset.json'}: not a JSON object")

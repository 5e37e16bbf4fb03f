"""`trainer.adapter_scale` (WiSE-FT; finetune/job/scale.py): the trained LoRA delta scaled before the
adapter is saved and scored; `auto` picks the smallest scale that still fixes `early_stop.min_targets_fixed` of the
job's own targets, and the record says which and why."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from benchload import run_main
from ftworld import ALL_LINEAR, FtWorld

from finetune import records
from finetune.fixset import load_manifest
from finetune.job import EarlyStopSpec, JobSpec, LoraSpec, TrainerSpec, from_dict, load_spec, run_job
from finetune.job.scale import AUTO_SCALES, choose_scale, decide, write_scale
from finetune.job.scoring import KnownFacts, Targets
from workbench.errors import WorkbenchError


def test_adapter_scale_values() -> None:
    base = {"fixset": "f", "output_dir": "o"}
    for bad in ("half", 0, 1.5, -0.5, True):
        with pytest.raises(WorkbenchError, match=r"`trainer.adapter_scale`.*must be `auto` or a number in \(0, 1\]"):
            from_dict({**base, "trainer": {"adapter_scale": bad}})
    assert from_dict({**base, "trainer": {"adapter_scale": "auto"}}).trainer.adapter_scale == "auto"
    assert from_dict({**base, "trainer": {"adapter_scale": 0.5}}).trainer.adapter_scale == 0.5
    assert from_dict(base).trainer.adapter_scale is None  # per method, decided by resolve (tests/test_jobs.py)


def _load(w: FtWorld, adapter: Path) -> tuple[Any, Any]:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(w.paths.model))
    tok.pad_token = tok.pad_token or tok.eos_token
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(w.paths.model)), str(adapter))
    return tok, model.eval()


def test_choose_scale_reads_the_trained_adapter_then_the_smallest_scales_up_to_the_first_that_fixes_enough() -> None:
    read: list[float] = []

    def score(table: dict[float, float]) -> Callable[[float], float]:
        def at(a: float) -> float:
            read.append(a)
            return table[a]
        return at

    got = choose_scale(score({1.0: 1.0, 0.25: 0.5, 0.5: 0.85, 0.75: 0.9}), 0.8)
    assert (got.scale, read, got.fixed_by_scale) == (0.5, [1.0, 0.25, 0.5], {1.0: 1.0, 0.25: 0.5, 0.5: 0.85})
    assert "85%" in got.reason and "100% at 1.0" in got.reason
    read.clear()
    none = choose_scale(score({1.0: 0.7, 0.25: 0.1, 0.5: 0.3, 0.75: 0.6}), 0.8)
    assert none.scale == 1.0 and read == [1.0, *AUTO_SCALES] and "no scale below 1.0 fixes >= 80%" in none.reason
    read.clear()
    assert choose_scale(score({1.0: float("nan")}), 0.8).scale == 1.0 and read == [1.0]  # no targeted rows
    # decide: 1.0 is nothing to record; a number names where it came from; `auto` reads the trained adapter's
    # score when given (the rollback guard's), not again
    assert decide(1.0, None, lambda m: 0.0, 0.8) is None
    half = decide(0.5, None, lambda m: 0.0, 0.8, source="the job spec (`trainer.adapter_scale`)")
    assert half is not None and half.scale == 0.5 and "from the job spec" in half.reason

    def boom(model: Any) -> float:
        raise AssertionError("scored a scale below 1.0 although the given score for 1.0 is nan")

    kept = decide("auto", None, boom, 0.8, full=float("nan"))  # the guard's score stands for 1.0: not re-scored
    assert kept is not None and kept.scale == 1.0 and kept.fixed_by_scale == {1.0: pytest.approx(float("nan"),
                                                                                                   nan_ok=True)}


@pytest.mark.slow
def test_auto_scale_keeps_the_smallest_scale_that_fixes_the_targets(w: FtWorld, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever scale `auto` keeps on this world, it is the rule's pick from the scores it read: the smallest of
    AUTO_SCALES fixing the floor (80%, the default) with every smaller one short of it, or 1.0 when none does. The
    score at 1.0 is the rollback guard's evaluation of the end state (`known_every` = the job's steps), not
    scored again."""
    from datasets import load_from_disk
    from peft.helpers import rescale_adapter_scale

    calls: list[float] = []
    real = Targets.fixed

    def counted(self: Targets, model: Any) -> float:
        calls.append(v := real(self, model))
        return v

    monkeypatch.setattr(Targets, "fixed", counted)
    floor = EarlyStopSpec().min_targets_fixed
    spec = JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "job"), method="sft",
                   lora=LoraSpec(target_modules=ALL_LINEAR), trainer=TrainerSpec(max_steps=100, adapter_scale="auto"),
                   early_stop=EarlyStopSpec(known_every=100))
    result = run_job(spec, w.store)
    assert result.status == "done" and result.adapter
    event = next(e for e in records.events(w.store, result.job_id) if e.kind == "adapter_scale")
    scores = {float(a): v for a, v in (event.data or {})["fixed_by_scale"].items()}
    a = result.adapter_scale
    assert (event.data or {})["scale"] == a and a in (*AUTO_SCALES, 1.0)
    below = sorted(s for s in scores if s < 1.0)
    if a < 1.0:  # the smallest scale tried that fixes >= the floor; every smaller one fell short
        assert scores[a] >= floor and below[-1] == a and all(scores[s] < floor for s in below[:-1])
        assert f"{scores[a]:.0%}" in (result.adapter_scale_reason or "")
    else:  # none of them did
        assert below == sorted(AUTO_SCALES) and all(scores[s] < floor for s in below)
    assert "`auto` from the job spec" in (result.adapter_scale_reason or "")
    # the guard scored step 0 and the end (step 100); auto read that score for 1.0 and scored the scales below
    guard = dict((s, v) for s, _, v in records.metrics(w.store, result.job_id, "targets_fixed"))
    assert sorted(guard) == [0, 100] and scores[1.0] == guard[100]
    assert len(calls) == 2 + len(below), calls
    # what is saved is the scaled adapter: lora_alpha x a, and reloaded it fixes what the job scored at a
    config = json.loads((Path(result.adapter) / "adapter_config.json").read_text())
    trained = load_spec(Path(result.output_dir) / "job.yaml").lora.alpha  # the alpha the job decided and trained
    assert trained == 32 and config["lora_alpha"] == pytest.approx(trained * a)
    tok, model = _load(w, Path(result.adapter))
    manifest = load_manifest(w.fixset)
    assert Targets.of(load_from_disk(str(w.fixset))["sft"], manifest, tok).fixed(model) == pytest.approx(scores[a])
    # and the broken known facts in the record are the scaled adapter's
    known = KnownFacts(manifest, tok)
    with model.disable_adapter():
        before = known.correct(model)
    assert result.known_broken == sorted(before - known.correct(model))
    # a scaled copy on disk is the in-memory rescale (trainable token rows unscaled in both)
    half = tmp_path / "half"
    shutil.copytree(result.adapter, half)
    write_scale(half, 0.5)
    ids = tok("Q: What is the capital of Vexazan? A:", return_tensors="pt")["input_ids"]
    _, half_model = _load(w, half)
    with torch.no_grad(), rescale_adapter_scale(model, 0.5):
        want = model(input_ids=ids).logits
    with torch.no_grad():
        got = half_model(input_ids=ids).logits
        full = model(input_ids=ids).logits
    assert torch.allclose(got, want, atol=1e-5) and not torch.allclose(got, full, atol=1e-3)


def test_bench_refuses_bad_scales_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main("adapter_scale", ["/nonexistent/runs/x", "--scales", "0,0.5"], monkeypatch, capsys)
    assert code == 2 and "--scales must lie in (0, 1]" in err, err[-2000:]

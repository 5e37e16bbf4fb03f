"""Staged jobs on the test world: the spec, one adapter from an SFT and a DPO stage, the later stage counting its
breakage against the base model and holding the earlier stage's answers, resume after a SIGKILL in the second stage,
and the in-batch replay KL term (its cross-entropy is trl's; its top-k KL is close to the exact one)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from ftworld import (
    ALL_LINEAR,
    RESUME_TOLERANCE,
    FtWorld,
    adapter_weights,
    max_diff,
    resume_job,
    start_job,
    wait_for,
)

from finetune import records
from finetune.job import from_dict, load_spec, read_result, resolve, resolve_job, run_job, save_spec
from finetune.job.checkpoint import COMPLETE
from finetune.job.resolve import StagedJob, stage_dir, stage_spec
from workbench.errors import WorkbenchError

STEPS = 16


def _staged(w: FtWorld, out: Path, **extra: Any) -> Any:
    """sft then dpo on every linear layer, STEPS each, the known-facts stop and rollback off (test_known_facts.py)."""
    return from_dict({"fixset": str(w.fixset), "output_dir": str(out), "method": "staged",
                      "stages": [{"method": "sft"}, {"method": "dpo", "trainer": {"learning_rate": 2e-3}}],
                      "lora": {"target_modules": ALL_LINEAR},
                      "trainer": {"max_steps": STEPS, "learning_rate": 3e-3},
                      "early_stop": {"known_every": 0}, **extra}, where="test")


def test_spec_checks_and_stage_overrides(tmp_path: Path) -> None:
    base = {"fixset": "fix", "output_dir": "out"}
    with pytest.raises(WorkbenchError, match="`method: staged` needs `stages`"):
        from_dict({**base, "method": "staged"})
    with pytest.raises(WorkbenchError, match="`stages` is for `method: staged`"):
        from_dict({**base, "method": "sft", "stages": [{"method": "dpo"}]})
    with pytest.raises(WorkbenchError, match=r"stages\[0\]\.method"):
        from_dict({**base, "method": "staged", "stages": [{"method": "staged"}]})
    spec = from_dict({**base, "method": "staged", "trainer": {"learning_rate": 1e-3, "max_steps": 50},
                      "stages": [{"method": "sft"}, {"method": "dpo", "trainer": {"max_steps": 7}}]})
    first, second = stage_spec(spec, 0), stage_spec(spec, 1)
    # a stage takes the job's settings, with its own where it gives one
    assert (first.method, first.trainer.max_steps, first.trainer.learning_rate) == ("sft", 50, 1e-3)
    assert (second.method, second.trainer.max_steps, second.trainer.learning_rate) == ("dpo", 7, 1e-3)
    # the stage before the last keeps its whole delta for the next to continue; the last its scale by default
    assert first.trainer.adapter_scale == 1.0 and second.trainer.adapter_scale is None
    assert first.init_adapter is None and second.init_adapter == str(stage_dir(spec, 0) / "adapter")
    assert Path(second.output_dir).name == "2-dpo" and not second.stages
    # saved and read back (a job.yaml): a stage still names only what it overrides, so it still inherits
    path = save_spec(spec, tmp_path / "job.yaml")
    (tmp_path / "fix2").mkdir()
    data = yaml.safe_load(path.read_text())
    assert data["stages"][1]["trainer"] == {"max_steps": 7}
    data["stages"][1]["fixset"] = "fix2"
    path.write_text(yaml.safe_dump(data))
    again = load_spec(path)
    assert again.stages[1].trainer.model_fields_set == {"max_steps"}
    assert again.stages[1].fixset == str((tmp_path / "fix2").resolve())  # relative to the YAML, as `fixset` is


def test_staged_job_one_adapter_both_stages_held(w: FtWorld, tmp_path: Path) -> None:
    out = tmp_path / "staged"
    planned = resolve_job(_staged(w, out))
    assert isinstance(planned, StagedJob) and [s.method for s in planned.stages] == ["sft", "dpo"]
    with pytest.raises(WorkbenchError, match="resolved stage by stage"):
        resolve(_staged(w, out))
    result = run_job(_staged(w, out), w.store)
    assert result.status == "done" and result.method == "staged" and result.steps == 2 * STEPS
    first, second = (read_result(stage_dir(planned.spec, i)) for i in range(2))
    assert first is not None and second is not None
    assert [s["method"] for s in result.stages] == ["sft", "dpo"]
    # one adapter: the last stage's, published whole; it differs from the first stage's (the DPO stage trained it)
    assert result.adapter == str(out / "adapter") and (out / "adapter" / COMPLETE).is_file()
    assert max_diff(adapter_weights(out / "adapter"), adapter_weights(Path(str(second.adapter)))) == 0.0
    assert max_diff(adapter_weights(out / "adapter"), adapter_weights(Path(str(first.adapter)))) > 0
    # the DPO stage counted against what the base model got right (the SFT stage's start), not its own start
    assert second.known_right_before == first.known_right_before and first.known_right_before
    assert result.known_broken == second.known_broken
    # it held the SFT stage's answers by the earlier-stage NLL term, and the staged record says each stage
    assert records.metrics(w.store, second.job_id, "earlier/nll")
    assert not records.metrics(w.store, first.job_id, "earlier/nll")
    kinds = [e.kind for e in records.events(w.store, result.job_id)]
    assert kinds[0] == "start" and kinds.count("stage") == 4 and kinds[-1] == "done"
    assert records.get_job(w.store, result.job_id)["method"] == "staged"
    card = (out / "adapter" / "README.md").read_text()
    assert "staged" in card and "sft" in card and "dpo" in card
    with pytest.raises(WorkbenchError, match="already holds a job"):
        run_job(_staged(w, out), w.store)


@pytest.mark.slow
def test_resume_after_sigkill_in_the_second_stage(w: FtWorld, tmp_path: Path) -> None:
    reference_out = tmp_path / "reference"
    run_job(_staged(w, reference_out, checkpoint_every=4), w.store)
    reference = adapter_weights(reference_out / "adapter")
    out = tmp_path / "job"
    spec = _staged(w, out, checkpoint_every=4)
    job = save_spec(spec, tmp_path / "job.yaml")
    proc = start_job(w, job, step_delay=0.1)
    wait_for(stage_dir(spec, 1) / "checkpoints" / "checkpoint-4" / COMPLETE, proc)
    time.sleep(0.25)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (out / "adapter").exists()
    assert read_result(stage_dir(spec, 0)) is not None and read_result(stage_dir(spec, 1)) is None
    result = resume_job(w, job)
    assert result.status == "done" and result.steps == 2 * STEPS
    assert str(result.stages[1]["resumed_from"]).endswith("checkpoint-4")
    diff = max_diff(reference, adapter_weights(out / "adapter"))
    print(f"staged resume after SIGKILL in stage 2: max abs diff {diff:.3g}")
    assert diff < RESUME_TOLERANCE
    messages = [e.message for e in records.events(w.store, result.job_id) if e.kind == "stage"]
    assert any("stage 1 of 2, sft: done before" in m for m in messages)


def test_inbatch_kl_cross_entropy_is_trls_and_topk_kl_is_close(w: FtWorld, tmp_path: Path) -> None:
    """The in-batch term's cross-entropy equals trl's SFT loss on the same batch, and its top-k KL the exact
    full-vocabulary KL within a few percent, on an adapter that moved the distribution."""
    import torch.nn.functional as F
    from datasets import load_from_disk
    from trl.trainer.sft_trainer import SFTTrainer

    from finetune.job.methods.sft import SFT
    from finetune.job.run import _patch_trainable_token_heads, load_base, with_adapter
    from finetune.records import JobRecorder

    spec = from_dict({"fixset": str(w.fixset), "output_dir": str(tmp_path / "kl"), "method": "sft",
                      "lora": {"target_modules": ALL_LINEAR}, "trainer": {"max_steps": 1, "replay_kl": 10}})
    job = resolve(spec)
    tokenizer, model = load_base(job)
    method = SFT(job, tokenizer, load_from_disk(str(w.fixset))["sft"], JobRecorder(None, "t"))
    model, peft_config = with_adapter(model, job)
    trainer = method.trainer(model=model, args=method.config(tmp_path / "ck"), peft_config=peft_config, callbacks=[])
    _patch_trainable_token_heads(trainer.model)  # as the run skeleton does: trl's fused head reads the bias
    assert trainer.kl_rows is not None and trainer.kl_rows.keys
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    trainer.model.train()
    with torch.no_grad():  # move the adapter off zero so the two distributions differ
        for p in trainer.model.parameters():
            if p.requires_grad:
                p.add_(0.02 * torch.randn_like(p))
        ours = trainer._inbatch_loss(trainer.model, dict(batch), False, None)
        keys = trainer.kl_rows.keys
        trainer.kl_rows.keys = set()  # no replay row: the cross-entropy alone
        ce = trainer._inbatch_loss(trainer.model, dict(batch), False, None)
        trainer.kl_rows.keys = keys
        theirs = SFTTrainer.compute_loss(trainer, trainer.model, dict(batch))
        assert abs(float(ce) - float(theirs)) < 1e-4 * max(1.0, abs(float(theirs)))
        ids, mask = batch["input_ids"], batch["attention_mask"]
        rows = [b for b in range(ids.shape[0]) if tuple(ids[b][mask[b].bool()].tolist()) in keys]
        assert rows
        logp = F.log_softmax(trainer.model(input_ids=ids, attention_mask=mask).logits.float(), -1)
        with trainer.model.disable_adapter():
            ref = F.log_softmax(trainer.model(input_ids=ids, attention_mask=mask).logits.float(), -1)
        exact = float(((ref.exp() * (ref - logp)).sum(-1) * mask)[rows].sum() / mask[rows].sum())
        approx = float(trainer.kl_rows.kl(logp, ids, mask, rows))
    print(f"in-batch KL: top-k {approx:.5f} vs exact {exact:.5f}; loss {float(ours):.4f}, ce {float(ce):.4f}")
    assert exact > 1e-4 and 0.9 * exact <= approx <= exact * 1.0001
    assert abs(float(ours) - float(ce) - job.spec.trainer.replay_kl * approx) < 1e-3 * max(1.0, float(ours))


def test_staged_explain_and_bad_stage(w: FtWorld, tmp_path: Path) -> None:
    from finetune.job.resolve import explain

    spec = _staged(w, tmp_path / "x")
    lines = explain(spec).lines()
    assert any("stage 1" in ln and "sft" in ln for ln in lines) and any("stage 2" in ln and "dpo" in ln
                                                                          for ln in lines)
    bad = from_dict({**spec.to_dict(), "stages": [{"method": "sft"}, {"method": "grpo"}]})
    with pytest.raises(WorkbenchError, match=r"stage 2 \(grpo\).*no `prompts` training rows"):
        resolve_job(bad)
    assert json.loads(json.dumps(spec.to_dict()))["stages"][0] == {"method": "sft", "fixset": None, "trainer": {},
                                                                   "early_stop": {}, "grpo": {}}

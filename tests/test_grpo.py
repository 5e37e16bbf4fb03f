"""GRPO: the grader reward on hand-made completions, the rl fix set, a short GRPO run on the test
world (parameters move, held-out reward rises), the watchdogs (blanket abstention on a run forced to
abstain, KL blow-up, collapsed length), the CLI, and resume after SIGKILL."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from ftworld import (
    ALL_LINEAR,
    RESUME_TOLERANCE,
    FtWorld,
    Snapshot,
    adapter_weights,
    max_diff,
    resume_job,
    start_job,
    wait_for,
)
from transformers import TrainerCallback, TrainerControl, TrainerState

from finetune import records
from finetune.fixset import PROMPT_COLUMNS, build_fixset, load_manifest
from finetune.job import (
    EarlyStopSpec,
    GRPOSpec,
    JobSpec,
    LoraSpec,
    TrainerSpec,
    from_dict,
    load_spec,
    run_job,
    save_spec,
)
from finetune.job.anchor import ANCHOR_NLL
from finetune.job.anchor import NLLAnchor as ReplayAnchor
from finetune.job.checkpoint import COMPLETE
from finetune.job.methods.grpo_watchdog import REPLAY_KL, GRPOWatchdog
from finetune.job.methods.rewards import REPLAY_ABSTENTION, SAMPLED_LENGTH, FormatReward, GraderReward
from workbench.errors import WorkbenchError
from workbench.grading import MatchGrader

STOP = ["."]
EOS = 3


@pytest.fixture(scope="module")
def rl_fix(w: FtWorld, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rl") / "fix-rl"
    build_fixset(w.store, w.run_id, out, strategy="rl")
    return out


def _spec(fixset: Path, out: Path, steps: int, **grpo: Any) -> JobSpec:
    return JobSpec(fixset=str(fixset), output_dir=str(out), method="grpo",
                   lora=LoraSpec(r=8, alpha=16, target_modules=ALL_LINEAR),
                   trainer=TrainerSpec(max_steps=steps, learning_rate=3e-3, per_device_batch_size=64),
                   grpo=GRPOSpec(num_generations=8, max_completion_length=10, **grpo),
                   early_stop=EarlyStopSpec(eval_every=0))


# -- rewards on hand-made completions ------------------------------------------------------------------


def test_grader_reward_each_grade_and_penalty() -> None:
    grader = MatchGrader(abstention_phrases=("i don't know",))
    prompts = ["Q: What is the capital of Zorazan? A:"] * 5
    completions = [" feneadel. q: what is", " i don't know.", " caloista.", "", " caloista or feneadel."]
    answers = [["Feneadel"]] * 5
    wrong = [["Caloista"]] * 5
    reward = GraderReward(grader, STOP)
    assert reward(prompts, completions, answers, wrong) == [1.0, 0.0, -1.0, 0.0, -1.0]  # text after the stop is cut
    harsh = GraderReward(grader, STOP, penalty=2.5)
    assert harsh(prompts, completions, answers, wrong) == [1.0, 0.0, -2.5, 0.0, -2.5]
    # The metrics see only sampled completions: the last of each group of 4 is guidance.
    logged: dict[str, float] = {}
    guided = GraderReward(grader, STOP, num_generations=4, guided=1)
    guided(prompts[:4] * 2, [" i don't know.", " feneadel.", " feneadel.", " i don't know."] * 2, answers * 2,
           source=["replay"] * 8, completion_ids=[[5, 6]] * 8, log_metric=logged.__setitem__)
    assert logged[REPLAY_ABSTENTION] == pytest.approx(1 / 3) and logged["correct/replay"] == pytest.approx(2 / 3)
    assert logged[SAMPLED_LENGTH] == 2.0


def test_rewards_read_chat_completions_as_their_assistant_turn() -> None:
    """trl hands a conversational fix set's reward functions message lists: graded on the assistant's text, and a
    chat answer stops cleanly at its end-of-turn token (EOS), not at a stop string."""
    grader = MatchGrader(abstention_phrases=("i don't know",))
    prompts = [[{"role": "user", "content": "What is the capital of Zorazan?"}]] * 4
    completions = [[{"role": "assistant", "content": c}] for c in
                   ("The capital is Feneadel.", "I don't know.", "It is Caloista. Q: who", "Feneadel")]
    reward = GraderReward(grader, STOP)
    assert reward(prompts, completions, [["Feneadel"]] * 4, [["Caloista"]] * 4) == [1.0, 0.0, -1.0, 1.0]
    fmt = FormatReward(STOP, EOS)
    # clean; cut by length (no EOS); text after the stop; no stop string but the end-of-turn EOS: clean in chat
    assert fmt(prompts, completions, completion_ids=[[7, EOS], [8, 9], [7, 8, EOS], [7, EOS]]) == [1.0, 0.0, 0.0, 1.0]


def test_format_reward_pays_for_a_clean_stop() -> None:
    fmt = FormatReward(STOP, EOS)
    completions = [" feneadel.", " feneadel. q: who", " feneadel", " feneadel.", "."]
    ids = [[7, 8, EOS], [7, 8, 9, 10, EOS], [7, EOS], [7, 8, 9, 9], [8, EOS]]
    # clean; text after the stop; no stop string; cut by max_completion_length (no EOS); nothing before the stop
    assert fmt(["p"] * 5, completions, completion_ids=ids) == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_grpo_spec_validation() -> None:
    base = {"fixset": "f", "output_dir": "o", "method": "grpo"}
    with pytest.raises(WorkbenchError, match=r"must be a multiple of grpo.num_generations \(8\)"):
        from_dict({**base, "trainer": {"per_device_batch_size": 12}})
    with pytest.raises(WorkbenchError, match=r"`grpo.abstention_guidance` must be in \[0, grpo.num_generations=4\]"):
        from_dict({**base, "grpo": {"num_generations": 4, "abstention_guidance": 5}})
    with pytest.raises(WorkbenchError, match=r"`grpo.loss_type`.*Did you mean `dapo`"):
        from_dict({**base, "grpo": {"loss_type": "dappo"}})
    with pytest.raises(WorkbenchError, match=r"unknown key `grpo.penalty`"):
        from_dict({**base, "grpo": {"penalty": 2}})
    with pytest.raises(WorkbenchError, match=r"`grpo.replay_anchor` must be >= 0"):
        from_dict({**base, "grpo": {"replay_anchor": -1}})
    spec = from_dict({**base, "grpo": {"hallucination_penalty": 2, "use_vllm": False}})
    assert spec.grpo.hallucination_penalty == 2.0 and spec.grpo.use_vllm is False


def test_watchdog_kl_and_length_on_logs() -> None:
    events: list[tuple[str, str]] = []
    dog = GRPOWatchdog(lambda kind, msg, data: events.append((kind, msg)), max_replay_abstention=0.5, max_kl=1.0,
                       min_length=2.0, window=2)
    state, control = TrainerState(), TrainerControl()
    for step, kl in enumerate([0.1, 0.9, 1.5, 1.6], 1):
        state.global_step = step
        dog.on_log(None, state, control, logs={REPLAY_KL: kl, SAMPLED_LENGTH: 3.0})  # type: ignore[arg-type]
    assert control.should_training_stop and dog.stopped is not None and dog.stopped.kind == "kl_blowup"
    assert dog.stopped.step == 3 and "raise grpo.beta" in events[0][1]
    dog = GRPOWatchdog(lambda kind, msg, data: events.append((kind, msg)), max_replay_abstention=0.5, max_kl=1.0,
                       min_length=2.0, window=2)
    control = TrainerControl()
    for length in [3.0, 1.0, 1.2]:
        dog.on_log(None, state, control, logs={SAMPLED_LENGTH: length})  # type: ignore[arg-type]
    assert dog.stopped is not None and dog.stopped.kind == "collapsed_length"


# -- the rl fix set ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rl_fixset_prompts(w: FtWorld, rl_fix: Path) -> None:
    from datasets import load_from_disk

    d = load_from_disk(str(rl_fix))
    rows = list(d["prompts"])
    assert tuple(d["prompts"].column_names) == PROMPT_COLUMNS and len(d["sft"]) == len(d["dpo"]) == 0
    targeted = [r for r in rows if r["source"] == "targeted"]
    replay = [r for r in rows if r["source"] == "replay"]
    assert targeted and replay and {r["category"] for r in replay} == {"replay"}
    assert all(r["answers"] and r["prompt"].startswith("Q: ") for r in rows)
    assert {r["split"] for r in targeted} == {"train", "heldout"} and {r["split"] for r in replay} == {"train"}
    assert len(replay) == sum(r["split"] == "train" for r in targeted)  # replay ratio 1 under rl
    m = load_manifest(rl_fix)
    assert m.strategy == "rl" and m.has_abstention and m.grader == "match" and m.abstention_phrases
    assert m.train_rows["prompts"] == len(replay) + sum(r["split"] == "train" for r in targeted)


@pytest.mark.slow
def test_replay_anchor_is_the_answer_nll_cycled_by_step(w: FtWorld, rl_fix: Path) -> None:
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(w.paths.model))
    model = AutoModelForCausalLM.from_pretrained(str(w.paths.model))
    replay = sorted({(r["prompt"], " " + r["answers"][0] + ".") for r in load_from_disk(str(rl_fix))["prompts"]
                     if r["source"] == "replay"})[:3]
    anchor = ReplayAnchor(tok, replay, batch=2)

    def nll(rows: list[tuple[str, str]]) -> float:  # one row at a time, no padding: the reference
        total, count = 0.0, 0
        for p, c in rows:
            prompt, answer = tok(p)["input_ids"], tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            with torch.no_grad():
                logp = model(torch.tensor([prompt + answer])).logits[0].log_softmax(-1)
            total -= sum(float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(answer))
            count += len(answer)
        return total / count

    with torch.no_grad():
        assert float(anchor.nll(model, 0)) == pytest.approx(nll(replay[:2]), rel=1e-4)
        assert float(anchor.nll(model, 1)) == pytest.approx(nll([replay[2], replay[0]]), rel=1e-4)
    anchor.nll(model, 0).backward()  # a loss term: gradients reach the weights
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0


# -- GRPO runs -----------------------------------------------------------------------------------------



@pytest.mark.slow
def test_short_grpo_run_moves_parameters_and_raises_reward(w: FtWorld, rl_fix: Path, tmp_path: Path) -> None:
    snap = Snapshot()
    result = run_job(_spec(rl_fix, tmp_path / "job", 50), w.store, callbacks=[snap])
    assert result.status == "done" and result.steps == 50 and result.adapter, result.message
    moved = [n for n in snap.before if not torch.equal(snap.before[n], snap.after[n])]
    assert len(moved) == len(snap.before) and any("trainable_tokens" in n for n in moved)
    # Greedy reward on the held-out prompts: hallucinations (-1) turn into abstentions (0) or answers (+1).
    assert result.heldout_before is not None and result.heldout_after is not None
    print(f"held-out reward {result.heldout_before:.3f} -> {result.heldout_after:.3f}")
    assert result.heldout_after > result.heldout_before + 0.1
    # The adapter is a standard peft adapter; every logged metric is in the store.
    cfg = json.loads((Path(result.adapter) / "adapter_config.json").read_text())
    assert cfg["peft_type"] == "LORA" and cfg["trainable_token_indices"]
    assert (Path(result.adapter) / COMPLETE).is_file()  # `workbench watch` gates only whole adapters
    names = {name for _, name, _ in records.metrics(w.store, result.job_id)}
    assert {"reward", "rewards/grader/mean", "rewards/format/mean", REPLAY_ABSTENTION, REPLAY_KL, ANCHOR_NLL,
            "heldout_reward"} <= names
    kinds = [e.kind for e in records.events(w.store, result.job_id)]
    assert kinds[0] == "start" and kinds[-1] == "done"


class AbstainForTests(TrainerCallback):
    """Forces every generation to be the abstention phrase (a policy that has learned to abstain everywhere)."""

    def __init__(self, phrase_ids: list[int]) -> None:
        self.ids = phrase_ids

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        def generate(input_ids: torch.Tensor, **kwargs: Any) -> torch.Tensor:
            tail = torch.tensor([self.ids] * input_ids.shape[0], dtype=input_ids.dtype)
            return torch.cat([input_ids, tail], dim=1)

        model.generate = generate


@pytest.mark.slow
def test_blanket_abstention_watchdog_fires(w: FtWorld, rl_fix: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(w.paths.model))
    ids = tok(" i don't know.", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    result = run_job(_spec(rl_fix, tmp_path / "job", 20, watch_window=2), w.store, callbacks=[AbstainForTests(ids)])
    assert result.status == "stopped" and result.stop_reason == "reward_hacking" and result.steps == 2
    assert "abstain on 100% of the replay prompts" in result.message and result.adapter
    events = records.events(w.store, result.job_id)
    hack = [e for e in events if e.kind == "reward_hacking"]
    assert len(hack) == 1 and hack[0].data is not None and hack[0].data["value"] == 1.0


@pytest.mark.slow
def test_cli_fix_rl_then_train(w: FtWorld, tmp_path: Path) -> None:
    """`workbench fix --strategy rl --train`, as a user runs it (a subprocess with a time limit), builds GRPO prompts
    and trains on them; its summary is `workbench train`'s (`JobResult.summary_lines`: the settings' rules, the
    adapter), as the job's result.json holds it."""
    from clirun import workbench

    from finetune.job import read_result

    proc = workbench("fix", w.run_id, "--out", str(tmp_path / "fix"), "--workspace", str(w.store.workspace),
                     "--strategy", "rl", "--train", "--steps", "2", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = read_result(tmp_path / "fix" / "job")
    assert result is not None and result.status == "done" and result.steps == 2
    written = (tmp_path / "fix" / "job" / "job.yaml").read_text()
    assert "method: grpo" in written and "checkpoint_minutes: 10.0" in written  # a long job killed midway resumes
    summary = result.summary_lines()
    assert proc.stdout.splitlines()[-len(summary):] == summary, proc.stdout
    assert f"  settings: {result.size_rule}; max_steps 2 (given by the job spec: `trainer.max_steps`)" in summary[1]


# -- resume after SIGKILL ------------------------------------------------------------------------------


@pytest.mark.slow
def test_grpo_resume_after_sigkill(w: FtWorld, rl_fix: Path, tmp_path: Path) -> None:
    steps, every = 8, 4
    ref = run_job(_spec(rl_fix, tmp_path / "ref", steps).model_copy(update={"checkpoint_every": every}), w.store)
    assert ref.adapter is not None
    spec = _spec(rl_fix, tmp_path / "job", steps).model_copy(update={"checkpoint_every": every})
    job = save_spec(spec, tmp_path / "job.yaml")
    proc = start_job(w, job, step_delay=1.0)
    wait_for(tmp_path / "job" / "checkpoints" / f"checkpoint-{every}" / COMPLETE, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "job" / "adapter").exists()
    res = resume_job(w, job)
    assert res.status == "done" and res.steps == steps
    assert str(res.resumed_from).endswith(f"checkpoint-{every}")
    diff = max_diff(adapter_weights(Path(ref.adapter)), adapter_weights(tmp_path / "job" / "adapter"))
    print(f"grpo resume after SIGKILL: max abs diff to an uninterrupted run {diff:.3g}")
    assert diff < RESUME_TOLERANCE
    kinds = [e.kind for e in records.events(w.store, res.job_id)]
    assert "resume" in kinds and kinds[-1] == "done"



@pytest.mark.slow
def test_train_fixes_runs_grpo_on_the_rl_fix_set(w: FtWorld, tmp_path: Path) -> None:
    """The loop `make demo` runs: sft on the auto fix set, grpo on the rl one (the auto set has no prompts)."""
    from finetune.loop import train_fixes

    fixes = train_fixes(w.store, w.run_id, tmp_path, ("sft", "grpo"), max_steps=3)
    assert fixes.manifest.strategy == "auto" and fixes.manifest.train_rows["prompts"] == 0
    assert fixes.rl_manifest is not None and fixes.rl_manifest.strategy == "rl"
    assert fixes.rl_manifest.train_rows["prompts"] > 0
    assert {m: (j.status, j.steps, j.adapter is not None) for m, j in fixes.jobs.items()} == {
        "sft": ("done", 3, True), "grpo": ("done", 3, True)}
    assert load_spec(tmp_path / "grpo" / "job.yaml").fixset == str((tmp_path / "fixset-rl").resolve())


@pytest.mark.slow
def test_grpo_continues_an_sft_adapter(w: FtWorld, rl_fix: Path, tmp_path: Path) -> None:
    """init_adapter: GRPO starts from the SFT adapter's weights (LoRA and token rows), then moves them."""
    sft = run_job(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "sft"), method="sft",
                          lora=LoraSpec(r=4, alpha=8, target_modules=ALL_LINEAR),
                          trainer=TrainerSpec(max_steps=5, per_device_batch_size=16),
                          early_stop=EarlyStopSpec(eval_every=0)), w.store)
    assert sft.adapter
    saved = adapter_weights(Path(sft.adapter))
    snap = Snapshot()
    spec = _spec(rl_fix, tmp_path / "rl", 3).model_copy(update={"init_adapter": sft.adapter})
    result = run_job(spec, w.store, callbacks=[snap])
    assert result.status == "done" and result.adapter
    # peft names parameters `...lora_A.default.weight`; the file drops the adapter name
    start = {n.replace(".default", ""): t for n, t in snap.before.items()}
    assert set(start) == set(saved) and all(torch.equal(start[n], saved[n]) for n in saved)
    after = adapter_weights(Path(result.adapter))
    assert set(after) == set(saved) and any(not torch.equal(after[n], saved[n]) for n in saved)
    # the saved job.yaml records the adapter's own LoRA settings, not the spec's (ignored) `lora`
    sft_lora = load_spec(tmp_path / "sft" / "job.yaml").lora
    rl_lora = load_spec(tmp_path / "rl" / "job.yaml").lora
    assert (rl_lora.r, rl_lora.alpha) == (4, 8) and rl_lora.trainable_token_indices == sft_lora.trainable_token_indices
    with pytest.raises(WorkbenchError, match=r"`init_adapter` .* is not a peft adapter directory"):
        run_job(spec.model_copy(update={"output_dir": str(tmp_path / "bad"), "init_adapter": str(tmp_path)}), w.store)

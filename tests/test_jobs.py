"""Job specs and SFT/DPO jobs on the test world: validation, parameters move, targeted probes move,
abstention, watchdogs, store records, CLI."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from ftworld import ALL_LINEAR, FtWorld, PoisonForTests, Snapshot, greedy_verdicts
from sqlalchemy import func, select

from finetune import records
from finetune.fixset import load_manifest
from finetune.fixset.manifest import INJECTION_SOURCES
from finetune.job import (
    EarlyStopSpec,
    JobSpec,
    LoraSpec,
    TrainerSpec,
    from_dict,
    load_spec,
    resolve,
    run_job,
    save_spec,
)
from finetune.job.callbacks import EarlyStopping, LossWatchdog
from finetune.job.resolve import (
    DEFAULT_EPOCHS,
    DEFAULT_TARGETS,
    MAX_DEFAULT_STEPS,
    MIN_DEFAULT_STEPS,
    WORLD,
    default_lr,
    default_steps,
    size_defaults,
)
from workbench.errors import WorkbenchError

# -- spec ---------------------------------------------------------------------------------------------


def test_spec_unknown_keys_and_bad_values(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match=r"unknown key `fixest`.*Did you mean `fixset`"):
        from_dict({"fixest": "f", "output_dir": "o"})
    with pytest.raises(WorkbenchError, match=r"unknown key `trainer.learning_rat`.*Did you mean `learning_rate`"):
        from_dict({"fixset": "f", "output_dir": "o", "trainer": {"learning_rat": 1e-3}})
    with pytest.raises(WorkbenchError,
                       match=r"`method` must be one of sft, dpo, grpo, staged, got `stf`. Did you mean `sft`"):
        from_dict({"fixset": "f", "output_dir": "o", "method": "stf"})
    with pytest.raises(WorkbenchError, match=r"`lora.r` must be >= 1"):
        from_dict({"fixset": "f", "output_dir": "o", "lora": {"r": 0}})
    with pytest.raises(WorkbenchError, match=r"`trainer.max_steps` must be an integer"):
        from_dict({"fixset": "f", "output_dir": "o", "trainer": {"max_steps": "ten"}})
    with pytest.raises(WorkbenchError, match=r"dpo_loss_type.*Did you mean `sigmoid`"):
        from_dict({"fixset": "f", "output_dir": "o", "trainer": {"dpo_loss_type": ["sigmod"]}})
    with pytest.raises(WorkbenchError, match=r"`launcher.deepspeed_zero` needs `launcher.kind: accelerate`"):
        from_dict({"fixset": "f", "output_dir": "o", "launcher": {"deepspeed_zero": 2}})
    with pytest.raises(WorkbenchError, match=r"`output_dir` is required"):
        from_dict({"fixset": "f"})
    job = tmp_path / "sub" / "job.yaml"
    job.parent.mkdir()
    job.write_text("fixset: ../fix\noutput_dir: out\ntrainer: {learning_rate: 1e-3, dpo_loss_type: sigmoid}\n")
    spec = load_spec(job)
    assert spec.fixset == str((tmp_path / "fix").resolve()) and spec.output_dir == str(job.parent / "out")
    assert spec.trainer.learning_rate == 1e-3 and spec.trainer.dpo_loss_type == ["sigmoid"]
    job.write_text("fixset: f\noutput_dir: o\nlora:\n  rank: 4\n")
    with pytest.raises(WorkbenchError, match=r"job.yaml, line 4: unknown key `lora.rank`"):
        load_spec(job)


def test_spec_bounds_refuse_resource_exhaustion(tmp_path: Path) -> None:
    """Values that would exhaust memory or never end are refused when the spec is read."""
    base = {"fixset": "f", "output_dir": "o"}
    for section, key, value, message in [
            ("lora", "r", 100_000_000, r"`lora.r` must be <= 4096, got 100000000"),
            ("trainer", "max_steps", 1e30, r"`trainer.max_steps` must be <= 1000000, got 1e\+30"),
            ("trainer", "max_steps", float("inf"), r"`trainer.max_steps` must be a finite number"),
            ("trainer", "per_device_batch_size", 10**6, r"`trainer.per_device_batch_size` must be <= 4096"),
            ("trainer", "gradient_accumulation", 10**6, r"`trainer.gradient_accumulation` must be <= 4096"),
            ("trainer", "max_length", 10**8, r"`trainer.max_length` must be <= 131072"),
            ("grpo", "num_generations", 10**6, r"`grpo.num_generations` must be <= 256"),
            ("trainer", "learning_rate", float("nan"), r"`trainer.learning_rate` must be a finite number"),
            ("trainer", "lr_scheduler", "cosin", r"`trainer.lr_scheduler` must be one of .* Did you mean `cosine`")]:
        with pytest.raises(WorkbenchError, match=message):
            from_dict({**base, section: {key: value}})
    job = tmp_path / "job.yaml"
    job.write_text("fixset: f\noutput_dir: o\nlora: {r: 100000000}\n")
    with pytest.raises(WorkbenchError, match=rf"{job}, line 3: `lora.r` must be <= 4096"):
        load_spec(job)
    job.write_text("fixset: f\noutput_dir: o\ntrainer:\n  seed: 1\n  max_steps: 100000000000\n")
    with pytest.raises(WorkbenchError, match=rf"{job}, line 5: `trainer.max_steps` must be <= 1000000"):
        load_spec(job)  # the nested key's own line


def test_old_job_yaml_still_loads(tmp_path: Path) -> None:
    """A job.yaml as the dataclass spec saved it (every key, nulls for autos) loads unchanged."""
    job = tmp_path / "job.yaml"
    job.write_text("""fixset: /w/fix
output_dir: /w/job
method: grpo
base_model: /w/model
lora: {r: 8, alpha: 16, dropout: 0.0, target_modules: [q_proj, v_proj], fan_in_fan_out: false,
  trainable_token_indices: [5, 6]}
init_adapter: null
trainer: {learning_rate: 0.001, max_steps: 300, per_device_batch_size: 64, gradient_accumulation: 1, seed: 0,
  warmup_steps: 0, lr_scheduler: constant, max_length: 128, weight_decay: 0.0, max_grad_norm: 1.0, dpo_beta: 0.1,
  dpo_loss_type: [sigmoid, sft], logging_steps: 1}
checkpoint_every: 0
keep_checkpoints: 2
early_stop: {eval_every: 0, patience: 3, min_delta: 0.0, metric: auto, collapse_nats: 5.0}
watchdog: {stop_on_nan: true, spike_factor: 5.0, spike_window: 20, spike_min_steps: 5}
grpo: {num_generations: 8, max_completion_length: 12, temperature: 0.5, beta: 0.0, loss_type: dapo,
  hallucination_penalty: 1.0, format_weight: 0.1, abstention_guidance: 1, replay_anchor: 4.0,
  replay_anchor_batch: 64, max_replay_abstention: 0.25, max_kl: 2.0, min_completion_length: 2.0, watch_window: 3,
  use_vllm: false}
device: cpu
bf16: false
gradient_checkpointing: false
launcher: {kind: inprocess, num_processes: 1, deepspeed_zero: 0, offload_optimizer: false, offload_params: false,
  mixed_precision: 'no'}
workspace: null
""")
    spec = load_spec(job)
    assert spec.method == "grpo" and spec.lora.trainable_token_indices == [5, 6] and spec.grpo.use_vllm is False
    assert load_spec(job) == from_dict(yaml.safe_load(spec.to_yaml()))  # and round-trips through save


def test_abstention_phrase_the_tokenizer_cannot_spell_names_its_words() -> None:
    """The message names the phrase and the words the tokenizer lacks, never `[UNK]` placeholders."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from finetune.job.methods.rewards import guidance_ids
    from finetune.job.resolve import abstention_token_ids

    words = Tokenizer(models.WordLevel({"[UNK]": 0, "[EOS]": 1, "i": 2, "know": 3, ".": 4}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()  # words and punctuation apart: "don't" is don ' t
    tok = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", eos_token="[EOS]")
    tokens = tok.tokenize(" i don't know")  # what a fix set records for this tokenizer
    assert "[UNK]" in tokens
    with pytest.raises(WorkbenchError) as err:
        abstention_token_ids(tok, tokens, "i don't know", field="lora.trainable_token_indices", model="m")
    msg = str(err.value)
    assert "the abstention phrase `i don't know`" in msg and "no token for `don't`" in msg
    assert "UNK" not in msg and "`know`" not in msg and "`lora.trainable_token_indices`" in msg
    assert abstention_token_ids(tok, tok.tokenize(" i know"), "i know", field="f", model="m") == [2, 3]
    with pytest.raises(WorkbenchError, match=r"`grpo.abstention_guidance`.*no token for `don't`.*guidance: 0"):
        guidance_ids(tok, "i don't know", ["."], model="m")
    assert guidance_ids(tok, "i know", ["."], model="m") == [2, 3, 4, 1]


@pytest.mark.slow
def test_a_method_without_rows_is_refused_before_anything_starts(w: FtWorld, tmp_path: Path) -> None:
    # the auto fix set has no GRPO prompts: refused before the job row, the job.yaml or the model load
    def n_jobs() -> int:
        with w.store.engine.connect() as c:
            return int(c.execute(select(func.count()).select_from(records.jobs)).scalar_one())

    jobs_before = n_jobs()
    with pytest.raises(WorkbenchError, match=r"no `prompts` training rows for method grpo; rebuild it with "
                       r"`--strategy rl`, or use method sft / dpo on it"):
        run_job(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "job"), method="grpo"), w.store)
    assert not (tmp_path / "job").exists() and n_jobs() == jobs_before


@pytest.mark.slow
def test_resolve_autos(w: FtWorld, tmp_path: Path) -> None:
    job = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path)))
    sft = job.spec  # the decided spec, as job.yaml records it; the ResolvedJob holds the same decisions typed
    assert sft.base_model == job.base_model == str(w.paths.model)
    assert sft.lora.target_modules == list(job.target_modules) == DEFAULT_TARGETS["llama"]
    # steps: DEFAULT_EPOCHS passes over the fix set's training rows at batch 32; lr: the width rule (64 <= 128)
    rows = job.manifest.train_rows["sft"]
    want = max(MIN_DEFAULT_STEPS, math.ceil(DEFAULT_EPOCHS["sft"] * rows / min(32, rows)))
    assert sft.trainer.max_steps == job.max_steps == want and job.split == "sft"
    assert job.steps_rule.startswith(f"{want} ({DEFAULT_EPOCHS['sft']:g} epochs x {rows} rows / batch {min(32, rows)}")
    assert sft.lora.fan_in_fan_out is False and sft.device == "cpu" and sft.bf16 is False
    assert sft.gradient_checkpointing is False and sft.trainer.learning_rate == 3e-3
    assert job.lr_rule == "0.003 (sft at width 64 <= 128)"
    assert sft.early_stop.known_every == 0 and sft.early_stop.rollback  # scoring during training: opt-in
    assert not sft.early_stop.known_stop
    # the fix set teaches abstention with tokens the model never trained: their rows become trainable, not
    # the apostrophe, which the world's corpus has ("'s") and the model trained
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(w.paths.model))
    assert sft.lora.trainable_token_indices == sorted(tok.convert_tokens_to_ids(["i", "don", "t", "know"]))
    assert "4 of the 5 tokens of `I don't know` look never trained" in job.tokens_decision
    dpo = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path), method="dpo")).spec
    assert dpo.lora.trainable_token_indices == []  # its pairs never abstain
    dpo_rows = load_manifest(w.fixset).train_rows["dpo"]
    assert dpo.trainer.max_steps == max(MIN_DEFAULT_STEPS, math.ceil(DEFAULT_EPOCHS["dpo"] * dpo_rows / 32))
    assert dpo.trainer.learning_rate == 3e-3 and dpo.trainer.dpo_loss_type == ["sigmoid", "sft"]
    # WiSE-FT: SFT and DPO keep the smallest scale that fixes their targets by default; a spec's wins
    assert dpo.trainer.adapter_scale == "auto" and sft.trainer.adapter_scale == "auto"
    given = JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path), method="dpo",
                    trainer=TrainerSpec(adapter_scale=1.0))
    assert resolve(given).spec.trainer.adapter_scale == 1.0
    # the record says whether `auto` is the method's default or the spec's, also from a saved (decided) job.yaml
    dpo_job = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path), method="dpo"))
    assert dpo_job.spec.trainer.adapter_scale == "auto" and dpo_job.scale_source.startswith("dpo's default")
    assert not hasattr(dpo_job, "adapter_scale")  # decided once, in the spec the job saves: no copy to drift
    assert resolve(load_spec(save_spec(dpo_job.spec, tmp_path / "dpo.yaml"))).scale_source == dpo_job.scale_source
    assert resolve(given).scale_source.startswith("the job spec")
    # resolving the decided spec (what a launcher's child process reads) decides nothing again, and still
    # names the rule behind its numbers
    again = resolve(load_spec(save_spec(sft, tmp_path / "job.yaml")))
    assert again.spec == sft and again.trainable_tokens == job.trainable_tokens
    assert (again.steps_rule, again.lr_rule) == (job.steps_rule, job.lr_rule)
    # an explicit value wins, and the record says so
    given = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path),
                            trainer=TrainerSpec(max_steps=7, learning_rate=1e-3)))
    assert (given.max_steps, given.learning_rate) == (7, 1e-3)
    assert given.steps_rule == "7 (given by the job spec: `trainer.max_steps`)"
    assert given.lr_rule == "0.001 (given by the job spec: `trainer.learning_rate`)"
    assert resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path),
                           trainer=TrainerSpec(epochs=1000))).max_steps == MAX_DEFAULT_STEPS


def test_default_steps_and_lr_rules() -> None:
    """Steps are epochs over the fix set (a batch above the rows counts as the rows), clamped; the learning
    rate falls as 1 / width above the reference width (the world's 3e-3 on a 576-wide model)."""
    assert default_steps(20, 170, 32) == (107, "107 (20 epochs x 170 rows / batch 32)")
    assert default_steps(200, 10, 32) == (200, "200 (200 epochs x 10 rows / batch 10)")
    assert default_steps(2, 10, 32) == (100, "100 (2 epochs x 10 rows / batch 10 = 2, clamped to [100, 1000])")
    assert default_steps(20, 100_000, 32)[0] == MAX_DEFAULT_STEPS
    assert default_lr("sft", 64) == (3e-3, "0.003 (sft at width 64 <= 128)")
    assert default_lr("dpo", 576) == (6.7e-4, "0.00067 (dpo 0.003 x 128 / width 576)")
    assert default_lr("grpo", 4096)[0] == 3.1e-5


#: SmolLM2-135M-Instruct's config.json, the keys resolve reads (no weights: `resolve` reads the config only when
#: the spec names the trainable token rows).
SMOLLM2_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
                  "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
                  "num_key_value_heads": 3, "vocab_size": 49152, "tie_word_embeddings": True}


@pytest.mark.slow
def test_size_rule_gives_a_pretrained_model_its_defaults(w: FtWorld, tmp_path: Path) -> None:
    """A model wider than the worlds (SmolLM2-135M's shape) gets LoRA r 8 / alpha 16 on q/v, batch 8, 4 epochs at
    least 30 steps (measured on SmolLM2, docs/benchmarks/real_model.md), 12 epochs when the fix set injects facts
    (the world's does; docs/benchmarks/guard_flow.md); the world's model keeps r 16 / 32 on every linear layer, batch
    32, 20 epochs at least 100 steps; both take sft's adapter scale `auto`; a value in the spec wins."""
    model = tmp_path / "smollm2-shape"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(SMOLLM2_CONFIG))
    rows = load_manifest(w.fixset).train_rows["sft"]
    no_rows = LoraSpec(trainable_token_indices=[])
    big = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "big"), base_model=str(model), lora=no_rows))
    assert (big.lora_r, big.lora_alpha, big.batch) == (8, 16, 8)
    assert big.target_modules == ("q_proj", "v_proj") and big.spec.lora.target_modules == ["q_proj", "v_proj"]
    assert load_manifest(w.fixset).injects("sft")
    assert big.max_steps == max(30, math.ceil(12 * rows / 8))
    assert big.steps_rule.startswith(f"{big.max_steps} (12 epochs")
    assert "12 epochs: its rows inject facts" in big.steps_rule and big.spec.trainer.epochs == 12
    assert big.spec.trainer.replay_kl == 20  # the longer job's KL weight
    assert big.spec.trainer.adapter_scale == "auto" and big.scale_source.startswith("sft's default")
    assert big.learning_rate == 6.7e-4  # the width rule, as before
    assert big.size_rule.startswith("pretrained-size (width 576 > 128): LoRA r 8 alpha 16 on the attention's q/v, "
                                    "batch 8, 4 epochs (12 when it injects facts), at least 30 steps, "
                                    "replay KL 10 (20 when it injects facts)")
    # the decided spec records them, and resolving it again (a launcher's child, --resume) decides the same
    again = resolve(load_spec(save_spec(big.spec, tmp_path / "big.yaml")))
    assert again.spec == big.spec and (again.size_rule, again.steps_rule) == (big.size_rule, big.steps_rule)
    assert (again.spec.lora.r, again.spec.trainer.per_device_batch_size) == (8, 8)
    # the same rows with no injection among them (abstention and replay only): the 4 epochs
    plain = tmp_path / "plain-fix"
    shutil.copytree(w.fixset, plain)
    manifest = json.loads((plain / "fixset.json").read_text())
    manifest["sources"]["sft"] = {k: v for k, v in manifest["sources"]["sft"].items() if k not in INJECTION_SOURCES}
    (plain / "fixset.json").write_text(json.dumps(manifest))
    four = resolve(JobSpec(fixset=str(plain), output_dir=str(tmp_path / "four"), base_model=str(model), lora=no_rows))
    assert four.max_steps == max(30, math.ceil(4 * rows / 8))
    assert four.steps_rule.startswith(f"{four.max_steps} (4 epochs") and four.spec.trainer.epochs == 4
    assert four.spec.trainer.replay_kl == 10
    # the world's model (width 64): the defaults it was tuned with, exactly
    small = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "small"), lora=no_rows))
    assert (small.lora_r, small.lora_alpha, small.batch) == (16, 32, 32)
    assert small.target_modules == tuple(DEFAULT_TARGETS["llama"])
    assert small.max_steps == max(100, math.ceil(20 * rows / min(32, rows)))
    assert small.spec.trainer.adapter_scale == "auto" and small.size_rule.startswith("world-size (width 64 <= 128)")
    # a value in the spec wins over the size rule, field by field
    given = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "given"), base_model=str(model),
                            lora=LoraSpec(r=4, target_modules=["o_proj"], trainable_token_indices=[]),
                            trainer=TrainerSpec(per_device_batch_size=2, epochs=1, adapter_scale=1.0)))
    assert (given.lora_r, given.lora_alpha, given.batch, given.target_modules) == (4, 16, 2, ("o_proj",))
    assert given.max_steps == max(30, math.ceil(rows / 2)) and given.spec.trainer.adapter_scale == 1.0
    assert given.scale_source.startswith("the job spec")


def test_size_classes() -> None:
    """Wider than the reference width is pretrained-size for sft and dpo; grpo keeps the world's defaults at any
    width (its rule is not measured on a pretrained model); an unknown width counts as a world's."""
    assert size_defaults("dpo", 576)[0].batch == 8 and size_defaults("sft", 4096)[0].lora_r == 8
    assert size_defaults("sft", 128)[0] is WORLD and size_defaults("dpo", None)[0] is WORLD
    assert size_defaults("grpo", 576) == (WORLD, "world-size (grpo keeps them at any width): LoRA r 16 alpha 32 on "
                                                 "every linear layer, batch 32, fixed steps")
    assert default_steps(4, 60, 8, 30) == (30, "30 (4 epochs x 60 rows / batch 8)")
    assert default_steps(4, 20, 8, 30) == (30, "30 (4 epochs x 20 rows / batch 8 = 10, clamped to [30, 1000])")


@pytest.mark.slow
def test_trainable_token_rows_only_for_tokens_the_model_never_trained(w: FtWorld, tmp_path: Path) -> None:
    """A model whose abstention tokens are trained (here: their rows spread out as trained rows are) gets no
    trainable rows; an all-zero row counts as never trained."""
    import shutil

    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    model = tmp_path / "model"
    shutil.copytree(w.paths.model, model)
    tok = AutoTokenizer.from_pretrained(str(model))
    ids = tok.convert_tokens_to_ids(["i", "don", "'", "t", "know"])
    weights = load_file(str(model / "model.safetensors"))
    key = next(k for k in weights if k.endswith("embed_tokens.weight"))
    emb = weights[key].clone()
    emb[ids] = torch.randn(len(ids), emb.shape[1], generator=torch.Generator().manual_seed(0))
    save_file({**weights, key: emb}, str(model / "model.safetensors"))
    job = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "o"), base_model=str(model)))
    assert job.trainable_tokens == () and "0 of the 5 tokens" in job.tokens_decision
    emb[ids[0]] = 0.0
    save_file({**weights, key: emb}, str(model / "model.safetensors"))
    job = resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "o"), base_model=str(model)))
    assert job.trainable_tokens == (ids[0],) and "`i`" in job.tokens_decision


@pytest.mark.slow
def test_resolve_refuses_before_anything_is_written(w: FtWorld, tmp_path: Path) -> None:
    spec = JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "job"), lora=LoraSpec(r=1024))
    with pytest.raises(WorkbenchError, match=r"`lora.r` is 1024, above the hidden size of .* \(64\)"):
        resolve(spec)  # the world model is 64 wide: a rank above it only costs memory
    (tmp_path / "file").write_text("")
    with pytest.raises(WorkbenchError, match=r"`output_dir` `.*file` is a file; give a directory"):
        resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "file")))
    with pytest.raises(WorkbenchError, match=r"`base_model` cannot be used: `.*nowhere` is not a base_model directory"
                       r"|base_model directory `.*nowhere` does not exist"):
        resolve(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "job"), base_model=str(tmp_path / "nowhere")))
    assert not (tmp_path / "job").exists()


# -- training -----------------------------------------------------------------------------------------


def _groups(w: FtWorld, fixset: Path) -> dict[str, set[str]]:
    from datasets import load_from_disk

    d = load_from_disk(str(fixset))
    out: dict[str, set[str]] = {}
    for split in ("sft", "dpo"):
        for r in d[split]:
            if r["split"] == "train" and r["category"] != "replay":
                out.setdefault(r["category"], set()).add(r["probe_id"])
    out["known"] = {pid for pid, t in w.truth.items() if t["tier"] == "known"}
    return out


def _acc(verdicts: dict[str, str], ids: set[str], value: str = "correct") -> float:
    return sum(verdicts[i] == value for i in ids) / len(ids)


def _train_all_linear(w: FtWorld, out: Path, method: Any, steps: int, lr: float) -> tuple[Any, JobSpec, Snapshot]:
    """A job on every linear layer; asserts it ran to the end and every trainable tensor moved. The known-facts
    stop and rollback are off (tested in test_known_facts.py): on this world they stop at 3 of 10 evaluations."""
    snap = Snapshot()
    spec = JobSpec(fixset=str(w.fixset), output_dir=str(out), method=method,
                   lora=LoraSpec(target_modules=ALL_LINEAR), trainer=TrainerSpec(max_steps=steps, learning_rate=lr),
                   early_stop=EarlyStopSpec(known_every=0))
    result = run_job(spec, w.store, callbacks=[snap])
    assert result.status == "done" and result.steps == steps and result.adapter
    assert snap.before and snap.before.keys() == snap.after.keys()
    assert [n for n in snap.before if torch.equal(snap.before[n], snap.after[n])] == []
    return result, spec, snap


@pytest.mark.slow
def test_sft_injection_and_abstention(w: FtWorld, tmp_path: Path) -> None:
    result, spec, snap = _train_all_linear(w, tmp_path / "job", "sft", 100, 3e-3)
    # Every trainable tensor moved, the abstention token rows too.
    assert any("trainable_tokens" in n for n in snap.before)
    # The adapter is standard peft: PeftModel loads it, and the hf backend evaluates with it.
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(w.paths.model)), result.adapter)
    groups = _groups(w, w.fixset)
    base, new = greedy_verdicts(w, None), greedy_verdicts(w, result.adapter)
    inject, missing, known = groups["data:underrepresented"], groups["data:missing"], groups["known"]
    print(f"SFT underrepresented {_acc(base, inject):.2f}->{_acc(new, inject):.2f}; missing abstains "
          f"{_acc(base, missing, 'not_attempted'):.2f}->{_acc(new, missing, 'not_attempted'):.2f}; known "
          f"{_acc(base, known):.2f}->{_acc(new, known):.2f}; {result.seconds} s")
    assert _acc(new, inject) >= _acc(base, inject) + 0.5
    assert _acc(new, missing, "not_attempted") >= 0.75  # says "i don't know" on trained absent facts
    assert _acc(new, known) >= _acc(base, known) - 0.05  # replay keeps what it knew
    assert _acc(new, known, "not_attempted") <= 0.05
    # Store records: the job row with lineage, per-step metrics, events.
    job = records.get_job(w.store, result.job_id)
    assert job["status"] == "done" and job["run_id"] == w.run_id and job["adapter_path"] == result.adapter
    assert job["fixset_hash"] == json.loads((w.fixset / "fixset.json").read_text())["sha256"]
    assert len(records.metrics(w.store, result.job_id, "loss")) == 100
    events = records.events(w.store, result.job_id)
    assert [e.kind for e in events] == ["start", "tokens", "adapter_scale", "done"]  # sft's default `auto`
    # the record says where max_steps and the learning rate came from (here: the spec)
    assert result.max_steps_rule == "100 (given by the job spec: `trainer.max_steps`)"
    assert result.learning_rate_rule == "0.003 (given by the job spec: `trainer.learning_rate`)"
    assert f"max_steps: {result.max_steps_rule}" in events[0].message
    assert (events[0].data or {})["learning_rate_rule"] == result.learning_rate_rule
    assert (tmp_path / "job" / "job.yaml").is_file()
    with pytest.raises(WorkbenchError, match="already holds a job; pass --resume"):
        run_job(spec, w.store)


@pytest.mark.slow
def test_dpo_moves_behavior_failures(w: FtWorld, tmp_path: Path) -> None:
    result, _, _ = _train_all_linear(w, tmp_path / "job", "dpo", 60, 2e-3)
    groups = _groups(w, w.fixset)
    targeted = groups.get("behavior:prompt-sensitive", set()) | groups.get("data:conflict", set()) \
        | groups.get("behavior:unstable", set())
    base, new = greedy_verdicts(w, None), greedy_verdicts(w, result.adapter)
    print(f"DPO targeted {_acc(base, targeted):.2f}->{_acc(new, targeted):.2f}; known "
          f"{_acc(base, groups['known']):.2f}->{_acc(new, groups['known']):.2f}; {result.seconds} s")
    assert _acc(new, targeted) >= _acc(base, targeted) + 0.2
    assert _acc(new, groups["known"]) >= _acc(base, groups["known"]) - 0.05
    assert records.metrics(w.store, result.job_id, "logps/chosen")


# -- watchdogs ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_nan_watchdog_stops_with_event(w: FtWorld, tmp_path: Path) -> None:
    spec = JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "job"), trainer=TrainerSpec(max_steps=20))
    result = run_job(spec, w.store, callbacks=[PoisonForTests(at_step=3)])
    assert result.status == "failed" and result.stop_reason == "nan" and result.adapter is None
    assert result.steps == 3 and "non-finite loss" in result.message and "learning_rate" in result.message
    kinds = [e.kind for e in records.events(w.store, result.job_id)]
    assert "nan" in kinds and records.get_job(w.store, result.job_id)["status"] == "failed"
    assert not (tmp_path / "job" / "adapter").exists()


@pytest.mark.slow
def test_early_stop_on_heldout(w: FtWorld, tmp_path: Path) -> None:
    spec = JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "job"), trainer=TrainerSpec(max_steps=40),
                   early_stop=EarlyStopSpec(eval_every=2, patience=2, min_delta=1.0,  # nothing can improve by 1.0
                                            max_known_broken=1.0))  # the known-facts guard is tested elsewhere
    result = run_job(spec, w.store)
    assert result.status == "stopped" and result.stop_reason == "early_stop" and result.steps == 4
    assert result.adapter and result.heldout_before is not None
    assert "early_stop" in [e.kind for e in records.events(w.store, result.job_id)]
    assert [s for s, _, _ in records.metrics(w.store, result.job_id, "heldout_accuracy")] == [0, 2, 4]


def _fake_state(step: int) -> Any:
    from transformers import TrainerState

    s = TrainerState()
    s.global_step = step
    return s


def test_spike_and_collapse_callbacks() -> None:
    from transformers import TrainerControl, TrainingArguments

    events: list[tuple[str, str]] = []

    def report(kind: str, message: str, data: dict[str, Any]) -> None:
        events.append((kind, message))

    args = TrainingArguments(output_dir="/tmp/unused", report_to=[])
    dog = LossWatchdog(report, spike_factor=3.0, window=10, min_steps=5)
    control = TrainerControl()
    for step, loss in enumerate([1.0, 1.1, 0.9, 1.0, 1.05, 9.0, 1.0], 1):
        dog.on_log(args, _fake_state(step), control, logs={"loss": loss})
    assert [k for k, _ in events] == ["spike"] and "step 6" in events[0][1] and not control.should_training_stop
    early = EarlyStopping(report, lambda s, v: None, score=lambda model: 0.0, metric="heldout_accuracy",
                          has_rows=False, eval_every=0, patience=1, min_delta=0, collapse_nats=2.0)
    for step, logp in enumerate([-3.0, -3.5, -4.5, -5.5], 1):
        early.on_log(args, _fake_state(step), control, logs={"logps/chosen": logp})
    assert events[-1][0] == "collapse" and control.should_training_stop and early.stopped is not None

    # batches of short and of long chosen answers alternate (SmolLM2, batch 8: -6.15 then -13.49): compared over an
    # epoch of logged batches they are no collapse; a real fall of the epoch's mean is, at the epoch's end
    epoch = EarlyStopping(report, lambda s, v: None, score=lambda model: 0.0, metric="heldout_accuracy",
                          has_rows=False, eval_every=0, patience=1, min_delta=0, collapse_nats=5.0)
    epoch.collapse_window, control = 2, TrainerControl()
    for step, logp in enumerate([-6.15, -13.49, -13.0, -6.0, -6.5, -13.2], 1):
        epoch.on_log(args, _fake_state(step), control, logs={"logps/chosen": logp})
    assert epoch.stopped is None and not control.should_training_stop
    for step, logp in enumerate([-14.0, -19.0, -12.0, -20.0], 7):
        epoch.on_log(args, _fake_state(step), control, logs={"logps/chosen": logp})
        if control.should_training_stop:  # as the trainer does
            break
    assert epoch.stopped is not None and epoch.stopped.step == 8 and control.should_training_stop
    assert "-16.50 at step 8 (mean of 2 logged batches), 6.68 nats below its start -9.82" in events[-1][1]


@pytest.mark.slow
def test_dpo_watches_the_chosen_log_prob_over_an_epoch(w: FtWorld, tmp_path: Path) -> None:
    """A DPO job's collapse window is one epoch of logged batches: its training rows over the rows a step takes,
    over `trainer.logging_steps`; the hint names 'sft' only when the loss lacks it."""
    from datasets import load_from_disk
    from transformers import AutoTokenizer

    from finetune.job.methods import method_class
    from finetune.records import JobRecorder

    tok = AutoTokenizer.from_pretrained(str(w.paths.model))
    rows = load_from_disk(str(w.fixset))["dpo"]
    n_train = sum(r == "train" for r in rows["split"])
    for batch, accumulation, logging_steps, losses in ((8, 1, 1, ["sigmoid", "sft"]), (4, 2, 3, ["sigmoid"])):
        job = resolve(JobSpec.model_validate({
            "fixset": str(w.fixset), "output_dir": str(tmp_path), "method": "dpo",
            "trainer": {"per_device_batch_size": batch, "gradient_accumulation": accumulation,
                        "logging_steps": logging_steps, "dpo_loss_type": losses}}))
        early = method_class("dpo")(job, tok, rows, JobRecorder(None, "j")).early_stopping()
        assert job.rows_per_step == batch * accumulation
        assert early.collapse_window == math.ceil(math.ceil(n_train / (batch * accumulation)) / logging_steps) > 1
        assert ("add 'sft'" in early.collapse_hint) == ("sft" not in losses)


# -- CLI ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_fix_then_train(w: FtWorld, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hallucination_workbench import main

    ws = str(w.store.workspace)
    assert main(["fix", w.run_id, "--out", str(tmp_path / "fix"), "--workspace", ws, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fixset"]["run_id"] == w.run_id
    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: fix\noutput_dir: job\nworkspace: {ws}\ntrainer: {{max_steps: 2}}\n")
    assert main(["train", str(job), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["status"] == "done" and res["steps"] == 2 and Path(res["adapter"]).is_dir()
    job.write_text("fixset: fix\noutput_dir: job\ntrainer: {max_stepz: 2}\n")
    assert main(["train", str(job)]) == 2
    assert "Did you mean `max_steps`" in capsys.readouterr().err

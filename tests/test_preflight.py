"""Memory pre-flight: formulas against hand-computed cases, the 16B field case, CLI, and autograd."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest
from benchload import load_bench

from finetune.commands import preflight as cmd
from finetune.preflight import (
    GiB,
    ModelShape,
    PreflightSpec,
    activation_bytes,
    activation_bytes_per_layer,
    estimate,
    load_shape,
    lora_params,
    recommend,
    require_fit,
)
from workbench.errors import WorkbenchError

LLAMA7B = ModelShape(layers=32, hidden=4096, heads=32, vocab=32000, intermediate=11008, params=6_738_415_616)
# The reported OpenRLHF failure names only "16B"; this is a dense 16B of DeepSeek-like shape.
SHAPE16B = ModelShape(layers=48, hidden=5120, heads=40, vocab=102400, intermediate=13824, params=16 * 10**9)
FIELD = PreflightSpec(
    model=SHAPE16B,
    gpu_memory_gib=80,
    zero=3,
    gpus=4,
    micro_batch=4,
    seq_len=1024,
    gradient_checkpointing=True,
)


def test_full_bf16_model_states_are_16_bytes_per_param() -> None:
    bd = estimate(PreflightSpec(model=LLAMA7B, gpu_memory_gib=80)).breakdown
    p = LLAMA7B.params
    assert (bd["weights"], bd["gradients"], bd["optimizer states"]) == (2 * p, 2 * p, 12 * p)


@pytest.mark.parametrize(("zero", "divs"), [(1, (1, 1, 4)), (2, (1, 4, 4)), (3, (4, 4, 4))])
def test_zero_stages_shard_over_gpus(zero: int, divs: tuple[int, int, int]) -> None:
    bd = estimate(PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, zero=zero, gpus=4)).breakdown
    p = LLAMA7B.params
    assert (bd["weights"], bd["gradients"], bd["optimizer states"]) == (
        2 * p // divs[0],
        2 * p // divs[1],
        12 * p // divs[2],
    )


def test_offload_moves_optimizer_states_to_cpu() -> None:
    est = estimate(PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, zero=2, gpus=2, offload_optimizer=True))
    assert est.breakdown["optimizer states"] == 0 and est.breakdown["gradients"] == 0
    assert est.cpu_offload_bytes == 12 * LLAMA7B.params


def test_lora_param_counts_match_peft_on_llama7b() -> None:
    qv = PreflightSpec(
        model=LLAMA7B, gpu_memory_gib=80, method="lora", lora_rank=8, lora_targets=("q_proj", "v_proj")
    )
    assert lora_params(qv) == 4_194_304  # peft's print_trainable_parameters for Llama-2-7b, r=8, q/v
    assert lora_params(replace(qv, lora_targets=cmd.LORA_TARGETS, lora_rank=16)) == 39_976_960


def test_lora_and_qlora_weights() -> None:
    lora = estimate(PreflightSpec(model=LLAMA7B, gpu_memory_gib=24, method="lora")).breakdown
    assert lora["weights"] == 2 * LLAMA7B.params and lora["gradients"] == lora["optimizer states"] == 0
    assert lora["LoRA parameters"] == 16 * 39_976_960
    q = estimate(PreflightSpec(model=LLAMA7B, gpu_memory_gib=24, method="qlora")).breakdown["weights"]
    linear = LLAMA7B.layer_linear_params * 32
    assert q == pytest.approx(linear * 0.5159 + (LLAMA7B.params - linear) * 2, rel=1e-3)


def test_activations_hand_computed() -> None:
    # s=1024, b=1, Llama-7B layer, bf16, full FT, eager attention:
    # norms 2*(4+2) sbh + linear inputs 2*(2sbh + sbI) + q/out/k/v 8 sbh + MLP 6 sbI + 6 as²b
    s, h, i, a = 1024, 4096, 11008, 32
    spec = PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, seq_len=s)
    assert activation_bytes_per_layer(spec, 1) == 24 * s * h + 8 * s * i + 6 * a * s * s
    flash = replace(spec, flash_attention=True)
    assert activation_bytes_per_layer(flash, 1) == 24 * s * h + 8 * s * i + 4 * a * s
    ckpt = replace(flash, gradient_checkpointing=True)  # 2sbh per layer + one layer recomputed
    assert activation_bytes(ckpt, 1) == 32 * 2 * s * h + activation_bytes_per_layer(flash, 1) + 8 * s * h


def test_dpo_reference_and_doubled_batch() -> None:
    base = PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, micro_batch=2, seq_len=512)
    full, dpo = estimate(base).breakdown, estimate(replace(base, method="dpo")).breakdown
    assert dpo["DPO reference"] == 2 * LLAMA7B.params
    assert dpo["activations"] == activation_bytes(base, 4) > full["activations"]
    dpo_lora = estimate(replace(base, method="dpo-lora")).breakdown
    assert dpo_lora["DPO reference"] == 0  # the adapter-disabled base is the reference


def test_verdict_and_risk_band() -> None:
    spec = PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, method="lora", seq_len=512)
    peak = estimate(spec).peak_bytes
    assert estimate(replace(spec, gpu_memory_gib=(peak + 5 * GiB) / GiB)).fits == "fits"
    assert estimate(replace(spec, gpu_memory_gib=(peak + 1 * GiB) / GiB)).fits == "risk"
    assert estimate(replace(spec, gpu_memory_gib=(peak - 1) / GiB)).fits == "does_not_fit"


def test_field_case_16b_on_40gb_and_80gb() -> None:
    on80, on40 = estimate(FIELD), estimate(replace(FIELD, gpu_memory_gib=40))
    assert on80.fits != "fits" and on40.fits == "does_not_fit"  # the reported OOM
    assert on80.breakdown["optimizer states"] == 12 * 16 * 10**9 // 4
    for spec in (FIELD, replace(FIELD, gpu_memory_gib=40)):
        recs = recommend(spec)
        assert recs[0].change.startswith("micro batch 4 → 1, gradient accumulation 1 → 4")
        assert recs[0].spec.global_batch == spec.global_batch == 16
        assert recs[-1].estimate.fits == "fits"
        assert [r.estimate.peak_bytes for r in recs] == sorted(
            (r.estimate.peak_bytes for r in recs), reverse=True
        )
    assert "optimizer offload" in recommend(replace(FIELD, gpu_memory_gib=40))[-1].change
    with pytest.raises(WorkbenchError, match="--force"):
        require_fit(FIELD)
    assert require_fit(FIELD, force=True).fits == "does_not_fit"


def test_validation_names_the_field() -> None:
    with pytest.raises(WorkbenchError, match="`micro_batch` must be >= 1, got 0"):
        PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, micro_batch=0)
    with pytest.raises(WorkbenchError, match="`offload_optimizer` needs `zero` >= 1"):
        PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, offload_optimizer=True)
    with pytest.raises(WorkbenchError, match="`method` must be one of"):
        PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, method="ppo")


def test_shape_from_local_dir_and_offline_hub_id(tmp_path: Path) -> None:
    cfg = {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
        "intermediate_size": 11008,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shape = load_shape(str(tmp_path))
    assert shape.swiglu and shape.params == pytest.approx(LLAMA7B.params, rel=1e-3)
    with pytest.raises(WorkbenchError, match="--params/--layers"):
        load_shape("nobody/no-such-model-anywhere")


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    return p.parse_args(list(argv))


FIELD_ARGS = (
    "--params",
    "16e9",
    "--layers",
    "48",
    "--hidden",
    "5120",
    "--heads",
    "40",
    "--vocab",
    "102400",
    "--intermediate",
    "13824",
    "--zero",
    "3",
    "--gpus",
    "4",
    "--micro-batch",
    "4",
    "--seq-len",
    "1024",
    "--gradient-checkpointing",
)


def test_cli_json_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd.run(_args(*FIELD_ARGS, "--gpu-memory", "80", "--json")) == 1
    out = json.loads(capsys.readouterr().out)
    assert {"fits", "peak_gib_per_gpu", "breakdown", "recommendations"} <= out.keys()
    assert out["fits"] is False and out["recommendations"][0]["peak_gib_per_gpu"] < out["peak_gib_per_gpu"]
    assert cmd.run(_args(*FIELD_ARGS, "--gpu-memory", "80", "--offload-optimizer")) == 0
    assert "FITS" in capsys.readouterr().out
    with pytest.raises(WorkbenchError, match="--layers"):
        cmd.run(_args("--gpu-memory", "80"))


def test_activation_formula_matches_autograd() -> None:
    """Bytes autograd saves for a tiny HF Llama (CPU, bf16) against the per-layer formula."""
    torch = pytest.importorskip("torch")
    bench = load_bench("preflight_accuracy")
    for impl, method in (("eager", "full"), ("sdpa", "full"), ("sdpa", "lora")):
        measured = bench.saved_bytes_per_layer(impl, method)
        shape = ModelShape(**bench.TINY)
        spec = PreflightSpec(
            model=shape,
            gpu_memory_gib=1,
            method=method,
            seq_len=bench.SEQ,
            lora_rank=8,
            flash_attention=impl == "sdpa",
        )
        predicted = activation_bytes_per_layer(spec, bench.BATCH)
        assert predicted == pytest.approx(measured, rel=0.02), (impl, method)
    assert torch is not None


@pytest.mark.gpu
def test_gpu_peak_within_tolerance() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    bench = load_bench("preflight_accuracy")
    predicted, measured = bench.measure_one(
        {"method": "full", "micro_batch": 2, "seq_len": 512, "ckpt": False}
    )
    assert 0.95 * measured <= predicted <= 1.15 * measured


def test_rank_above_the_model_width_is_refused() -> None:
    """An absurd LoRA rank is refused, not estimated (`lora.r: 100000000` passed pre-flight)."""
    with pytest.raises(WorkbenchError, match=r"`lora_rank` \(100000000\) is above the model width `hidden` \(4096\)"):
        PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, method="lora", lora_rank=100_000_000)
    assert PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, method="full", lora_rank=100_000_000).peft == ""


def _job(tmp_path: Path, config: dict[str, object], job: str) -> Path:
    """A job spec over a model known only by its config.json and a fix set known only by its manifest: all the
    pre-flight of a job reads."""
    model = tmp_path / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(config))
    fix = tmp_path / "fix"
    fix.mkdir()
    (fix / "fixset.json").write_text(json.dumps({
        "path": str(fix), "run_id": "run-x", "model": str(model), "strategy": "auto", "counts": {}, "sources": {},
        "train_rows": {"sft": 10, "dpo": 10}, "sha256": "0", "abstention_phrase": "i don't know", "new_tokens": [],
        "heldout_probe_ids": []}))
    path = tmp_path / "job.yaml"
    path.write_text(job)
    return path


LLAMA7B_CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                  "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000, "hidden_act": "silu",
                  "tie_word_embeddings": False}


def test_preflight_of_a_job_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`workbench preflight --job` maps the job as `workbench train` does on a GPU: bf16, checkpointing on,
    the job's micro batch, length, rank, LoRA targets (a 7B model's default: q/v, the size rule) and method (dpo:
    the adapter-disabled reference)."""
    job = _job(tmp_path, LLAMA7B_CONFIG, "fixset: fix\noutput_dir: out\nmethod: dpo\n"
               "trainer: {per_device_batch_size: 8, max_length: 2048}\nlora: {r: 32}\n")
    code = cmd.run(_args("--job", str(job), "--gpu-memory", "80", "--json"))
    out = json.loads(capsys.readouterr().out)
    expected = estimate(PreflightSpec(model=load_shape(str(tmp_path / "model")), gpu_memory_gib=80, method="dpo-lora",
                                      precision="bf16", gradient_checkpointing=True, micro_batch=8, seq_len=2048,
                                      lora_rank=32, lora_targets=("q_proj", "v_proj")))
    assert out["peak_gib_per_gpu"] == round(expected.peak_bytes / GiB, 2) and code == (expected.fits != "fits")
    assert not (tmp_path / "out").exists()  # a pre-flight writes nothing
    wide = _job(tmp_path / "small", {**LLAMA7B_CONFIG, "hidden_size": 1024, "intermediate_size": 2816},
                "fixset: fix\noutput_dir: out\nlora: {r: 2048}\n")
    with pytest.raises(WorkbenchError, match=r"`lora.r` is 2048, above the hidden size .* \(1024\)"):
        cmd.run(_args("--job", str(wide), "--gpu-memory", "80"))


def test_the_optimizer_step_is_a_second_peak() -> None:
    """Without ZeRO, PyTorch's AdamW step holds an fp32 copy of each mixed-precision gradient and one fp32
    temporary per trained parameter after the activations are freed: a short-sequence full fine-tune peaks there
    (24 B/param), a long-sequence one in the backward pass, and DeepSpeed's in-place step adds nothing."""
    short = PreflightSpec(model=LLAMA7B, gpu_memory_gib=80, seq_len=256)
    bd = estimate(short).breakdown
    states = bd["weights"] + bd["gradients"] + bd["optimizer states"]
    assert states == 16 * LLAMA7B.params and bd["optimizer step"] > 0
    assert states + bd["activations"] + bd["temporary buffers"] + bd["optimizer step"] == 24 * LLAMA7B.params
    assert estimate(replace(short, precision="fp32")).breakdown["optimizer step"] < bd["optimizer step"]  # no copy
    long = estimate(replace(short, seq_len=8192, micro_batch=8)).breakdown
    assert long["optimizer step"] == 0 and long["activations"] > 8 * LLAMA7B.params
    assert estimate(replace(short, zero=1)).breakdown["optimizer step"] == 0
    assert estimate(replace(short, zero=2, gpus=4, offload_optimizer=True)).breakdown["optimizer step"] == 0

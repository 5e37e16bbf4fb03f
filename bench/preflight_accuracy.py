"""Predicted vs measured peak memory of small training steps (needs a CUDA GPU).

For each config of a grid: a tiny Llama in bf16 on the GPU, mixed-precision AdamW laid out as
DeepSpeed does (bf16 weights and gradients, fp32 master + m + v: 16 B/param), two optimizer steps;
`torch.cuda.max_memory_allocated` of the second step against `Estimate.allocated_bytes` (framework
overhead excluded: it is not in the allocator's count). Goal: within +/-15%, under-predicting by
at most 5%. On a CPU it says so and exits 0. `saved_bytes_per_layer` (CPU) is used by the tests.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finetune.preflight import ModelShape, PreflightSpec, estimate

TINY: dict[str, Any] = {
    "layers": 2,
    "hidden": 256,
    "heads": 8,
    "kv_heads": 2,
    "vocab": 1000,
    "intermediate": 688,
}
SEQ, BATCH = 128, 2


def _model(shape: dict[str, Any], impl: str, method: str, device: str) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(  # type: ignore[call-arg]  # attn_implementation goes through **kwargs
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        intermediate_size=shape["intermediate"],
        vocab_size=shape["vocab"],
        attn_implementation=impl,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg).to(device=device, dtype=torch.bfloat16)  # type: ignore[no-untyped-call,call-arg]
    if method == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, target_modules="all-linear"))
    model.train()
    return model


def saved_bytes_per_layer(impl: str, method: str) -> int:
    """Bytes autograd saves per decoder layer (non-parameter tensors), by differencing 2 and 1 layers."""
    import torch

    def saved(layers: int) -> int:
        torch.manual_seed(0)
        model = _model({**TINY, "layers": layers}, impl, method, "cpu")
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        seen: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            st = t.untyped_storage()
            if st.data_ptr() not in params:
                seen[st.data_ptr()] = st.nbytes()
            return t

        ids = torch.randint(0, TINY["vocab"], (BATCH, SEQ))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(input_ids=ids, labels=ids)
        return sum(seen.values())

    return saved(2) - saved(1)


def measure_one(cfg: dict[str, Any]) -> tuple[int, int]:
    """(predicted allocated bytes, measured max_memory_allocated) for one config on cuda:0."""
    import torch

    shape: dict[str, int] = {"layers": 4, "hidden": 1024, "heads": 16, "kv_heads": 4, "vocab": 32000,
                             "intermediate": 2816}
    impl = "sdpa" if cfg.get("flash") else "eager"
    torch.cuda.empty_cache()
    model = _model(shape, impl, cfg["method"], "cuda")
    if cfg["ckpt"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    trained = [p for p in model.parameters() if p.requires_grad]
    master = (
        [p.detach().float().clone().requires_grad_() for p in trained] if cfg["method"] == "full" else trained
    )
    opt = torch.optim.AdamW(master, lr=1e-5)
    ids = torch.randint(0, shape["vocab"], (cfg["micro_batch"], cfg["seq_len"]), device="cuda")
    for step in range(2):
        if step == 1:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        model(input_ids=ids, labels=ids).loss.backward()
        if cfg["method"] == "full":  # bf16 grads -> fp32 master, one tensor at a time (DeepSpeed-like)
            for p, mp in zip(trained, master, strict=True):
                mp.grad = p.grad.float()
                p.grad = None
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cfg["method"] == "full":
            with torch.no_grad():
                for p, mp in zip(trained, master, strict=True):
                    p.copy_(mp)
    measured = torch.cuda.max_memory_allocated()
    params = sum(p.numel() for p in model.parameters()) - (
        sum(p.numel() for p in trained) if cfg["method"] == "lora" else 0
    )
    spec = PreflightSpec(
        model=ModelShape(layers=shape["layers"], hidden=shape["hidden"], heads=shape["heads"], vocab=shape["vocab"],
                         kv_heads=shape["kv_heads"], intermediate=shape["intermediate"], params=params),
        gpu_memory_gib=80,
        method=cfg["method"],
        micro_batch=cfg["micro_batch"],
        seq_len=cfg["seq_len"],
        lora_rank=8,
        gradient_checkpointing=cfg["ckpt"],
        flash_attention=bool(cfg.get("flash")),
    )
    del model, opt, master, trained
    return estimate(spec).allocated_bytes, measured


def main() -> int:
    try:
        import torch
    except ImportError:
        print("preflight accuracy needs torch and a CUDA GPU")
        return 0
    if not torch.cuda.is_available():
        print("preflight accuracy needs a CUDA GPU (torch.cuda.is_available() is False); nothing measured")
        return 0
    worst_under, worst_abs, rows = 0.0, 0.0, []
    for method, mb, seq, ckpt, flash in itertools.product(
        ("full", "lora"), (1, 4), (256, 1024), (False, True), (False, True)
    ):
        cfg = {"method": method, "micro_batch": mb, "seq_len": seq, "ckpt": ckpt, "flash": flash}
        predicted, measured = measure_one(cfg)
        err = predicted / measured - 1
        worst_under, worst_abs = min(worst_under, err), max(worst_abs, abs(err))
        rows.append(
            f"{method:5} mb={mb} seq={seq:5} ckpt={ckpt!s:5} flash={flash!s:5} "
            f"predicted {predicted / 2**20:8.1f} MiB  measured {measured / 2**20:8.1f} MiB  {err:+.1%}"
        )
    print("\n".join(rows))
    ok = worst_abs <= 0.15 and worst_under >= -0.05
    print(
        f"worst |error| {worst_abs:.1%}, worst under-prediction {worst_under:.1%}: {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

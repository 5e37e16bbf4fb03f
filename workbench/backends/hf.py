"""Hugging Face transformers backend: batched decoding with left padding, optional peft adapters (several can be
loaded; each request picks one).

Two decoders, picked by the backend option `decode`:
  - `loop` (default): the backend's own loop over the model's forward and KV cache (hf_decode.py): each prompt
    prefilled once for its greedy answer and samples, finished rows leave the batch, log-probs for free;
  - `generate`: transformers `model.generate` per group of equal decoding settings, n samples through
    `num_return_sequences`. Used automatically for a model without a KV cache that can drop batch rows (Mamba).
Greedy answers are the same under both; samples differ (another sampler), so the engine string names the decoder.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.backends.base import Backend
from workbench.backends.hf_decode import STOP_WINDOW, LoopUnsupported, decode
from workbench.errors import MissingDependencyError, WorkbenchError, did_you_mean, unknown_name
from workbench.textgen import cut_at_stop
from workbench.types import Completion, GenerationRequest, ModelSpec, SamplingParams

log = logging.getLogger(__name__)

_BASE = "__base__"
DECODERS = ("loop", "generate")


#: What `--backend-option` may set for hf; anything else is refused (a typo would otherwise be silently ignored).
OPTIONS = frozenset({"device", "decode", "batch_size"})  # batch_size: read by Backend.batch_size


class HFBackend(Backend):
    name = "hf"
    preferred_batch_size = 64

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        unknown = sorted(k for k, _ in spec.options if k not in OPTIONS)
        if unknown:
            raise WorkbenchError(f"unknown hf backend option `{unknown[0]}`.{did_you_mean(unknown[0], OPTIONS)} "
                                 f"Known: {', '.join(sorted(OPTIONS))}")
        self._model: Any = None
        self._tok: Any = None
        self._adapters: dict[str, str] = {}  # adapter path -> peft adapter name
        self._loop_ok = True  # False once the model's cache turned out unable to drop rows

    # -- loading ---------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._model is not None:
            return
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:  # pragma: no cover - core dependency
            raise MissingDependencyError("the hf backend", "pip install torch transformers") from e
        spec = self.spec
        local = Path(spec.model).exists()
        if not local and (spec.model.startswith((".", "/")) or spec.model.count("/") > 1):
            raise WorkbenchError(f"model directory `{spec.model}` does not exist")
        try:
            tok = AutoTokenizer.from_pretrained(spec.model, revision=spec.revision)
            dtype = "auto" if spec.dtype == "auto" else getattr(torch, spec.dtype)
            model = AutoModelForCausalLM.from_pretrained(spec.model, revision=spec.revision, dtype=dtype)
        except OSError as e:
            hint = "" if local else " (a hub id needs network; HF_HUB_OFFLINE is set)" if _offline() else ""
            raise WorkbenchError(f"could not load model `{spec.model}`{hint}: {e}") from e
        log.debug("hf: loaded %s (dtype %s, %d parameters)", spec.model, model.dtype, model.num_parameters())
        tok.padding_side = "left"  # decoder-only: pad on the left so every prompt ends at the same column
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        device = str(self.spec.option("device", "cuda" if torch.cuda.is_available() else "cpu"))
        self._model, self._tok = model.to(device).eval(), tok  # type: ignore[arg-type]
        if spec.adapter:
            self._adapter_name(spec.adapter)

    def _adapter_name(self, path: str) -> str:
        if path in self._adapters:
            return self._adapters[path]
        if not Path(path).is_dir():
            raise WorkbenchError(f"adapter directory `{path}` does not exist")
        from peft import PeftModel

        name = f"a{len(self._adapters)}"
        try:
            if not self._adapters:
                self._model = PeftModel.from_pretrained(self._model, path, adapter_name=name).eval()
            else:
                self._model.load_adapter(path, adapter_name=name)
        except Exception as e:  # peft, safetensors and torch each raise their own kind for a bad file
            raise WorkbenchError(f"adapter `{path}` cannot be loaded ({type(e).__name__}: {str(e)[:300]})") from None
        self._adapters[path] = name
        return name

    @property
    def tokenizer(self) -> Any:
        self._load()
        return self._tok

    def engine(self) -> str:
        """E.g. "hf transformers-5.19.0 float32 cpu": the dtype the weights run in ("auto" read from the
        model's config, as transformers does) and the device, known without loading the model."""
        import importlib.metadata

        import torch

        dtype = self.spec.dtype
        config = Path(self.spec.model) / "config.json"
        if dtype == "auto" and config.is_file():
            try:
                cfg = json.loads(config.read_text())
            except (OSError, ValueError):
                cfg = {}
            dtype = str(cfg.get("dtype") or cfg.get("torch_dtype") or "float32")
        device = self.spec.option("device", "cuda" if torch.cuda.is_available() else "cpu")
        suffix = "" if self.decoder == "loop" else f" decode={self.decoder}"
        return f"hf transformers-{importlib.metadata.version('transformers')} {dtype} {device}{suffix}"

    @property
    def decoder(self) -> str:
        """The `decode` backend option: `loop` (default) or `generate` (see the module docstring)."""
        value = str(self.spec.option("decode", "loop"))
        if value not in DECODERS:
            raise unknown_name("value for backend option `decode`", value, DECODERS)
        return value

    def start(self) -> None:
        self._load()

    def close(self) -> None:
        """Drop the weights (a later `generate` loads them again)."""
        self._model, self._tok, self._adapters = None, None, {}

    # -- generation ------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        self._load()
        if not requests:
            return []
        if self.decoder == "loop" and self._loop_ok:
            try:
                return self._generate_loop(requests)
            except LoopUnsupported:
                self._loop_ok = False
        out: list[list[Completion] | None] = [None] * len(requests)
        # Requests with equal decoding settings and adapter share a generate() call.
        order = sorted(range(len(requests)), key=lambda i: _group_key(requests[i]))
        for _, idxs in itertools.groupby(order, key=lambda i: _group_key(requests[i])):
            group = list(idxs)
            for start in range(0, len(group), self.batch_size):
                chunk = group[start : start + self.batch_size]
                results = self._generate_batch([requests[i] for i in chunk])
                for i, r in zip(chunk, results, strict=True):
                    out[i] = r
        return [r for r in out if r is not None]

    def _generate_loop(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        """Requests grouped by adapter, sorted by prompt length (less left padding), chunked by `batch_size`
        distinct prompts; every chunk one prefill and one decode loop."""
        import torch

        out: list[list[Completion] | None] = [None] * len(requests)
        prompts = list(dict.fromkeys(r.prompt for r in requests))
        ids = dict(zip(prompts, self._tok(prompts)["input_ids"], strict=True))  # once: to sort, then to prefill
        order = sorted(range(len(requests)), key=lambda i: (requests[i].adapter or self.spec.adapter or "",
                                                             len(ids[requests[i].prompt]), requests[i].prompt))
        for adapter, idxs in itertools.groupby(order, key=lambda i: requests[i].adapter or self.spec.adapter or ""):
            chunks: list[list[int]] = []
            seen: set[str] = set()
            for i in idxs:
                if not chunks or (requests[i].prompt not in seen and len(seen) >= self.batch_size):
                    chunks.append([])
                    seen = set()
                chunks[-1].append(i)
                seen.add(requests[i].prompt)
            for chunk in chunks:
                reqs = [requests[i] for i in chunk]
                ctx = self._adapter_context(adapter)  # loads a new adapter outside inference mode
                with torch.inference_mode(), ctx:
                    rows = decode(self._model, self._tok, reqs, prompt_ids=ids)
                for i, r, rs in zip(chunk, reqs, rows, strict=True):
                    out[i] = [self._completion(row.ids, row.logprobs if r.sampling.logprobs else None, r.sampling,
                                               row.eos) for row in rs]
        return [r for r in out if r is not None]

    def _adapter_context(self, adapter: str) -> Any:
        """Make `adapter` (a path; "" for the base model) the active one for the `with` block."""
        if self._adapters:
            if adapter:
                self._model.set_adapter(self._adapter_name(adapter))
        elif adapter:
            self._adapter_name(adapter)
        return self._model.disable_adapter() if self._adapters and not adapter else contextlib.nullcontext()

    def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[list[Completion]]:
        import torch

        s: SamplingParams = reqs[0].sampling
        adapter = reqs[0].adapter or self.spec.adapter or ""
        ctx = self._adapter_context(adapter)
        enc = self._tok([r.prompt for r in reqs], return_tensors="pt", padding=True).to(self._model.device)
        kwargs: dict[str, Any] = dict(
            max_new_tokens=s.max_tokens, num_return_sequences=s.n, do_sample=not s.greedy,
            pad_token_id=self._tok.pad_token_id, eos_token_id=self._tok.eos_token_id,
            return_dict_in_generate=True, output_scores=s.logprobs,
        )
        if s.stop:  # a row that said its stop string is done; the batch ends when all are (not at max_tokens)
            kwargs["stopping_criteria"] = [_StopStrings(self._tok, tuple(s.stop), enc["input_ids"].shape[1])]
        if not s.greedy:
            kwargs.update(temperature=s.temperature, top_p=s.top_p, top_k=0)
            torch.manual_seed(s.seed if s.seed is not None else 0)
        else:  # silence generation_config sampling defaults that do not apply to greedy decoding
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.inference_mode(), ctx:
            gen = self._model.generate(**enc, **kwargs)
        new_tokens = gen.sequences[:, enc["input_ids"].shape[1]:]  # (B*n, T_new)
        logprobs = None
        if s.logprobs:
            logprobs = self._model.compute_transition_scores(gen.sequences, gen.scores, normalize_logits=True)
        completions = []
        for j in range(new_tokens.shape[0]):
            ids = new_tokens[j].tolist()
            n_gen = next((k for k, t in enumerate(ids) if t == self._tok.eos_token_id), None)
            lp = None if logprobs is None else logprobs[j].tolist()
            completions.append(self._completion(ids[:n_gen], lp, s, n_gen is not None))
        return [completions[i * s.n : (i + 1) * s.n] for i in range(len(reqs))]

    def _completion(self, ids: list[int], logprobs: list[float] | None, s: SamplingParams,
                    hit_eos: bool) -> Completion:
        """A row's Completion from its new tokens before EOS (and `hit_eos`, whether one followed them) and the
        log-probs of those tokens (longer lists are cut to the kept tokens)."""
        pad = self._tok.pad_token_id
        text = self._tok.decode(ids, skip_special_tokens=True)
        text, hit_stop = cut_at_stop(text, s.stop)
        n_keep = len(ids)
        if hit_stop:  # keep the log-probs of the tokens that make up the kept text only
            n_keep = next((k for k in range(1, len(ids) + 1)
                           if cut_at_stop(self._tok.decode(ids[:k], skip_special_tokens=True), s.stop)[1]),
                          len(ids)) - 1
        lp = None
        if logprobs is not None:
            lp = tuple(float(x) for x, t in zip(logprobs[: max(n_keep, 0)], ids, strict=False) if t != pad)
        reason = "stop" if hit_eos or hit_stop else "length"
        return Completion(text=text.strip(), finish_reason=reason, token_logprobs=lp)


def _group_key(r: GenerationRequest) -> tuple[Any, ...]:
    s = r.sampling
    return (s.temperature, s.top_p, s.max_tokens, s.stop, s.n, s.seed or 0, s.logprobs, r.adapter or "")


def _offline() -> bool:
    import os

    return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")


class _StopStrings:
    """Per-row "done" once the row's new text holds a stop string (transformers' own `stop_strings` needs a
    tokenizer that can spell its probe prefix, which a word-level vocabulary cannot). Only the last STOP_WINDOW
    tokens are decoded each step, as in the decode loop (hf_decode.py)."""

    def __init__(self, tok: Any, stops: tuple[str, ...], prompt_len: int) -> None:
        self.tok, self.stops, self.prompt_len = tok, stops, prompt_len

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        new = input_ids[:, max(self.prompt_len, input_ids.shape[1] - STOP_WINDOW):]
        texts = self.tok.batch_decode(new, skip_special_tokens=True)
        return torch.tensor([any(stop in t for stop in self.stops) for t in texts], device=input_ids.device)


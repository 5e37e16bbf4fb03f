"""Content-addressed keys for the generation cache.

A key names one completion: (model fingerprint, engine, adapter, prompt, decoding settings, seed, sample
index). `n` is not part of it: sample i of a prompt is the same entry whether 4 or 8 were asked for.
The engine (`Backend.engine()`, e.g. "vllm 0.32.0 float32 cpu") is part of it because two engines may
answer differently on the same weights; answers of another engine are reused only when asked for
(`reuse_cache_from`), and then keep that engine's name.
"""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import select

from workbench.store.db import Store
from workbench.store.schema import gen_cache
from workbench.types import GenerationRequest

#: The `reuse_cache_from` value that takes cached answers of any engine, including rows cached before
#: engines were recorded (store schema v1, engine unknown).
ANY_ENGINE = "any"


def cache_key(fingerprint: str, request: GenerationRequest, sample_index: int, engine: str | None) -> str:
    """The key of one completion. `engine` None gives the key rows had before engines were recorded."""
    s = request.sampling
    payload = {
        "fp": fingerprint,
        "adapter": request.adapter,
        "prompt": request.prompt,
        "temperature": s.temperature,
        "top_p": s.top_p if not s.greedy else 1.0,
        "max_tokens": s.max_tokens,
        "stop": list(s.stop),
        "seed": s.seed if not s.greedy else None,  # greedy decoding does not depend on the seed
        "logprobs": s.logprobs,
        "i": sample_index,
    }
    if engine is not None:
        payload["engine"] = engine
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def reuse_engines(store: Store, fingerprint: str, own: str, reuse_from: str | None) -> list[str | None]:
    """The other engines whose cached answers may stand in for `own`'s, in the order they are tried:
    none by default, the one named, or (`any`) every engine with rows for this model, unknown last."""
    if not reuse_from or reuse_from == own:
        return []
    if reuse_from != ANY_ENGINE:
        return [reuse_from]
    with store.engine.connect() as c:
        found = set(c.execute(select(gen_cache.c.engine).where(gen_cache.c.fingerprint == fingerprint)
                              .distinct()).scalars())
    return [*sorted(e for e in found if e is not None and e != own), None]

"""Content-addressed keys for the generation cache.

A key names one completion: (model fingerprint, adapter, prompt, decoding settings, seed, sample index).
`n` is not part of it: sample i of a prompt is the same entry whether 4 or 8 were asked for.
"""

from __future__ import annotations

import hashlib
import json

from workbench.types import GenerationRequest


def cache_key(fingerprint: str, request: GenerationRequest, sample_index: int) -> str:
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
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

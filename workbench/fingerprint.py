"""Content fingerprints of models and adapters: the generation cache is keyed by what the weights are,
not by where they live, so a retrained model at the same path never serves stale answers."""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from workbench.types import ModelSpec

# Files that define the text a model produces (weights, config, tokenizer); others (README) do not.
_RELEVANT = (".safetensors", ".bin", ".json", ".model", ".txt", ".py", ".jinja", ".tiktoken")


def _file_digest(path: Path, h: hashlib._Hash) -> None:
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)


@lru_cache(maxsize=64)
def _dir_digest(path: str, mtime_key: tuple[tuple[str, int, int], ...]) -> str:
    del mtime_key  # part of the lru key only: a changed file changes it
    h = hashlib.sha256()
    root = Path(path)
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        # Training checkpoints beside the weights do not change what the model at `path` generates.
        if p.is_file() and p.suffix in _RELEVANT and not any(d.startswith("checkpoint") for d in rel.parts[:-1]):
            h.update(str(rel).encode())
            _file_digest(p, h)
    return h.hexdigest()


def path_digest(path: str | os.PathLike[str]) -> str:
    """sha256 over the relevant files of a directory (or one file), cached per (path, mtimes, sizes)."""
    p = Path(path)
    if p.is_file():
        h = hashlib.sha256()
        _file_digest(p, h)
        return h.hexdigest()
    stat_key = tuple(
        (str(q), q.stat().st_mtime_ns, q.stat().st_size) for q in sorted(p.rglob("*")) if q.is_file()
    )
    return _dir_digest(str(p.resolve()), stat_key)


def model_fingerprint(spec: ModelSpec) -> str:
    """Weights hash (local dirs) or hub id + revision, plus the adapter's hash, plus the dtype."""
    parts: dict[str, object] = {"dtype": spec.dtype}
    base = Path(spec.model)
    parts["model"] = path_digest(base) if base.exists() else f"hub:{spec.model}@{spec.revision or 'main'}"
    if spec.adapter:
        parts["adapter"] = path_digest(spec.adapter)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]

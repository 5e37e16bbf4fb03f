"""One cache of test artifacts per test session, shared by the pytest-xdist workers: each artifact is built once,
under a file lock, in a folder named by what builds it (a world by its config), and every test module that needs it
reads the same copy. Before it, the test world was trained three times per session (conftest, the fine-tuning
setup, the attribution tests), and once per worker under xdist."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from filelock import FileLock

T = TypeVar("T")


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's artifact folder: beside the workers' own temp folders under xdist (their common parent)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "artifacts"
    root.mkdir(parents=True, exist_ok=True)
    return root


def built(tmp_path_factory: pytest.TempPathFactory, name: str, key: object, build: Callable[[Path], T]) -> T:
    """`build(folder)` for `name` and `key`, run by the first caller of the session; later callers wait on the lock
    and call it again on the same folder, where an idempotent builder (build_world) returns at once."""
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:12]
    root = session_root(tmp_path_factory)
    with FileLock(str(root / f"{name}-{digest}.lock")):
        return build(root / f"{name}-{digest}")


def world(tmp_path_factory: pytest.TempPathFactory, config: Any = None) -> Any:
    """The synthetic world of `config` (default: the test world), trained once per session. Tests read it; none
    writes into it."""
    import torch

    from evals.world import TEST_CONFIG, build_world

    torch.set_num_threads(1)
    config = config or TEST_CONFIG
    return built(tmp_path_factory, "world", config, lambda folder: build_world(folder, config))


#: The tiny planted world the tests build: SmolLM2 with 8 facts at 0, 1 and 4 documents (one contradicted), a few
#: steps. It checks the plumbing, not what the model learns.
PLANTED_TINY = ("--entities", "2", "--frequencies", "0,1,4", "--conflicts", "0.5", "--steps", "4", "--batch", "4",
                "--checkpoint-every", "2")


def planted(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny planted world on the real model, built once per session by `workbench world build --base smollm2`
    as a subprocess (the converted model is shared through WORKBENCH_MODELS_DIR); skips without the real model.
    Returns (WorldPaths, the build's stdout)."""
    from clirun import ENV, workbench
    from realmodel import real_model_dir

    from evals.world import WorldPaths

    models = real_model_dir().parent

    def build(folder: Path) -> tuple[Any, str]:
        proc = workbench("world", "build", "--base", "smollm2", "--out", str(folder), *PLANTED_TINY, timeout=600,
                         env={**ENV, "WORKBENCH_MODELS_DIR": str(models)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        return WorldPaths.under(folder), proc.stdout

    return built(tmp_path_factory, "planted", PLANTED_TINY, build)

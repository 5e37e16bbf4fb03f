"""Backends by name (built in, or registered by an installed package: see registry.py). Heavy packages are
imported only when a backend is built.

Open a backend with `with open_backend(spec) as backend:` so its engine is closed on success, error
and Ctrl-C. `keep_engines()` keeps vLLM engines alive across backends inside its block (`workbench
watch`, the demo: one engine serves the baseline and every adapter).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from workbench.backends.base import Backend
from workbench.backends.registry import (
    BACKENDS,
    ENTRY_POINT_GROUP,
    BackendPluginError,
    backend_class,
    backend_names,
    registration,
)
from workbench.errors import WorkbenchError
from workbench.types import ModelSpec


def load_backend(spec: ModelSpec) -> Backend:
    """Build the backend named by `spec.backend` for `spec` (cheap: nothing loads before `start` or
    the first `generate`). The caller closes it: prefer `with open_backend(spec) as backend:`."""
    cls = backend_class(spec.backend)
    try:
        return cls(spec)
    except WorkbenchError:
        raise
    except Exception as e:  # a plugin's own bug is reported with its name; a built-in's is ours: traceback
        reg = registration(spec.backend)
        if not reg.plugin:
            raise
        raise BackendPluginError(f"{reg.describe()} failed to build a backend: {type(e).__name__}: {e}") from e


def open_backend(spec: ModelSpec) -> Backend:
    """`load_backend` for a `with` block: the backend is closed when the block ends, however it ends."""
    return load_backend(spec)


@contextmanager
def keep_engines() -> Iterator[None]:
    """Inside this block a vLLM engine outlives the backends that used it, so the next backend with the
    same engine settings reuses it instead of starting another (20 s to minutes); every engine kept is
    shut down when the block ends. Cheap: vllm itself is imported only when an engine starts."""
    from workbench.backends import vllm

    with vllm.keep_engines():
        yield


__all__ = ["BACKENDS", "ENTRY_POINT_GROUP", "Backend", "BackendPluginError", "backend_class", "backend_names",
           "keep_engines", "load_backend", "open_backend", "registration"]

"""Backends by name. Heavy packages are imported only when a backend is built."""

from __future__ import annotations

import importlib

from workbench.backends.base import Backend
from workbench.errors import unknown_name
from workbench.types import ModelSpec

#: name -> "module:Class"; the module is imported only when the backend is used.
BACKENDS: dict[str, str] = {
    "hf": "workbench.backends.hf:HFBackend",
    "vllm": "workbench.backends.vllm:VLLMBackend",
    "openai": "workbench.backends.openai:OpenAIBackend",
}


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise unknown_name("backend", name, BACKENDS)
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


def load_backend(spec: ModelSpec) -> Backend:
    """Build the backend named by `spec.backend` for `spec`."""
    return backend_class(spec.backend)(spec)


__all__ = ["BACKENDS", "Backend", "backend_class", "load_backend"]

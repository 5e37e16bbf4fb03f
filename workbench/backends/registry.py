"""Backends by name: the built-in ones and those other packages register through entry points.

A package adds a backend by declaring an entry point in the group `workbench.backends` (pyproject.toml):

    [project.entry-points."workbench.backends"]
    echo = "my_backend:EchoBackend"

`pip install` writes it into the package's metadata; `workbench eval --backend echo` then finds it here
(importlib.metadata). Nothing is imported until a backend is used, so an installed plugin costs `workbench
--help` nothing and a heavy one (torch, a client SDK) loads only for the runs that name it.

Rules (no silent choice): a plugin may not take a built-in name, and two plugins may not take one name; either
is an error naming the plugins when that name is asked for. A plugin that fails to import, whose entry point is
not a `Backend` subclass, or whose class fails to build a backend (`load_backend`) is an error naming the plugin's
distribution and entry point, never a traceback.

Not here: Ray (`--ray ADDRESS`) is no backend of its own but runs a named one (hf, vllm) in actors, so it wraps a
backend from this registry rather than being chosen by `--backend`.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from dataclasses import dataclass
from importlib import metadata

from workbench.backends.base import Backend
from workbench.errors import WorkbenchError, unknown_name

#: The entry-point group a package registers its backends in.
ENTRY_POINT_GROUP = "workbench.backends"

#: Built-in backends: name -> "module:Class", the entry-point value format; imported only when used.
BACKENDS: dict[str, str] = {
    "hf": "workbench.backends.hf:HFBackend",
    "vllm": "workbench.backends.vllm:VLLMBackend",
    "openai": "workbench.backends.openai:OpenAIBackend",
}


class BackendPluginError(WorkbenchError):
    """An installed backend plugin is broken (import error, wrong object, name clash); the message names it."""


@dataclass(frozen=True)
class Registration:
    """Where a backend name comes from: `target` is "module:Class"; `plugin` the distribution that registered
    it ("" for a built-in one)."""

    name: str
    target: str
    plugin: str = ""

    def describe(self) -> str:
        if not self.plugin:
            return f"built-in `{self.name} = {self.target}`"
        return f"plugin `{self.plugin}` (entry point `{self.name} = {self.target}` in group `{ENTRY_POINT_GROUP}`)"


def plugin_registrations() -> dict[str, list[Registration]]:
    """name -> every installed distribution's registration of it (read from metadata; nothing is imported).
    Cached until sys.path or a folder on it changes (installing a package changes its folder)."""
    return dict(_scan(tuple((p, _mtime(p)) for p in sys.path)))


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path or ".").st_mtime_ns
    except OSError:
        return None


@functools.lru_cache(maxsize=8)
def _scan(path_key: tuple[tuple[str, int | None], ...]) -> dict[str, list[Registration]]:
    del path_key  # part of the cache key only: a changed sys.path or folder scans again
    found: dict[str, list[Registration]] = {}
    seen: set[str] = set()
    # Distributions one by one, not `entry_points(group=...)`: that merges equal entry points of different
    # distributions, and two plugins claiming one name must be seen to be refused. Only the few with an
    # entry_points.txt naming the group have their METADATA parsed (that parse is most of a scan's time).
    for dist in metadata.distributions():
        text = dist.read_text("entry_points.txt")
        if not text or f"[{ENTRY_POINT_GROUP}]" not in text:
            continue
        name = dist.metadata["Name"] or "an unnamed distribution"
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:  # shadowed by the same distribution earlier on sys.path, as imports would be
            continue
        seen.add(key)
        for ep in dist.entry_points.select(group=ENTRY_POINT_GROUP):
            found.setdefault(ep.name, []).append(Registration(ep.name, ep.value, name))
    return found


def backend_names() -> list[str]:
    """Every backend name a run may ask for: built-in and installed, sorted."""
    return sorted(set(BACKENDS) | set(plugin_registrations()))


def registration(name: str) -> Registration:
    """The one registration of `name`; WorkbenchError for an unknown name (with "Did you mean"), a clash."""
    plugins = plugin_registrations()
    claims = plugins.get(name, [])
    if name in BACKENDS:
        if claims:
            raise BackendPluginError(
                f"backend `{name}` is built in; {', '.join(c.describe() for c in claims)} may not replace it: "
                "rename its entry point (or uninstall the plugin)")
        return Registration(name, BACKENDS[name])
    if not claims:
        raise unknown_name("backend", name, set(BACKENDS) | set(plugins))
    if len(claims) > 1:
        raise BackendPluginError(f"backend `{name}` is registered twice: {' and '.join(c.describe() for c in claims)};"
                                 " uninstall one of them")
    return claims[0]


def backend_class(name: str) -> type[Backend]:
    """The class of backend `name`, imported now. A broken plugin raises BackendPluginError naming it."""
    reg = registration(name)
    module, _, attr = reg.target.partition(":")
    if not reg.plugin:  # built-in: an ImportError here is a missing optional package, raised by the module itself
        return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
    if not module or not attr:
        raise BackendPluginError(f"{reg.describe()}: the value must read `module:Class`")
    try:
        found: object = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)
    except WorkbenchError:
        raise  # the plugin's own clear message (a MissingDependencyError with its pip line)
    except Exception as e:  # a plugin is someone else's code: any failure is reported, with its cause
        raise BackendPluginError(f"{reg.describe()} failed to load: {type(e).__name__}: {e}") from e
    if not (isinstance(found, type) and issubclass(found, Backend)):
        raise BackendPluginError(f"{reg.describe()} names {found!r}, not a subclass of "
                                 "workbench.backends.Backend")
    if not isinstance(getattr(found, "name", None), str):
        raise BackendPluginError(f"{reg.describe()}: {found.__name__} must set the class attribute `name` "
                                 "(a str: what messages and the engine column call it)")
    return found

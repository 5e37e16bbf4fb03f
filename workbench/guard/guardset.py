"""A guard set on disk: `WORKSPACE/guard/<key>.json`, one per model fingerprint, prompt settings and pool."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.types import Probe

#: Version of the guard file. 1: facts with the model's greedy answer and its samples' score.
FORMAT_VERSION = 1
GUARD_DIR = "guard"


@dataclass(frozen=True)
class GuardFact:
    """One fact the model knows.

    Attributes:
        probe: The pool's probe (question, answers, its one paraphrase, tags `lang:..` / `topic:..`).
        answer: The model's greedy answer to the question (what replay rows teach a chat model: its own words).
        samples_right: Samples on the question graded correct.
        samples: Samples drawn on the question.
    """

    probe: Probe
    answer: str
    samples_right: int
    samples: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["probe"] = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.probe).items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GuardFact:
        p: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d["probe"].items()}
        return cls(probe=Probe(**p), answer=d["answer"], samples_right=d["samples_right"], samples=d["samples"])


@dataclass(frozen=True)
class GuardSet:
    """The facts of a pool that one model knows under one set of prompt settings.

    Attributes:
        key: The cache key (sha256 of fingerprint, settings, pool and criteria; the file's name).
        model: The model (path or hub id) it was built on; `adapter` its adapter, if any.
        fingerprint: The model's content fingerprint (workbench/fingerprint.py).
        settings: The prompt settings (template, system_prompt, max_tokens, stop, abstention_phrases).
        criteria: How a fact counted as known: greedy right on every phrasing and at least `min_samples_right`
            of `samples` samples right on the question.
        pool: The pool files (name and sha256 each).
        pool_size: Facts in the pool.
        evaluated: Facts evaluated: the whole pool, or only the first `SCREEN` when the model knew none of those.
        greedy_right: Facts the model answered right greedily on every phrasing (before the samples' check).
        facts: The known facts, in pool order.
        runs: The evaluation runs it was built from (greedy with paraphrases; samples).
        built_at: ISO time; `seconds` how long building took.
    """

    key: str
    model: str
    adapter: str | None
    fingerprint: str
    settings: dict[str, Any]
    criteria: dict[str, int]
    pool: list[dict[str, str]]
    pool_size: int
    evaluated: int
    greedy_right: int
    facts: tuple[GuardFact, ...]
    runs: list[str] = field(default_factory=list)
    built_at: str = ""
    seconds: float = 0.0

    @property
    def probes(self) -> tuple[Probe, ...]:
        return tuple(f.probe for f in self.facts)

    def counts(self, prefix: str) -> dict[str, int]:
        """Known facts per tag value with `prefix` (`lang:` or `topic:`), e.g. {"en": 250, "fr": 12}."""
        c = Counter(t.removeprefix(prefix) for f in self.facts for t in f.probe.tags if t.startswith(prefix))
        return dict(sorted(c.items()))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["facts"] = [f.to_dict() for f in self.facts]
        return {"format_version": FORMAT_VERSION, **d}


def guard_key(fingerprint: str, settings: dict[str, Any], pool_digest: str, criteria: dict[str, int]) -> str:
    blob = json.dumps([FORMAT_VERSION, fingerprint, settings, pool_digest, criteria], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def guard_path(workspace: str | Path, key: str) -> Path:
    return Path(workspace) / GUARD_DIR / f"{key}.json"


def save_guard(workspace: str | Path, guard: GuardSet) -> Path:
    """Write atomically: a killed build leaves no half file that a later run would trust."""
    path = guard_path(workspace, guard.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(guard.to_dict(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_guard(path: str | Path) -> GuardSet:
    """A guard file, with a clear error when it is not one (or from a newer workbench)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WorkbenchError(f"no guard set at `{p}`; build one with `workbench guard build --model M`") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise WorkbenchError(f"{p}: not a guard set ({e})") from None
    if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
        raise WorkbenchError(f"{p}: guard format {data.get('format_version') if isinstance(data, dict) else '?'} "
                             f"is not {FORMAT_VERSION}; rebuild it with `workbench guard build`")
    try:
        facts = tuple(GuardFact.from_dict(f) for f in data.pop("facts"))
        data.pop("format_version")
        return GuardSet(facts=facts, **data)
    except (KeyError, TypeError) as e:
        raise WorkbenchError(f"{p}: damaged guard set ({e}); delete it and rebuild") from None

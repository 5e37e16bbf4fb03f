"""Errors the CLI turns into a clear message and exit code 2 (never a traceback)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class WorkbenchError(Exception):
    """A user-facing error: bad input, missing model, unknown name. The message is the whole story."""


class InputError(WorkbenchError):
    """A bad row in a file: names the file, the line (1-based) and the field."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, problem: str) -> None:
        self.path, self.line, self.field, self.problem = str(path), line, field, problem
        where = self.path + (f", line {line}" if line is not None else "")
        what = f"field `{field}`: " if field else ""
        super().__init__(f"{where}: {what}{problem}")


class MissingDependencyError(WorkbenchError):
    """An optional backend's package is not installed; the message carries the pip line."""

    def __init__(self, feature: str, pip_line: str) -> None:
        super().__init__(f"{feature} needs an optional package that is not installed. Install it with:\n    {pip_line}")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """' Did you mean `x`?' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" Did you mean `{close[0]}`?" if close else ""


def unknown_name(kind: str, name: str, choices: Iterable[str]) -> WorkbenchError:
    choices = sorted(choices)
    return WorkbenchError(f"unknown {kind} `{name}`.{did_you_mean(name, choices)} Known: {', '.join(choices)}")


class PartialGenerationError(WorkbenchError):
    """Some requests of a `generate` call failed after their retries; the others completed.

    `completed` maps request index -> its completions, `failures` maps request index -> why it failed,
    so a caller can keep (cache) what finished before re-raising. `names`: what the message calls a failed
    request (default "request i"; the runner names its probes, which a reader can look up).
    """

    def __init__(self, completed: dict[int, list[Any]], failures: dict[int, str], *, hint: str = "",
                 head: str = "", names: dict[int, str] | None = None) -> None:
        self.completed, self.failures, self.names = completed, failures, names or {}
        shown = "; ".join(f"{self.names.get(i, f'request {i}')}: {why}" for i, why in sorted(failures.items())[:3])
        more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
        head = head or f"{len(failures)} of {len(failures) + len(completed)} requests failed after retries"
        super().__init__(f"{head}: {shown}{more}{hint}")

    @classmethod
    def merged(cls, parts: list[PartialGenerationError], *, hint: str = "", head: str = "") -> PartialGenerationError:
        """One error for several calls' failures (request indices numbered across the calls, in order). `head`
        and `hint`: the message's first clause (default: failed requests of all requests) and what follows the
        failures, for a caller that counts in its own unit (the runner counts answers: a request is a prompt with
        its n samples)."""
        completed: dict[int, list[Any]] = {}
        failures: dict[int, str] = {}
        names: dict[int, str] = {}
        for e in parts:
            offset = len(completed) + len(failures)
            completed.update({offset + i: c for i, c in e.completed.items()})
            failures.update({offset + i: why for i, why in e.failures.items()})
            names.update({offset + i: name for i, name in e.names.items()})
        return cls(completed, failures, hint=hint, head=head, names=names)

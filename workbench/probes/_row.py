"""One source record on its way to a `Probe`: typed field access whose errors name file, line and field."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from workbench.errors import InputError
from workbench.safeload import json_loads

#: Probe fields a `columns` mapping may name.
PROBE_FIELDS = (
    "id",
    "question",
    "answers",
    "incorrect_answers",
    "paraphrases",
    "subject",
    "relation",
    "tags",
    "language",
)


def norm_key(name: str) -> str:
    """Column names compare case- and spacing-insensitively: "Best Answer" == "best_answer"."""
    return name.strip().lower().replace(" ", "_").replace("-", "_")


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def dedup(items: list[str]) -> tuple[str, ...]:
    """Stripped, non-empty, first occurrence kept."""
    out: dict[str, None] = {}
    for item in items:
        if item.strip():
            out.setdefault(item.strip(), None)
    return tuple(out)


class Row:
    """A record with normalized keys; `line` is 1-based, `index` the 0-based record number in the source."""

    def __init__(
        self, raw: Mapping[str, Any], *, path: str, line: int, index: int, stem: str, prefix: str = ""
    ) -> None:
        self.path, self.line, self.index, self.stem, self.prefix = path, line, index, stem, prefix
        self.data: dict[str, Any] = {}
        self.names: dict[str, str] = {}
        for key, value in raw.items():
            k = norm_key(str(key))
            if k not in self.data:
                self.data[k], self.names[k] = value, str(key)

    def error(self, key: str | None, problem: str) -> InputError:
        name = self.prefix + self.names.get(key, key) if key else None
        return InputError(self.path, self.line, name, problem)

    def get(self, key: str) -> Any:
        """The value, or None when the column is absent, null or NaN."""
        value = self.data.get(key)
        return None if _is_missing(value) else value

    def text(self, key: str, *, required: bool = False) -> str | None:
        """A string field, stripped; blank counts as absent. Numbers are accepted for ids only."""
        value = self.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                raise self.error(key, "missing" if value is None else "blank")
            return None
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {type(value).__name__} {_short(value)}")
        return value.strip()

    def texts(self, key: str, *, required: bool = False, sep: str | None = ";") -> tuple[str, ...]:
        """A list of strings. A string value is read as a JSON list when it starts with `[`,
        else split on `sep` (or taken whole when `sep` is None)."""
        value = self.get(key)
        if isinstance(value, str):
            value = self._parse_list(key, value, sep)
        elif value is not None and not isinstance(value, list | tuple):
            if hasattr(value, "tolist"):  # numpy arrays from Parquet / pandas
                value = value.tolist()
            else:
                raise self.error(
                    key, f"must be a list of strings, got {type(value).__name__} {_short(value)}"
                )
        items: list[str] = []
        for i, item in enumerate(value or ()):
            if not isinstance(item, str):
                raise self.error(key, f"item {i} must be a string, got {type(item).__name__} {_short(item)}")
            items.append(item)
        result = dedup(items)
        if required and not result:
            raise self.error(
                key, "missing" if self.get(key) is None else "empty: at least one answer is needed"
            )
        return result

    def _parse_list(self, key: str, value: str, sep: str | None) -> list[Any]:
        if value.lstrip().startswith("["):
            try:
                parsed = json_loads(value)
            except json.JSONDecodeError as e:
                raise self.error(key, f"bad JSON list: {e.msg} at column {e.colno}") from None
            except ValueError as e:
                raise self.error(key, str(e)) from None
            if not isinstance(parsed, list):
                raise self.error(key, "must be a JSON list")
            return parsed
        return value.split(sep) if sep else [value]

    def probe_id(self, *keys: str) -> str:
        """The first present id column, else "<stem>-<index>"."""
        for key in keys:
            value = self.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return str(value)
            text = self.text(key)
            if text is not None:
                return text
        return f"{self.stem}-{self.index}"


def _short(value: Any) -> str:
    text = repr(value)
    return f"({text[:40]}...)" if len(text) > 43 else f"({text})"

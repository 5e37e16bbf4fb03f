"""Pydantic validation errors as the messages a user can act on.

Every user-written file that is validated by a pydantic model (job specs; suites and policies word their
own today) goes through `describe`: one line per problem, naming the dotted field (`trainer.max_steps`),
what it must be, what it got, and for unknown keys and closed choices "Did you mean ...?".
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

import annotated_types
import pydantic

from workbench.errors import did_you_mean

#: Bound kinds pydantic reports -> how the message words them.
_BOUNDS = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"), "less_than_equal": ("le", "<="),
           "less_than": ("lt", "<")}
_KINDS = {"int": "an integer", "float": "a number", "bool": "true or false", "string": "a string",
          "list": "a list", "dict": "a mapping", "model": "a mapping"}


def describe(model: type[pydantic.BaseModel], error: pydantic.ValidationError,
             choices: Mapping[str, str] | None = None) -> str:
    """All problems of `error` (raised validating `model`), joined by "; ". `choices` words a closed
    choice in its own way (dotted field -> e.g. "0 (off), 2 or 3")."""
    return "; ".join(problem(model, e, choices or {}) for e in error.errors())


def problem(model: type[pydantic.BaseModel], err: Any, choices: Mapping[str, str]) -> str:
    """One pydantic error dict as a sentence."""
    loc = tuple(err["loc"])
    name = dotted(loc)
    kind, value = str(err["type"]), err.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        known = list(parent.model_fields) if parent is not None else []
        prefix = dotted(loc[:-1]) + "." if loc[:-1] else ""
        return (f"unknown key `{name}`.{did_you_mean(str(loc[-1]), known)} "
                f"Known: {', '.join(prefix + k for k in known)}")
    if kind == "missing" or (kind == "string_too_short" and err.get("ctx", {}).get("min_length") == 1):
        info = _field_at(model, loc)
        about = f" ({_first_sentence(info.description)})" if info is not None and info.description else ""
        return f"`{name}` is required{about}"
    if kind == "literal_error":
        options = [str(o) for o in _literal_args(_annotation_at(model, loc))]
        words = choices.get(name.split("[")[0]) or "one of " + ", ".join(options)
        return f"`{name}` must be {words}, got `{value}`.{did_you_mean(str(value), options)}"
    if kind in _BOUNDS:
        key, op = _BOUNDS[kind]
        return f"`{name}` must be {op} {err['ctx'][key]}, got {value!r}"
    if kind == "int_parsing_size":  # an integer too large to even parse: name the field's cap
        cap = _upper_bound(model, loc)
        return f"`{name}` must be <= {cap}, got {value!r}" if cap is not None else f"`{name}` is too large"
    if kind == "finite_number":
        return f"`{name}` must be a finite number, got {value!r}"
    base = kind.removesuffix("_type").removesuffix("_parsing").removesuffix("_from_float")
    if base in _KINDS:
        return f"`{name}` must be {_KINDS[base]}, got {value!r}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"`{name}` {msg}" if name else msg


def dotted(loc: tuple[Any, ...]) -> str:
    """('trainer', 'dpo_loss_type', 0) -> 'trainer.dpo_loss_type[0]'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _unwrap(annotation: Any) -> Any:
    """X | None -> X; list[X] -> X."""
    while True:
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        elif origin is list:
            annotation = typing.get_args(annotation)[0]
        else:
            return annotation


def _field_at(model: type[pydantic.BaseModel], loc: tuple[Any, ...]) -> Any:
    """The FieldInfo at `loc` (list indices skipped: ('trainer', 'dpo_loss_type', 0) is the list's field)."""
    names = tuple(p for p in loc if not isinstance(p, int))
    parent = _model_at(model, names[:-1])
    return parent.model_fields.get(names[-1]) if parent is not None and names else None


def _model_at(model: type[pydantic.BaseModel], loc: tuple[Any, ...]) -> type[pydantic.BaseModel] | None:
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = current.model_fields if isinstance(current, type) and issubclass(current, pydantic.BaseModel) else {}
        info = fields.get(part)
        if info is None:
            return None
        current = _unwrap(info.annotation)
    return current if isinstance(current, type) and issubclass(current, pydantic.BaseModel) else None


def _annotation_at(model: type[pydantic.BaseModel], loc: tuple[Any, ...]) -> Any:
    info = _field_at(model, loc)
    return _unwrap(info.annotation) if info is not None else None


def _literal_args(annotation: Any) -> tuple[Any, ...]:
    return typing.get_args(annotation) if typing.get_origin(annotation) is Literal else ()


def _upper_bound(model: type[pydantic.BaseModel], loc: tuple[Any, ...]) -> Any:
    info = _field_at(model, loc)
    for meta in info.metadata if info is not None else ():
        if isinstance(meta, annotated_types.Le | annotated_types.Lt):
            return meta.le if isinstance(meta, annotated_types.Le) else meta.lt
    return None


def _first_sentence(text: str) -> str:
    first = " ".join(text.split()).split(". ")[0].rstrip(".")
    return first[:1].lower() + first[1:]

"""Reading user-written YAML and JSON without letting a file take the process down.

Every user file (suite, job spec, policy, probe rows, corpus rows) goes through here, so the limits are
the same everywhere and written once:

- size: a YAML spec file is at most `MAX_SPEC_BYTES`; one JSON record (a probe row, a corpus row) at most
  `MAX_RECORD_BYTES`;
- shape: nesting at most `MAX_DEPTH` deep and at most `MAX_NODES` values once YAML aliases are expanded
  (an anchor bomb loads as a few shared objects but expands to billions when serialised);
- values: integers of at most `MAX_INT_DIGITS` digits, strings that are valid Unicode (no lone surrogates
  such as a JSON "\\ud800"), no duplicate keys (YAML and JSON would silently keep the last one).

A violation is a `ValueError` whose message says what and where (a dotted path inside the document); the
callers wrap it in an `InputError` / `WorkbenchError` that names the file and line. `key_lines` maps a YAML
file's top-level keys to their lines, so a spec's field errors can name the line as well.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import WorkbenchError
from workbench.safeopen import UnsafeInputError, read_input_text

MAX_SPEC_BYTES = 1 << 20  # 1 MiB: a suite, job spec or policy is a few hundred bytes
MAX_RECORD_BYTES = 1 << 20  # one probe or corpus row
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_INT_DIGITS = 30  # years, counts, ids: 30 digits is far beyond any real field


class _StrictLoader(yaml.SafeLoader):  # type: ignore[misc]
    """yaml.SafeLoader that refuses duplicate mapping keys (the default keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key `{key}` (first on line {seen[key] + 1})", key_node.start_mark)
            except TypeError:  # an unhashable key: SafeConstructor reports it itself
                break
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """Refuse a huge integer before converting it (Python refuses past 4,300 digits, without a line)."""
        digits = len(str(node.value).lstrip("+-").replace("_", ""))
        if digits > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {digits} digits (at most {MAX_INT_DIGITS})", node.start_mark)
        return super().construct_yaml_int(node)  # type: ignore[no-any-return]


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def yaml_load(text: str) -> Any:
    """`yaml.safe_load` with duplicate keys refused, then `check_tree`. Raises yaml.YAMLError or ValueError."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except RecursionError:  # PyYAML's parser recurses per nesting level
        raise TreeError(f"nested deeper than {MAX_DEPTH} levels", "") from None
    check_tree(data)
    return data


class TreeError(ValueError):
    """A `check_tree` violation; `where` is the dotted path inside the document ("" for the top)."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.where = where


def key_lines(path: str | Path) -> dict[str, int]:
    """The 1-based line of each top-level key of a YAML mapping file ({} when it is not one). Composing
    builds nodes without expanding aliases, so this is safe on any file read_yaml_file accepted or refused."""
    node = _compose(path)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)}


def _compose(path: str | Path) -> yaml.Node | None:
    """The file's node tree (aliases not expanded), or None when it cannot be read or parsed."""
    try:
        text = read_input_text(path, max_bytes=MAX_SPEC_BYTES)
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except (OSError, ValueError, WorkbenchError, yaml.YAMLError, RecursionError):
        return None


def dotted_key_lines(path: str | Path) -> dict[str, int]:
    """Like `key_lines`, for nested mappings too: {"lora": 3, "lora.r": 4, ...} (aliases are not expanded)."""
    node = _compose(path)
    found: dict[str, int] = {}
    todo: list[tuple[str, yaml.Node]] = [("", node)] if node is not None else []
    while todo and len(found) < MAX_NODES:
        prefix, n = todo.pop()
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    name = f"{prefix}{k.value}"
                    found.setdefault(name, k.start_mark.line + 1)
                    todo.append((name + ".", v))
    return found


def line_of(lines: dict[str, int], loc: tuple[object, ...]) -> int | None:
    """The line of the deepest key of a pydantic error location that the file spells."""
    parts = [str(x) for x in loc if isinstance(x, str)]
    for end in range(len(parts), 0, -1):
        if (n := lines.get(".".join(parts[:end]))) is not None:
            return n
    return None


def top_key(where: str) -> str:
    """`grader_options.a[3]` -> `grader_options`."""
    return where.split(".", 1)[0].split("[", 1)[0]


def read_yaml_file(path: str | Path, *, max_bytes: int = MAX_SPEC_BYTES) -> Any:
    """A YAML spec file, checked. Every problem is a ValueError naming the file and, where known, the line.
    A missing file raises FileNotFoundError (callers word that one themselves)."""
    p = Path(path)
    try:  # a regular file only, its size checked before reading (a FIFO or /dev/zero is refused at once)
        text = read_input_text(p, max_bytes=max_bytes, what="spec file")
    except UnsafeInputError as e:
        raise ValueError(str(e)) from None
    except FileNotFoundError:
        raise
    except OSError as e:  # permission denied, an I/O error: named, never a traceback
        raise ValueError(f"{p}: cannot read: {e.strerror or e}") from None
    try:
        return yaml_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ValueError(f"{p}{where}: invalid YAML: {problem}") from None
    except TreeError as e:
        line = key_lines(p).get(top_key(e.where))
        raise ValueError(f"{p}{f', line {line}' if line else ''}: {e}") from None
    except ValueError as e:
        raise ValueError(f"{p}: {e}") from None
    except RecursionError:
        raise ValueError(f"{p}: nested deeper than {MAX_DEPTH} levels") from None


def json_loads(text: str | bytes, *, max_bytes: int | None = MAX_RECORD_BYTES, max_nodes: int = MAX_NODES) -> Any:
    """`json.loads` with duplicate keys and oversized integers refused, then `check_tree`. `max_bytes` None:
    no size cap (a whole probe file read at once)."""
    if max_bytes is not None and len(text) > max_bytes:
        raise ValueError(f"{len(text):,} bytes in one record; at most {max_bytes:,}")
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_bounded_int)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    check_tree(data, max_nodes=max_nodes)
    return data


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key `{_short(k)}`")
        out[k] = v
    return out


def _bounded_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(s.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(s)


def check_tree(data: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Raise ValueError when `data` (parsed YAML/JSON) nests too deep, expands to too many values (aliases
    counted each time they are used), holds a huge integer or a string that is not valid Unicode."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    visited = 0
    while stack:
        value, depth, where = stack.pop()
        visited += 1
        if visited > max_nodes:
            raise TreeError(f"expands to more than {max_nodes:,} values (YAML anchors/aliases?) at "
                            f"`{where or '<top>'}`", where)
        if depth > max_depth:
            raise TreeError(f"nested deeper than {max_depth} levels at `{where or '<top>'}`", where)
        if isinstance(value, str):
            _check_text(value, where)
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            continue
        elif isinstance(value, int):
            if abs(value) >= 10**MAX_INT_DIGITS:
                raise TreeError(f"`{where or '<top>'}`: an integer of more than {MAX_INT_DIGITS} digits", where)
        elif isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str):
                    _check_text(k, where)
                stack.append((v, depth + 1, f"{where}.{k}" if where else str(k)))
        elif isinstance(value, list | tuple):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(value))


def _check_text(s: str, where: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = s[e.start]
        raise TreeError(f"`{where or '<top>'}`: a lone surrogate \\u{ord(bad):04x} is not valid Unicode",
                        where) from None


def _short(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


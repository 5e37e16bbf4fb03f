"""Load probes from a local file (JSONL, JSON, CSV, TSV, Parquet) or a Hugging Face dataset.

Every bad row raises `InputError` naming file, line and field, unless `skip_bad` is set: then it is
skipped and counted. `line` is the 1-based physical line (JSONL, JSON), the line a CSV record starts
on (header = line 1), or the 1-based row number (Parquet, Hugging Face datasets).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workbench.errors import InputError, WorkbenchError, unknown_name
from workbench.probes._readers import Item, Record, container_for, read_records
from workbench.probes._row import PROBE_FIELDS, Row, norm_key
from workbench.probes.formats import CONTAINERS, FORMAT_NAMES, FORMATS, Format, detect
from workbench.types import Probe

#: How many skipped-row messages a LoadResult keeps.
MAX_PROBLEMS = 20
HF_PREFIX = "hf:"


@dataclass(frozen=True)
class LoadResult:
    """Probes read from one source.

    Attributes:
        probes: The good rows, in file order.
        skipped: Rows skipped under skip_bad.
        problems: Messages of the skipped rows (the first MAX_PROBLEMS).
        source: The file path or "hf:name[:config]".
        format: The probe format read: the one asked for, else the one detected ("" when not known).
    """

    probes: tuple[Probe, ...]
    skipped: int
    problems: tuple[str, ...]
    source: str
    format: str = ""


def load_probes(
    source: str | Path,
    *,
    format: str = "auto",
    columns: Mapping[str, str] | None = None,
    skip_bad: bool = False,
    split: str | None = None,
) -> LoadResult:
    """Read probes. `format` is "auto", a container (jsonl, json, csv, tsv, parquet, hf: the schema is
    then detected from the columns) or a schema (truthfulqa, simpleqa, popqa, nq_open, triviaqa, halueval).
    `columns` maps probe fields to source columns. `split` applies to Hugging Face datasets only."""
    if format not in FORMAT_NAMES:
        raise unknown_name("format", format, FORMAT_NAMES)
    mapping = dict(columns or {})
    for field in mapping:
        if field not in PROBE_FIELDS:
            raise unknown_name("probe field in `columns`", field, PROBE_FIELDS)
    text = str(source)
    if format == "hf" or text.startswith(HF_PREFIX):
        name = text.removeprefix(HF_PREFIX)
        items: Iterable[Item] = _hf_records(name, split)
        label, stem = HF_PREFIX + name, name.split(":")[0].rsplit("/", 1)[-1]
    else:
        path = Path(source)
        container = format if format in CONTAINERS else container_for(path)
        items, label, stem = read_records(path, container), str(path), path.stem
    schema = None if format in ("auto", *CONTAINERS) else FORMATS[format]
    return _convert(items, label, stem, schema, mapping, skip_bad)


def _convert(
    items: Iterable[Item],
    label: str,
    stem: str,
    schema: Format | None,
    mapping: dict[str, str],
    skip_bad: bool,
) -> LoadResult:
    probes: list[Probe] = []
    first_line: dict[str, int] = {}
    problems: list[str] = []
    skipped = 0
    source_name = Path(label).name if not label.startswith(HF_PREFIX) else label
    for index, item in enumerate(items):
        try:
            if isinstance(item, InputError):
                raise item
            row = Row(
                _mapped(item, mapping, label, index == 0), path=label, line=item.line, index=index, stem=stem
            )
            if schema is None:
                schema = detect(row.data, label, row.data)
            elif index == 0:
                _check_columns(schema, row, label)
            probe = schema.convert(row, source_name)
            if probe.id in first_line:
                raise row.error("id", f"duplicate id `{probe.id}` (first on line {first_line[probe.id]})")
            first_line[probe.id] = item.line
            probes.append(probe)
        except InputError as e:
            if not skip_bad:
                raise
            skipped += 1
            if len(problems) < MAX_PROBLEMS:
                problems.append(str(e))
    if not probes:
        if skipped:
            raise WorkbenchError(f"{label}: every row is bad ({skipped} skipped); first: {problems[0]}")
        raise WorkbenchError(f"{label}: no probes in it")
    return LoadResult(tuple(probes), skipped, tuple(problems), label, schema.name if schema else "")


def _mapped(record: Record, mapping: dict[str, str], label: str, first: bool) -> dict[str, Any]:
    """Mapped fields first (so they win over same-named columns), then the record's own columns."""
    if not mapping:
        return dict(record.data)
    by_norm = {norm_key(str(k)): k for k in record.data}
    mapped: dict[str, Any] = {}
    for field, column in mapping.items():
        key = column if column in record.data else by_norm.get(norm_key(column))
        if key is not None:
            mapped[field] = record.data[key]
        elif first:
            raise unknown_name(f"column (named in `columns`) in {label}", column, map(str, record.data))
    return {**mapped, **{k: v for k, v in record.data.items() if norm_key(str(k)) not in mapped}}


def _check_columns(schema: Format, row: Row, label: str) -> None:
    missing = [c for c in schema.required if c not in row.data]
    if missing:
        raise WorkbenchError(
            f"{label}: not a {schema.name} file: missing column(s) {', '.join(missing)} "
            f"(it has {', '.join(row.names.values())})"
        )


def _hf_records(spec: str, split: str | None) -> Iterator[Item]:
    """Rows of `datasets.load_dataset(name, config, split=split)`; spec is "name[:config]"."""
    name, _, config = spec.partition(":")
    try:
        import datasets

        loaded = datasets.load_dataset(name, config or None, split=split)
    except Exception as e:  # datasets raises many types (ConnectionError, FileNotFoundError, ValueError...)
        offline = any(
            os.environ.get(v, "") not in ("", "0") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
        )
        hint = " (offline? HF_HUB_OFFLINE is set)" if offline else ""
        raise WorkbenchError(f"could not load Hugging Face dataset `{spec}`{hint}: {e}") from None
    if isinstance(loaded, Mapping):  # a DatasetDict: no split given
        splits = list(loaded)
        if len(splits) != 1:
            raise WorkbenchError(
                f"Hugging Face dataset `{spec}` has splits {', '.join(splits)}; pick one with `split`"
            )
        loaded = loaded[splits[0]]
    return (Record(i, dict(row)) for i, row in enumerate(loaded, 1))


def with_tags(result: LoadResult, tags: Iterable[str]) -> LoadResult:
    """The same result with `tags` appended to every probe's tags (no duplicates)."""
    extra = tuple(tags)
    if not extra:
        return result
    probes = tuple(replace(p, tags=tuple(dict.fromkeys((*p.tags, *extra)))) for p in result.probes)
    return replace(result, probes=probes)


__all__ = ["LoadResult", "load_probes", "with_tags"]

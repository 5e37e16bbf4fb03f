"""Readers never write and never trust stored JSON: a damaged store is refused with what is damaged (the run id and
the field, the missing table), exit 2, and left exactly as it was: no table re-created, no version stamped."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from clirun import assert_refused, workbench

from workbench.store import Store

LIMIT_S = 60


def _store_with_a_run(ws: Path) -> tuple[Path, str]:
    store = Store.open(ws)
    run = store.create_run(model="m", adapter=None, backend="hf", fingerprint="f", suite="s",
                           suite_config={"name": "s"}, options={"samples": 0}, n_probes=0, skipped_bad=0)
    store.finish_run(run, status="complete", metrics={"overall": {"correct": 0.5}}, generated=0, cached=0)
    store.engine.dispose()
    return ws / "store.sqlite", run


def _sql(path: Path, statement: str) -> None:
    con = sqlite3.connect(path)
    con.execute(statement)
    con.commit()
    con.close()


def _tables(path: Path) -> set[str]:
    con = sqlite3.connect(path)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    return names


@pytest.mark.parametrize(("column", "value", "needle"), [
    ("options_json", "{not json", "field `options_json` is not valid JSON"),
    ("metrics_json", "[1, 2]", "field `metrics_json` holds list, not dict"),
    ("suite_json", "null", "field `suite_json` holds NoneType, not dict"),
])
def test_a_malformed_json_field_is_named_with_its_run(tmp_path: Path, column: str, value: str, needle: str) -> None:
    ws = tmp_path / "ws"
    path, run = _store_with_a_run(ws)
    _sql(path, f"UPDATE runs SET {column} = '{value}' WHERE id = '{run}'")
    for args in (["runs"], ["show", run], ["export", run, "--out", str(tmp_path / "x.jsonl")]):
        assert_refused(workbench(*args, "--workspace", str(ws), timeout=LIMIT_S), f"run {run}", needle)
    assert not (tmp_path / "x.jsonl").exists()


def test_a_missing_meta_table_is_refused_not_repaired(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    path, _ = _store_with_a_run(ws)
    _sql(path, "DROP TABLE meta")
    before = path.read_bytes()
    for args in (["runs"], ["history"]):
        assert_refused(workbench(*args, "--workspace", str(ws), timeout=LIMIT_S),
                       "has no `meta` table: not a workbench store, or a damaged one")
    assert "meta" not in _tables(path) and path.read_bytes() == before  # nothing was written


def test_a_missing_or_malformed_schema_version_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    path, _ = _store_with_a_run(ws)
    _sql(path, "UPDATE meta SET value = 'abc' WHERE key = 'schema_version'")
    assert_refused(workbench("runs", "--workspace", str(ws), timeout=LIMIT_S),
                   "meta.schema_version is 'abc', not a number")
    _sql(path, "DELETE FROM meta WHERE key = 'schema_version'")
    assert_refused(workbench("runs", "--workspace", str(ws), timeout=LIMIT_S), "has no schema version")
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM meta").fetchone()[0] == 0  # not stamped by a reader
    con.close()


@pytest.mark.slow  # loads the world model
def test_a_garbage_adapter_is_named_not_a_library_traceback(world: Any, tmp_path: Path) -> None:
    """An adapter folder that looks complete (config, weights, even a COMPLETE marker) but holds garbage."""
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA", "r": "eight", "target_modules": 3}')
    (adapter / "adapter_model.safetensors").write_bytes(b"\x00garbage" * 100)
    (adapter / "COMPLETE").write_text("")
    probes = tmp_path / "p.jsonl"
    probes.write_text(Path(world.probes).read_text().splitlines()[0] + "\n")
    proc = workbench("eval", "--model", str(world.model), "--adapter", str(adapter), "--probes", str(probes),
                     "--workspace", str(tmp_path / "ws"), timeout=300)
    assert_refused(proc, f"adapter `{adapter}` cannot be loaded")

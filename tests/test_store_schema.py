"""The store's schema upgrades in place: a workspace made by an older workbench keeps its runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import MetaData, Table, create_engine, insert

from workbench.errors import WorkbenchError
from workbench.store import Store
from workbench.store import schema as t


def _v1_store(ws: Path) -> None:
    """A store as schema v1 wrote it: today's tables without the columns added since, version 1 stamped."""
    added = {(table, col) for cols in t.ADDED_COLUMNS.values() for table, col, _ in cols}
    md = MetaData()
    for table in t.metadata.sorted_tables:
        Table(table.name, md, *[c._copy() for c in table.columns if (table.name, c.name) not in added])
    ws.mkdir(parents=True)
    engine = create_engine(f"sqlite:///{ws / 'store.sqlite'}")
    md.create_all(engine)
    with engine.begin() as c:
        c.execute(insert(md.tables["meta"]).values(key="schema_version", value="1"))
        c.execute(insert(md.tables["runs"]).values(
            id="run-old", created_at="2026-01-01T00:00:00", status="done", model="m", backend="hf",
            fingerprint="f", suite="s", suite_json="{}", options_json="{}", n_probes=0, skipped_bad=0,
            generated=0, cached=0))
    engine.dispose()


def test_v1_store_is_migrated_in_place(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _v1_store(ws)
    store = Store.open(ws)
    assert store.get_run("run-old").status == "done"
    with sqlite3.connect(ws / "store.sqlite") as con:
        version = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        cols = {r[1] for r in con.execute("PRAGMA table_info(answers)")}
    assert version == str(t.SCHEMA_VERSION)
    assert "engine" in cols
    Store.open(ws)  # a second open finds nothing left to do


def test_newer_store_is_refused_clearly(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    Store.open(ws)
    with sqlite3.connect(ws / "store.sqlite") as con:
        con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(WorkbenchError, match="schema version 99, newer than"):
        Store.open(ws)

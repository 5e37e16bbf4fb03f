"""The store's schema upgrades in place: a workspace made by an older workbench keeps its runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import MetaData, Table, create_engine, insert

from workbench.errors import WorkbenchError
from workbench.store import Store
from workbench.store import schema as t


def _old_store(ws: Path, version: int = 1) -> None:
    """A store as schema `version` wrote it: today's tables without the columns added since, `version` stamped."""
    added = {(table, col) for v, cols in t.ADDED_COLUMNS.items() if v > version for table, col, _ in cols}
    md = MetaData()
    for table in t.metadata.sorted_tables:
        Table(table.name, md, *[c._copy() for c in table.columns if (table.name, c.name) not in added])
    ws.mkdir(parents=True)
    engine = create_engine(f"sqlite:///{ws / 'store.sqlite'}")
    md.create_all(engine)
    with engine.begin() as c:
        c.execute(insert(md.tables["meta"]).values(key="schema_version", value=str(version)))
        c.execute(insert(md.tables["runs"]).values(
            id="run-old", created_at="2026-01-01T00:00:00", status="done", model="m", backend="hf",
            fingerprint="f", suite="s", suite_json="{}", options_json="{}", n_probes=0, skipped_bad=0,
            generated=0, cached=0))
    engine.dispose()


def test_v1_store_is_migrated_in_place(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _old_store(ws)
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


def test_v2_release_decisions_survive_the_override_column(tmp_path: Path) -> None:
    """A v2 workspace (sign-offs tied to gates, no override column) opens: its decision reads as no override, and
    a sign-off with an override can be written after the in-place upgrade."""
    from workbench import reviews

    ws = tmp_path / "ws"
    _old_store(ws, version=2)
    with sqlite3.connect(ws / "store.sqlite") as con:
        assert "override_reason" not in {r[1] for r in con.execute("PRAGMA table_info(reviews)")}
        con.execute("INSERT INTO reviews (at, reviewer, target, run_id, probe_id, old_value, new_value, reason, "
                    "gate_id) VALUES ('2026-01-02T00:00:00', 'ann', 'release', 'run-old', NULL, NULL, 'signoff', "
                    "'checked', NULL)")
    store = Store.open(ws)
    (old,) = reviews.list_reviews(store, target="release")
    assert (old.new_value, old.gate_id, old.override_reason) == ("signoff", None, None)
    new = reviews.record_release(store, reviewer="bob", run_id="run-old", decision="signoff", reason="re-checked",
                                 override_reason="no gate can be recorded for a run of no probes")
    assert new.override_reason == "no gate can be recorded for a run of no probes" and new.old_value == "signoff"
    with sqlite3.connect(ws / "store.sqlite") as con:
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(t.SCHEMA_VERSION)
        assert con.execute("SELECT override_reason FROM reviews ORDER BY id").fetchall() == [
            (None,), ("no gate can be recorded for a run of no probes",)]

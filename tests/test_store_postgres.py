"""The store on a real PostgreSQL server (`WORKBENCH_STORE_URL` / `Store.open(url=...)`): a throwaway
cluster started by initdb + pg_ctl on a free loopback port; an eval run, the generation cache, the
regression gate and its history, and processes racing to open a new store. Skips with a reason where
PostgreSQL or psycopg2 is missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from procs import open_store_at_once
from sqlalchemy import select

from workbench.errors import MissingDependencyError, WorkbenchError
from workbench.gating import gate_runs, history
from workbench.probes import resolve_probes
from workbench.results import load_results
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.store.schema import SCHEMA_VERSION, meta
from workbench.types import ModelSpec


@pytest.fixture()
def pg_url(postgres: Any, request: pytest.FixtureRequest) -> str:
    """SQLAlchemy URL of a new, empty database on the server, for one test."""
    return str(postgres.database("wb_" + request.node.name.lower().replace("[", "_").replace("]", "")[:50]))


def test_eval_cache_and_gate_on_postgres(world: Any, tmp_path: Path, pg_url: str) -> None:
    store = Store.open(tmp_path / "ws", url=pg_url)
    assert store.engine.dialect.name == "postgresql"
    suite, loaded = resolve_probes(str(world.suite))
    spec, opts = ModelSpec(model=str(world.model)), EvalOptions(samples=2, paraphrases=True, bootstrap=0)
    first = run_eval(store, spec, suite, loaded, opts)
    assert first.generated > 0 and first.cached == 0
    # another workspace on the same database shares the cache: the rerun makes no model calls
    second = run_eval(Store.open(tmp_path / "other-ws", url=pg_url), spec, suite, loaded, opts)
    assert second.generated == 0 and second.cached == first.generated
    a, b = load_results(store, first.run_id), load_results(store, second.run_id)
    assert len(a.probes) == first.n and [(p.answer, p.verdict) for p in a.probes] == [
        (p.answer, p.verdict) for p in b.probes]
    record = gate_runs(store, first.run_id, second.run_id)
    assert record.result.verdict == "pass"
    assert [(g["gate_id"], g["verdict"]) for g in history(store)] == [(record.id, "pass")]


def test_processes_opening_a_new_postgres_store_at_once(tmp_path: Path, pg_url: str) -> None:
    results = open_store_at_once(tmp_path, pg_url, n=6)
    assert all(rc == 0 for rc, _ in results), [err[-800:] for rc, err in results if rc]
    with Store.open(tmp_path, url=pg_url).engine.connect() as c:
        versions = c.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalars().all()
        assert versions == [str(SCHEMA_VERSION)]


def test_missing_driver_and_unreachable_server_are_clear_errors(tmp_path: Path) -> None:
    # no server needed: a driver that is not installed, and nothing listens on port 1
    if importlib.util.find_spec("pg8000") is not None:
        pytest.skip("pg8000 is installed here: it cannot play the missing driver")
    with pytest.raises(MissingDependencyError, match=r"driver `pg8000`.*\n    pip install -e '\.\[postgres\]'") as e:
        Store.open(tmp_path, url="postgresql+pg8000://ann:s3cret@127.0.0.1:1/wb")
    assert "s3cret" not in str(e.value) and "ann:***@" in str(e.value)
    with pytest.raises(WorkbenchError, match="is not an SQLAlchemy URL"):
        Store.open(tmp_path, url="not a url")
    pytest.importorskip("psycopg2", reason="needs psycopg2 (pip install -e '.[postgres]')")
    with pytest.raises(WorkbenchError, match="cannot open store postgresql") as e2:
        Store.open(tmp_path, url="postgresql+psycopg2://ann:s3cret@127.0.0.1:1/wb")
    assert "s3cret" not in str(e2.value)

"""The store on a real PostgreSQL server (`WORKBENCH_STORE_URL` / `Store.open(url=...)`): a throwaway
cluster started by initdb + pg_ctl on a free loopback port; an eval run, the generation cache, the
regression gate and its history, and processes racing to open a new store. Skips with a reason where
PostgreSQL or psycopg2 is missing."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select, text

from workbench.errors import MissingDependencyError, WorkbenchError
from workbench.probes import resolve_probes
from workbench.regression.gate import gate_runs, history
from workbench.results import load_results
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.store.schema import meta
from workbench.types import ModelSpec


def _pg_bin(name: str) -> str | None:
    """A PostgreSQL server program: on PATH, or where Debian's packages put it."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
                                       None)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    """SQLAlchemy URL of a fresh PostgreSQL cluster (no database part); stopped and deleted afterwards."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("needs PostgreSQL's initdb and pg_ctl (apt-get install postgresql)")
    pytest.importorskip("psycopg2", reason="needs psycopg2 (pip install -e '.[postgres]')")
    root = Path(tempfile.mkdtemp(prefix="wb-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no `postgres` user to run the server as")
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", _free_port()
    subprocess.run([*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "postgres"], check=True,
                   capture_output=True)
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-l", str(root / "log"), "-w", "start",
                    "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def pg_url(pg_server: str, request: pytest.FixtureRequest) -> str:
    """A new, empty database on the server for one test."""
    name = "wb_" + request.node.name.lower().replace("[", "_").replace("]", "")[:50]
    engine = create_engine(f"{pg_server}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        c.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return f"{pg_server}/{name}"


def test_eval_cache_and_gate_on_postgres(world: Any, tmp_path: Path, pg_url: str) -> None:
    store = Store.open(tmp_path / "ws", url=pg_url)
    assert store.engine.dialect.name == "postgresql"
    suite, loaded = resolve_probes(str(world.suite))
    spec, opts = ModelSpec(model=str(world.model)), EvalOptions(samples=2, paraphrases=True, bootstrap=0)
    first = run_eval(store, spec, suite, loaded, opts)
    assert first.generated > 0 and first.cached == 0
    # a second process sees the same store: the rerun makes no model calls and gives the same answers
    second = run_eval(Store.open(tmp_path / "other-ws", url=pg_url), spec, suite, loaded, opts)
    assert second.generated == 0 and second.cached == first.generated
    a, b = load_results(store, first.run_id), load_results(store, second.run_id)
    assert len(a.probes) == first.n and [(p.answer, p.verdict) for p in a.probes] == [
        (p.answer, p.verdict) for p in b.probes]
    record = gate_runs(store, first.run_id, second.run_id)
    assert record.result.verdict == "pass"
    assert [(g["gate_id"], g["verdict"]) for g in history(store)] == [(record.id, "pass")]


_OPEN_RACE = """
import sys, time
from workbench.store import Store
start = float(sys.argv[3])
while time.time() < start:
    pass
Store.open(sys.argv[1], url=sys.argv[2])
"""


def test_processes_opening_a_new_postgres_store_at_once(tmp_path: Path, pg_url: str) -> None:
    start = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN_RACE, str(tmp_path), pg_url, str(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    assert all(rc == 0 for rc, _ in results), [err[-1500:-700] for rc, err in results if rc]
    with Store.open(tmp_path, url=pg_url).engine.connect() as c:
        assert c.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalars().all() == ["1"]


def test_missing_driver_and_unreachable_server_are_clear_errors(tmp_path: Path) -> None:
    # no server needed: pg8000 is not installed, and nothing listens on port 1
    with pytest.raises(MissingDependencyError, match=r"driver `pg8000`.*\n    pip install pg8000") as e:
        Store.open(tmp_path, url="postgresql+pg8000://ann:s3cret@127.0.0.1:1/wb")
    assert "s3cret" not in str(e.value) and "ann:***@" in str(e.value)
    pytest.importorskip("psycopg2", reason="needs psycopg2 (pip install -e '.[postgres]')")
    with pytest.raises(WorkbenchError, match="cannot open store postgresql") as e2:
        Store.open(tmp_path, url="postgresql+psycopg2://ann:s3cret@127.0.0.1:1/wb")
    assert "s3cret" not in str(e2.value)

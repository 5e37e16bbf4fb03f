"""A team on one store, short: reviewers through the app's HTTP API while CLI writers write answers and a gate is
recorded, on SQLite and on PostgreSQL (a throwaway cluster on a Unix socket), and on PostgreSQL the cheapest fault (a
CLI writer SIGKILLed mid-write, then resumed). Every acknowledged decision is in the store exactly once, on its gate
or report and under its reviewer; the writers' runs are complete with no answer twice. The long run with every fault
is bench/store_load.py (docs/benchmarks/store_load.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from benchload import load_bench
from clirun import start

load = load_bench("store_load")

REVIEWERS = 6
ROUNDS = 2  # each: open the queue, read a gate's evidence, decide a report, sign off or block a gate


@pytest.mark.slow  # 5-8 s each on 2 cores
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_reviewers_and_writers_at_once_lose_nothing(kind: str, world: Any, tmp_path: Path,
                                                    request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("postgres").database("wb_load") if kind == "postgresql" else None
    # the gates' runs over a few probes (they are read, not measured); the writers evaluate the whole suite
    (tmp_path / "few.jsonl").write_text("".join(Path(world.probes).read_text().splitlines(keepends=True)[:12]))
    few = tmp_path / "few.yaml"
    few.write_text(Path(world.suite).read_text().replace("data: probes.jsonl", f"data: {tmp_path / 'few.jsonl'}"))
    seeded = load.seed(tmp_path / "ws", url, str(world.model), str(few), gates=3, reports=40)
    seeded = dataclasses.replace(seeded, suite=str(world.suite))
    plan = load.Plan(reviewers=REVIEWERS, seconds=None, rounds=ROUNDS, faults=("kill-cli",) if url else (), samples=1,
                     launch=lambda args, env: start(args, env), in_process_app=True)
    result = load.run_store(seeded, plan)
    d = result["decisions"]
    assert (d["lost"], d["duplicated"], d["misattributed"], d["unknown_rows"]) == ([], [], [], []), d
    assert d["acknowledged"] == 2 * REVIEWERS * ROUNDS and d["unacknowledged"] == 0, result["error_messages"]
    assert result["errors"] == 0 and result["completed"] == 4 * REVIEWERS * ROUNDS, result["error_messages"]
    for w in result["writers"]:
        if w["name"] == "regress":  # a gate recorded: pass, fail or inconclusive (few probes), never an error
            assert w["exit"] in (0, 1, 3) and w["id"].startswith("gate-"), w
        else:
            assert w["exit"] == 0 and (w["status"], w["duplicated"]) == ("done", 0) and w["answers"] > 0, w
    if kind == "sqlite":  # a killed writer on SQLite: tests/test_interrupted.py and tests/test_resume.py
        return
    killed = result["faults"][0]
    assert killed["killed_mid_write"] and killed["status_between"] == "interrupted", killed
    assert [t["exit"] for t in killed["resumes"]] == [0], killed
    assert (killed["status"], killed["duplicated"]) == ("done", 0) and killed["answers"] > killed["answers_at_kill"]


def test_a_restarted_server_is_reconnected_and_a_cut_statement_says_so(postgres: Any, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """What the load found on PostgreSQL: after a server restart the app's pooled connections were dead and reviewers
    got psycopg2's traceback text. Now a connection is checked before use and connecting is retried (the store rides
    through a restart); a statement whose connection breaks is refused saying it may or may not have been recorded;
    a server that stays away is refused saying nothing was recorded."""
    from sqlalchemy import create_engine, text

    from workbench.errors import WorkbenchError
    from workbench.store import Store, db

    store = Store.open(tmp_path / "ws", url=postgres.database("wb_restart"))
    first = store.create_run(model="m", adapter=None, backend="hf", fingerprint="f", suite="s", suite_config={},
                             options={}, n_probes=1, skipped_bad=0)
    postgres.restart()
    second = store.create_run(model="m", adapter=None, backend="hf", fingerprint="f", suite="s", suite_config={},
                              options={}, n_probes=1, skipped_bad=0)  # the same Store: no reopening
    assert {r.id for r in store.list_runs()} == {first, second}
    admin = create_engine(f"postgresql+psycopg2://postgres@/postgres?host={postgres.root}",
                          isolation_level="AUTOCOMMIT")
    with store.engine.connect() as c:
        pid = c.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with admin.connect() as a:
            a.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(WorkbenchError, match=r"the connection to the database server broke .* may or may not have "
                                                 r"been recorded"):
            c.execute(text("SELECT 1"))
    admin.dispose()
    assert len(store.list_runs()) == 2  # and the next query reconnects
    monkeypatch.setattr(db, "RECONNECT_S", 0.5)
    postgres._ctl("-m", "fast", "-w", "stop")
    try:
        store.engine.dispose()  # no pooled connection left: the next query must connect
        with pytest.raises(WorkbenchError, match=r"is unreachable .*retried for 0 s\): nothing was sent"):
            store.list_runs()
    finally:
        postgres.start()


def test_a_write_lock_held_past_the_wait_is_a_clear_refusal(tmp_path: Path) -> None:
    import sqlite3

    from sqlalchemy import text

    from workbench.errors import WorkbenchError
    from workbench.store import Store

    store = Store.open(tmp_path / "ws")
    holder = sqlite3.connect(tmp_path / "ws" / "store.sqlite")
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    try:
        with store.engine.connect() as c:
            c.execute(text("PRAGMA busy_timeout=50"))  # the 30 s wait, shortened
            with pytest.raises(WorkbenchError, match=r"is busy: another process held its write lock .*nothing of this "
                                                     r"action was recorded"):
                c.execute(text("INSERT INTO meta (key, value) VALUES ('x', 'y')"))
    finally:
        holder.rollback()
        holder.close()

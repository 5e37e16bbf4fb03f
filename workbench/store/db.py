"""The workspace store: SQLite (WAL) in `<workspace>/store.sqlite`, or any SQLAlchemy URL.

Writes are small transactions committed as work finishes, so a killed process loses nothing it
finished; readers (the app) see a run in progress while the CLI writes it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, insert, make_url, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, OperationalError, ProgrammingError

from workbench.errors import MissingDependencyError, WorkbenchError
from workbench.store import schema as t


def utcnow() -> str:
    # microseconds: rows are listed by this stamp, and two runs (or gates) often start in the same second
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def new_id(prefix: str) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class RunRecord:
    id: str
    created_at: str
    finished_at: str | None
    status: str
    model: str
    adapter: str | None
    backend: str
    fingerprint: str
    suite: str
    suite_config: dict[str, Any]
    options: dict[str, Any]
    n_probes: int
    skipped_bad: int
    generated: int
    cached: int
    metrics: dict[str, Any] | None


class Store:
    """One workspace's store. Open with `Store.open(workspace)`; an SQLAlchemy URL also works."""

    def __init__(self, engine: Engine, workspace: Path) -> None:
        self.engine = engine
        self.workspace = workspace

    @classmethod
    def open(cls, workspace: str | os.PathLike[str], url: str | None = None) -> Store:
        ws = Path(workspace)
        url = url or os.environ.get("WORKBENCH_STORE_URL")
        if url is None:
            ws.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{ws / 'store.sqlite'}"
        try:
            engine = create_engine(url, future=True)
        except ArgumentError as e:
            raise WorkbenchError(f"store URL `{url}` is not an SQLAlchemy URL ({e}); e.g. "
                                 "postgresql+psycopg2://user@host/db") from None
        except ImportError as e:  # the URL names a database driver that is not installed
            if make_url(url).get_backend_name() == "postgresql":
                pip = "pip install -e '.[postgres]'   (psycopg2; name it in the URL: postgresql+psycopg2://...)"
            else:
                pip = f"pip install <the package that provides `{e.name}`>"
            raise MissingDependencyError(f"store `{_shown(url)}` (driver `{e.name}`)", pip) from None
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
        try:
            _create_all(engine)
            version = _schema_version(engine)
            if version > t.SCHEMA_VERSION:
                raise WorkbenchError(
                    f"store {_shown(url)} has schema version {version}, newer than this workbench's "
                    f"{t.SCHEMA_VERSION}; upgrade the workbench, or use a new --workspace"
                )
            if version < t.SCHEMA_VERSION:
                _migrate(engine, version)
        except DBAPIError as e:  # unreachable server, missing rights, ...: the driver's own words
            raise WorkbenchError(f"cannot open store {_shown(url)}: {e.orig}") from e
        return cls(engine, ws)

    # -- runs -------------------------------------------------------------------------------------
    def create_run(self, *, model: str, adapter: str | None, backend: str, fingerprint: str, suite: str,
                   suite_config: Mapping[str, Any], options: Mapping[str, Any], n_probes: int,
                   skipped_bad: int) -> str:
        run_id = new_id("run")
        with self.engine.begin() as c:
            c.execute(insert(t.runs).values(
                id=run_id, created_at=utcnow(), status="running", model=model, adapter=adapter,
                backend=backend, fingerprint=fingerprint, suite=suite,
                suite_json=json.dumps(suite_config, sort_keys=True), options_json=json.dumps(options, sort_keys=True),
                n_probes=n_probes, skipped_bad=skipped_bad, generated=0, cached=0,
            ))
        return run_id

    def finish_run(self, run_id: str, *, status: str, metrics: Mapping[str, Any] | None,
                   generated: int, cached: int) -> None:
        with self.engine.begin() as c:
            c.execute(update(t.runs).where(t.runs.c.id == run_id).values(
                status=status, finished_at=utcnow(), generated=generated, cached=cached,
                metrics_json=json.dumps(metrics) if metrics is not None else None,
            ))

    def touch_run(self, run_id: str) -> None:
        """A sign of life of a running run (the runner calls it after every finished batch)."""
        with self.engine.begin() as c:
            c.execute(update(t.runs).where(t.runs.c.id == run_id).values(heartbeat_at=utcnow()))

    def list_runs(self) -> list[RunRecord]:
        with self.engine.connect() as c:
            rows = c.execute(select(t.runs).order_by(t.runs.c.created_at, t.runs.c.id)).mappings().all()
        return [_run_record(r) for r in rows]

    def get_run(self, run_id: str) -> RunRecord:
        with self.engine.connect() as c:
            row = c.execute(select(t.runs).where(t.runs.c.id == run_id)).mappings().first()
            if row is None:
                ids = [r[0] for r in c.execute(select(t.runs.c.id))]
                # "latest" and unique prefixes are conveniences for people typing ids.
                if run_id == "latest" and ids:
                    return self.list_runs()[-1]
                matches = [i for i in ids if i.startswith(run_id)]
                if len(matches) == 1:
                    return self.get_run(matches[0])
                from workbench.errors import did_you_mean

                raise WorkbenchError(f"no run `{run_id}` in {self.workspace}.{did_you_mean(run_id, ids)}")
        return _run_record(row)

    def add_probes(self, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
        with self.engine.begin() as c:
            c.execute(insert(t.probes), [
                {"run_id": run_id, "probe_id": r["id"], "position": i, "data_json": json.dumps(r)}
                for i, r in enumerate(rows)
            ])

    def probe_rows(self, run_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            rows = c.execute(select(t.probes.c.data_json).where(t.probes.c.run_id == run_id)
                             .order_by(t.probes.c.position)).all()
        return [json.loads(r[0]) for r in rows]

    def add_answers(self, run_id: str, rows: Iterable[Mapping[str, Any]]) -> None:
        batch = [{"run_id": run_id, **r} for r in rows]
        if batch:
            with self.engine.begin() as c:
                c.execute(insert(t.answers), batch)

    def answer_rows(self, run_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            rows = c.execute(select(t.answers).where(t.answers.c.run_id == run_id)
                             .order_by(t.answers.c.probe_id, t.answers.c.variant, t.answers.c.kind,
                                       t.answers.c.sample_index)).mappings().all()
        return [dict(r) for r in rows]

    # -- generation cache -------------------------------------------------------------------------
    def cache_get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        with self.engine.connect() as c:
            for i in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
                chunk = keys[i : i + 500]
                for r in c.execute(select(t.gen_cache).where(t.gen_cache.c.key.in_(chunk))).mappings():
                    found[r["key"]] = dict(r)
        return found

    def cache_put_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        with self.engine.begin() as c:
            _insert_ignore(c, rows)

    def connect(self) -> Connection:
        return self.engine.connect()


def _insert_ignore(c: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    now = utcnow()
    values = [{"created_at": now, **r} for r in rows]
    if c.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        c.execute(sqlite_insert(t.gen_cache).on_conflict_do_nothing(), values)
    elif c.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        c.execute(pg_insert(t.gen_cache).on_conflict_do_nothing(), values)
    else:
        existing = {r[0] for r in c.execute(select(t.gen_cache.c.key).where(
            t.gen_cache.c.key.in_([v["key"] for v in values])))}
        fresh = [v for v in values if v["key"] not in existing]
        if fresh:
            c.execute(insert(t.gen_cache), fresh)


def _shown(url: str) -> str:
    """The store URL for messages, password masked."""
    return str(make_url(url).render_as_string(hide_password=True))


#: pg_advisory_xact_lock key that serializes schema creation on PostgreSQL (any constant; "wbench").
_PG_SCHEMA_LOCK = 0x7762656E6368


def _create_all(engine: Engine) -> None:
    """create_all checks for each table, then creates it: two processes opening a new store at once (a CLI
    run and the app, a test polling a subprocess) can both see "missing". On PostgreSQL the losers fail in
    the catalogue (a unique violation on pg_type, measured), so creation takes a transaction-scoped
    advisory lock; elsewhere the loser retries the check."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as c:
            c.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK})
            t.metadata.create_all(c)
        return
    for attempt in range(5):
        try:
            t.metadata.create_all(engine)
            return
        except (OperationalError, ProgrammingError) as e:
            if "already exists" not in str(e.orig) or attempt == 4:
                raise


def _schema_version(engine: Engine) -> int:
    """The store's schema version, stamping ours on a new store. Two processes opening a new store at once
    can both read "no version" and both insert it; the loser's insert fails on the key, and it reads again."""
    for _ in range(2):
        with engine.connect() as c:
            row = c.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version")).first()
        if row is not None:
            return int(row[0])
        try:
            with engine.begin() as c:
                c.execute(insert(t.meta).values(key="schema_version", value=str(t.SCHEMA_VERSION)))
            return t.SCHEMA_VERSION
        except IntegrityError:
            continue
    raise WorkbenchError("store schema version could not be read or written")


def _migrate(engine: Engine, version: int) -> None:
    """Add the columns of every version after `version` (schema.ADDED_COLUMNS), then stamp the new version.
    Two processes may migrate at once: a column the other one added already is fine."""
    for v in range(version + 1, t.SCHEMA_VERSION + 1):
        for table, column, ddl in t.ADDED_COLUMNS.get(v, []):
            try:
                with engine.begin() as c:
                    c.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}"))
            except (OperationalError, ProgrammingError) as e:
                if "duplicate column" not in str(e.orig) and "already exists" not in str(e.orig):
                    raise
    with engine.begin() as c:
        c.execute(update(t.meta).where(t.meta.c.key == "schema_version").values(value=str(t.SCHEMA_VERSION)))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process kills
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _run_record(r: Any) -> RunRecord:
    return RunRecord(
        id=r["id"], created_at=r["created_at"], finished_at=r["finished_at"], status=r["status"],
        model=r["model"], adapter=r["adapter"], backend=r["backend"], fingerprint=r["fingerprint"],
        suite=r["suite"], suite_config=json.loads(r["suite_json"]), options=json.loads(r["options_json"]),
        n_probes=r["n_probes"], skipped_bad=r["skipped_bad"], generated=r["generated"], cached=r["cached"],
        metrics=json.loads(r["metrics_json"]) if r["metrics_json"] else None,
    )

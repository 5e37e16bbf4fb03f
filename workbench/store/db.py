"""The workspace store: SQLite (WAL) in `<workspace>/store.sqlite`, or any SQLAlchemy URL.

Writes are small transactions committed as work finishes, so a killed process loses nothing it
finished; readers (the app) see a run in progress while the CLI writes it.

A new SQLite store is built under a temporary name and linked into place complete, so a 0-byte
`store.sqlite` is never ours and is refused (a truncated copy) instead of silently starting over. A
workspace the user cannot write is opened read-only: `runs`, `show`, `export --out` work, a write is a
clear error. A damaged database file is a clear error naming the file, never a driver traceback.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, insert, make_url, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, OperationalError, ProgrammingError

from workbench.errors import MissingDependencyError, WorkbenchError, did_you_mean
from workbench.store import liveness
from workbench.store import schema as t
from workbench.store.atomic import held_signals

log = logging.getLogger(__name__)

STORE_FILE = "store.sqlite"
#: How to pick an interrupted run up again (shown by `runs`, `show` and the app).
RESUME_HINT = ("resume it with `workbench eval --resume {run}`, or rerun the same `workbench eval`: finished "
               "answers come from the cache, only the missing ones are generated")


def utcnow() -> str:
    # microseconds: rows are listed by this stamp, and two runs (or gates) often start in the same second
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def shown_time(stamp: str) -> str:
    """A stored UTC stamp as a table shows it: to the second, no offset (`2026-11-23 21:55:26`). Stores keep
    microseconds so that order is exact; people read seconds."""
    return stamp.replace("T", " ")[:19]


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
    pid: int | None = None  # the writing process (v2)
    host: str | None = None  # its host and pid namespace (liveness.host_id)
    heartbeat_at: str | None = None  # its last sign of life (create_run, then touch_run per batch)
    #: Why a `running` run reads as interrupted (its process is gone) and how to resume it; else None.
    note: str | None = None


class Store:
    """One workspace's store. Open with `Store.open(workspace)`; an SQLAlchemy URL also works."""

    def __init__(self, engine: Engine, workspace: Path, *, readonly: bool = False) -> None:
        self.engine = engine
        self.workspace = workspace
        self.readonly = readonly

    @classmethod
    def open(cls, workspace: str | os.PathLike[str], url: str | None = None) -> Store:
        ws = Path(workspace)
        url = url or os.environ.get("WORKBENCH_STORE_URL")
        url_given = url
        readonly, shown = False, ""
        if url is None:
            path, readonly = _workspace_store(ws)
            shown = str(path)
            url = f"sqlite:///{path}"
            if readonly:
                # A read-only WAL database needs its -shm file; without one (a cleanly closed store in a
                # directory we cannot write) only `immutable` opens it: exact when no -wal is left, and it
                # takes no locks, so a writer under another account is not seen while this process reads.
                wal = Path(f"{path}-wal")
                mode = "mode=ro" if wal.exists() and wal.stat().st_size else "immutable=1"
                url = f"sqlite:///file:{quote(str(path.resolve()))}?{mode}&uri=true"
        engine = _engine(url)
        shown = shown or _shown(url)
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_readonly_pragmas if readonly else _sqlite_pragmas)
        try:
            if url_given is None:  # a workspace store is created whole (_create_store_file): a gap is damage
                _require_meta(engine, shown)
            if not readonly:
                _create_all(engine)
            version = _schema_version(engine, readonly=readonly)
            if version > t.SCHEMA_VERSION:
                raise WorkbenchError(
                    f"store {shown} has schema version {version}, newer than this workbench's "
                    f"{t.SCHEMA_VERSION}; upgrade the workbench, or use a new --workspace"
                )
            if version < t.SCHEMA_VERSION:
                if readonly:
                    raise WorkbenchError(f"store {shown} has schema version {version} and the workspace is "
                                         "read-only, so it cannot be upgraded; open it once with write access")
                log.info("store %s: upgrading its schema from version %d to %d", shown, version, t.SCHEMA_VERSION)
                _migrate(engine, version)
        except DBAPIError as e:  # unreachable server, missing rights, a damaged file: the driver's own words
            raise WorkbenchError(f"cannot open store {shown}: {e.orig}{_advice(str(e.orig))}") from e
        if engine.dialect.name != "sqlite":  # a server store: a restart or fail-over is waited for (RECONNECT_S)
            event.listen(engine, "do_connect", _reconnecting(shown))
        event.listen(engine, "handle_error", _store_errors(shown, readonly, engine.dialect.name))
        log.debug("store %s opened%s (schema version %d)", shown, " read-only" if readonly else "", version)
        return cls(engine, ws, readonly=readonly)

    # -- runs -------------------------------------------------------------------------------------
    def create_run(self, *, model: str, adapter: str | None, backend: str, fingerprint: str, suite: str,
                   suite_config: Mapping[str, Any], options: Mapping[str, Any], n_probes: int,
                   skipped_bad: int) -> str:
        run_id, now = new_id("run"), utcnow()
        with self.write() as c:
            c.execute(insert(t.runs).values(
                id=run_id, created_at=now, status="running", model=model, adapter=adapter,
                backend=backend, fingerprint=fingerprint, suite=suite,
                suite_json=json.dumps(suite_config, sort_keys=True), options_json=json.dumps(options, sort_keys=True),
                n_probes=n_probes, skipped_bad=skipped_bad, generated=0, cached=0,
                pid=os.getpid(), host=liveness.host_id(), heartbeat_at=now,
            ))
        return run_id

    def touch_run(self, run_id: str) -> None:
        """A sign of life of a running run (after each committed batch): see `store.liveness`."""
        with self.write() as c:
            c.execute(update(t.runs).where(t.runs.c.id == run_id).values(heartbeat_at=utcnow()))

    def finish_run(self, run_id: str, *, status: str, metrics: Mapping[str, Any] | None,
                   generated: int, cached: int) -> None:
        with self.write() as c:
            c.execute(update(t.runs).where(t.runs.c.id == run_id).values(
                status=status, finished_at=utcnow(), generated=generated, cached=cached,
                metrics_json=json.dumps(metrics) if metrics is not None else None,
            ))

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
                matches = sorted(i for i in ids if i.startswith(run_id)) if run_id else []
                if len(matches) == 1:
                    return self.get_run(matches[0])
                if matches:
                    shown = ", ".join(matches[:10]) + (f" and {len(matches) - 10} more" if len(matches) > 10 else "")
                    raise WorkbenchError(f"run prefix `{run_id}` matches {len(matches)} runs in {self.workspace}: "
                                         f"{shown}; give more of the id")
                raise WorkbenchError(f"no run `{run_id}` in {self.workspace}.{did_you_mean(run_id, ids)}")
        return _run_record(row)

    def add_probes(self, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        with self.write() as c:
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
            with self.write() as c:
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
        with self.write() as c:
            _insert_ignore(c, rows)

    def connect(self) -> Connection:
        return self.engine.connect()

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (committed at the end, rolled back on an error) that Ctrl-C and SIGTERM do not
        cut in half: one that arrives inside is raised after it (see `atomic`). Every write once the store is open
        goes through here."""
        with held_signals(), self.engine.begin() as c:
            yield c


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


def _require_meta(engine: Engine, shown: str) -> None:
    """An existing workspace store has its `meta` table and schema version (a new one is made with both): a
    missing one is refused, never re-created, so a reader never writes and a damaged store is never papered
    over."""
    from sqlalchemy import inspect

    with engine.connect() as c:
        if not inspect(c).has_table("meta"):
            raise WorkbenchError(f"store {shown} has no `meta` table: not a workbench store, or a damaged one "
                                 "(nothing was changed; restore it from a backup or use a new --workspace)")
        if c.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version")).first() is None:
            raise WorkbenchError(f"store {shown} has no schema version: not a workbench store, or a damaged one "
                                 "(nothing was changed; restore it from a backup or use a new --workspace)")


def _schema_version(engine: Engine, *, readonly: bool = False) -> int:
    """The store's schema version, stamping ours on a new store. Two processes opening a new store at once
    can both read "no version" and both insert it; the loser's insert fails on the key, and it reads again."""
    for _ in range(2):
        with engine.connect() as c:
            row = c.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version")).first()
        if row is not None:
            try:
                return int(row[0])
            except (TypeError, ValueError):
                raise WorkbenchError(f"{engine.url.database}: meta.schema_version is {str(row[0])[:40]!r}, not a "
                                     "number: the store is damaged (nothing was changed)") from None
        if readonly:
            raise WorkbenchError(f"{engine.url.database}: not a workbench store (no schema version)")
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


def _sqlite_readonly_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _engine(url: str) -> Engine:
    try:
        # A server's pooled connections die with its restart: each is checked (a round trip) before it is handed out,
        # so the first query after a restart runs on a fresh connection instead of failing.
        server = {} if make_url(url).get_backend_name() == "sqlite" else {"pool_pre_ping": True}
        return create_engine(url, future=True, **server)
    except ArgumentError as e:
        raise WorkbenchError(f"store URL `{url}` is not an SQLAlchemy URL ({e}); e.g. "
                             "postgresql+psycopg2://user@host/db") from None
    except ImportError as e:  # the URL names a database driver that is not installed
        if make_url(url).get_backend_name() == "postgresql":
            pip = "pip install -e '.[postgres]'   (psycopg2; name it in the URL: postgresql+psycopg2://...)"
        else:
            pip = f"pip install <the package that provides `{e.name}`>"
        raise MissingDependencyError(f"store `{_shown(url)}` (driver `{e.name}`)", pip) from None


def ensure_workspace(ws: Path) -> None:
    """The workspace directory exists (made when missing); a file in its place is a WorkbenchError."""
    if ws.exists() and not ws.is_dir():
        raise WorkbenchError(f"workspace `{ws}` is not a directory; pass --workspace DIR (created if missing)")
    try:
        ws.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WorkbenchError(f"cannot create workspace `{ws}`: {e.strerror}") from None


def _workspace_store(ws: Path) -> tuple[Path, bool]:
    """The workspace's store file, created (complete) when missing; and whether it must be opened read-only.
    A workspace that is a file (or /dev/null), an empty store file and an unwritable new workspace are
    WorkbenchErrors."""
    ensure_workspace(ws)
    path = ws / STORE_FILE
    writable = os.access(ws, os.W_OK)
    if path.exists() or path.is_symlink():
        if not path.is_file():
            raise WorkbenchError(f"{path} is not a file (a workbench store is an SQLite file)")
        wal = Path(f"{path}-wal")
        if path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size):
            raise WorkbenchError(f"{path} is empty (0 bytes): not a workbench store (a truncated copy?). Restore it "
                                 "from a backup, or move it away to start a new store in this workspace")
        return path, not (writable and os.access(path, os.W_OK))
    if not writable:
        raise WorkbenchError(f"workspace `{ws}` holds no store and is not writable, so none can be created")
    _create_store_file(path)
    return path, False


def _create_store_file(path: Path) -> None:
    """Build a new store (tables, schema version) under a temporary name, then hard-link it into place: other
    processes see no store or a complete one, never a half-made or 0-byte file. When another process links its
    own first, theirs is kept. (Closing the temporary database checkpoints and removes its WAL.)"""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
    engine = create_engine(f"sqlite:///{tmp}", future=True)
    event.listen(engine, "connect", _sqlite_pragmas)
    try:
        t.metadata.create_all(engine)
        with engine.begin() as c:
            c.execute(insert(t.meta).values(key="schema_version", value=str(t.SCHEMA_VERSION)))
        engine.dispose()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: a plain rename, when still missing
            if not path.exists():
                os.replace(tmp, path)
    except (OSError, DBAPIError) as e:
        raise WorkbenchError(f"cannot create the store {path}: {getattr(e, 'orig', None) or e}") from None
    finally:
        engine.dispose()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def _advice(message: str) -> str:
    if "malformed" in message or "not a database" in message:
        return (" (the file is damaged or not a workbench store: keep a copy, try `sqlite3 store.sqlite .recover`, "
                "or use a new --workspace)")
    return ""


#: Seconds a server store that was reached once is waited for when connecting to it fails (a restart, a fail-over):
#: connecting is retried until then, so a command or the app rides through a restart. A statement whose connection
#: broke is never retried (its transaction may have been committed): it is refused, saying so (`_store_errors`).
RECONNECT_S = 30.0


def _reconnecting(shown: str) -> Any:
    """A `do_connect` hook: a failed connection attempt is tried again (backing off to 2 s) for RECONNECT_S."""
    import time

    def connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        deadline, wait = time.monotonic() + RECONNECT_S, 0.1
        while True:
            try:
                return dialect.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError as e:
                if time.monotonic() + wait > deadline:
                    raise
                if wait == 0.1:
                    log.warning("store %s unreachable (%s); retrying for up to %.0f s", shown,
                                str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__, RECONNECT_S)
                time.sleep(wait)
                wait = min(2 * wait, 2.0)

    return connect


def _store_errors(shown: str, readonly: bool, dialect: str = "sqlite") -> Any:
    """A `handle_error` hook: damaged-file, read-only, busy and lost-server errors from any query become
    WorkbenchErrors that say what happened to the action."""

    def hook(ctx: Any) -> None:
        message = str(ctx.original_exception)
        if ctx.is_pre_ping:  # a pooled connection found dead before use: the pool replaces it
            return
        if dialect != "sqlite":
            reason = message.strip().splitlines()[0] if message.strip() else type(ctx.original_exception).__name__
            if ctx.connection is None and isinstance(ctx.sqlalchemy_exception, OperationalError):
                raise WorkbenchError(f"store {shown} is unreachable ({reason}; retried for {RECONNECT_S:.0f} s): "
                                     "nothing was sent, so nothing of this action was recorded; try again once the "
                                     "database server is back")
            if ctx.is_disconnect:
                raise WorkbenchError(f"store {shown}: the connection to the database server broke ({reason}); this "
                                     "action was cut short and may or may not have been recorded: look before "
                                     "repeating it (the store reconnects by itself once the server is back)")
            return
        if "database is locked" in message:
            raise WorkbenchError(f"store {shown} is busy: another process held its write lock past the wait "
                                 f"({message}); nothing of this action was recorded: try again")
        if "malformed" in message or "not a database" in message:
            raise WorkbenchError(f"store {shown} is damaged: {message}{_advice(message)}")
        if "readonly" in message or "read-only" in message:
            why = "the workspace is not writable" if readonly else "the store file is not writable"
            raise WorkbenchError(f"store {shown} is read-only ({why}): reading works (runs, show, export "
                                 "--out ELSEWHERE), this command needs to write")
        if "disk I/O error" in message or "disk is full" in message:
            raise WorkbenchError(f"store {shown}: {message}")

    return hook


def _stored_json(r: Any, column: str, kind: type, *, optional: bool = False) -> Any:
    """A run row's JSON column, checked: stored JSON is not trusted (a hand edit, a damaged copy). A bad value is
    a WorkbenchError naming the run and the field, never a traceback."""
    raw = r[column]
    if raw is None and optional:
        return None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as e:
        raise WorkbenchError(f"store: run {r['id']}: field `{column}` is not valid JSON ({e}); the store is "
                             "damaged") from None
    if not isinstance(value, kind) and not (optional and value is None):
        raise WorkbenchError(f"store: run {r['id']}: field `{column}` holds {type(value).__name__}, not "
                             f"{kind.__name__}; the store is damaged")
    return value


def _run_record(r: Any) -> RunRecord:
    state = liveness.judge(r["status"], pid=r["pid"], host=r["host"], heartbeat_at=r["heartbeat_at"],
                           created_at=r["created_at"])
    note = None if state.why is None else f"interrupted: {state.why}; " + RESUME_HINT.format(run=r["id"])
    return RunRecord(
        id=r["id"], created_at=r["created_at"], finished_at=r["finished_at"], status=state.status,
        model=r["model"], adapter=r["adapter"], backend=r["backend"], fingerprint=r["fingerprint"],
        suite=r["suite"], suite_config=_stored_json(r, "suite_json", dict),
        options=_stored_json(r, "options_json", dict),
        n_probes=r["n_probes"], skipped_bad=r["skipped_bad"], generated=r["generated"], cached=r["cached"],
        metrics=_stored_json(r, "metrics_json", dict, optional=True) if r["metrics_json"] else None,
        pid=r["pid"], host=r["host"], heartbeat_at=r["heartbeat_at"], note=note,
    )

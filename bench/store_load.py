"""A team on one store: many reviewers through the app and CLI writers at once, with faults, nothing acknowledged lost.

For each store (SQLite in the workspace; PostgreSQL, a throwaway cluster started here that listens on a Unix socket
only), on loopback only:

1. seed: a baseline and a candidate run of the test world's model, `--gates` recorded gates and `--reports` imported
   user reports (each asking its own question);
2. start the app (`workbench app`, a process of its own, 127.0.0.1) and, for `--seconds`, let `--reviewers` reviewers
   (threads, each its own HTTP session, calling the app's HTTP API as a browser does: `queue/join`, then the event
   stream) loop over four actions: open the decision queue, read a gate's evidence, decide a user report, sign a gate
   off (over an override where its verdict asks for one) or block it. Meanwhile two CLI writers (`workbench eval` with
   samples and new seeds) write answers and `workbench regress` records a gate;
3. faults under that load, each at its own time: `kill-cli` (a third writer SIGKILLed after its first committed
   batch, then `eval --resume`), `kill-app` (the app SIGKILLed, then started again), `restart-store` (PostgreSQL
   restarted, the app left running), `disk-full` (SQLite: the workspace's file system filled, then freed; needs root
   to mount a small tmpfs);
4. check the store: every acknowledged decision is there exactly once, on the gate or report and under the reviewer
   it was made for; a call that was not acknowledged left at most one row; the writers' runs are complete with no
   answer twice.

Figures per store: requests per second, p50/p95/p99 latency and errors per action, the checks, and each fault's
window (when it started, when the first call succeeded again) and the messages reviewers got meanwhile.

    .venv/bin/python bench/store_load.py [--stores sqlite,postgresql] [--reviewers 20] [--seconds 60]
        [--faults kill-cli,kill-app,restart-store,disk-full] [--json docs/benchmarks/data/store_load.json]

`tests/test_store_load.py` runs the same load, short (6 reviewers, a few rounds, the cheapest fault: a CLI writer
SIGKILLed mid-write), on both stores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import pwd
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

for _k, _v in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "GRADIO_ANALYTICS_ENABLED": "False", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}.items():
    os.environ.setdefault(_k, _v)

#: The four actions of a reviewer's round, and the app's event each calls.
ACTIONS = {"open_gates": "decisions", "read_evidence": "decision_evidence", "decide_report": "decide_report",
           "sign_off": "decide_signoff", "block": "decide_block"}
#: Where a decision's message is among the outputs of its event (apptabs/decisions.py, apptabs/reports.py).
MESSAGE_AT = {"decide_report": 0, "decide_signoff": 10, "decide_block": 10}
NOT_RECORDED = "**not recorded**"
CALL_TIMEOUT_S = 60.0
#: How long the disk-full fault keeps the workspace's file system full.
DISK_FULL_S = 3.0


# -- PostgreSQL, throwaway ------------------------------------------------------------------------------------------


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server program: on PATH, or the newest of Debian's /usr/lib/postgresql/<version>/bin."""
    import glob

    found = shutil.which(name)
    if found:
        return found
    versions = glob.glob(f"/usr/lib/postgresql/*/bin/{name}")
    return max(versions, key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0, default=None)


class Postgres:
    """A cluster in a temporary folder that listens on a Unix socket there and on no TCP port; run as `postgres`
    when this is root (initdb refuses root). `missing()` says why none can start here."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="wb-pg-load-"))
        self.data = self.root / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    @staticmethod
    def missing() -> str | None:
        import importlib.util

        if pg_bin("initdb") is None or pg_bin("pg_ctl") is None:
            return "needs PostgreSQL's initdb and pg_ctl (apt-get install postgresql)"
        if importlib.util.find_spec("psycopg2") is None:
            return "needs psycopg2 (pip install -e '.[postgres]')"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no `postgres` user to run the server as"
        return None

    def _ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.as_user, str(pg_bin("pg_ctl")), "-D", str(self.data), *args],
                              capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        if not self.data.exists():
            subprocess.run([*self.as_user, str(pg_bin("initdb")), "-D", str(self.data), "-A", "trust", "-U",
                            "postgres"], check=True, capture_output=True, text=True, timeout=120)
        done = self._ctl("-l", str(self.root / "log"), "-w", "start", "-o",
                         f"-k {self.root} -c listen_addresses='' -c max_connections=200")
        if done.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr}\n{log[-2000:]}")

    def restart(self) -> None:
        """A fast restart (`pg_ctl restart -m fast`): open sessions are ended, in-flight transactions rolled back."""
        done = self._ctl("-l", str(self.root / "log"), "-w", "-m", "fast", "restart", "-o",
                         f"-k {self.root} -c listen_addresses='' -c max_connections=200")
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl restart failed: {done.stderr}")

    def database(self, name: str) -> str:
        """A new, empty database; its SQLAlchemy URL."""
        from sqlalchemy import create_engine, text

        engine = create_engine(f"postgresql+psycopg2://postgres@/postgres?host={self.root}",
                               isolation_level="AUTOCOMMIT")
        with engine.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            c.execute(text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        return f"postgresql+psycopg2://postgres@/{name}?host={self.root}"

    def stop(self) -> None:
        self._ctl("-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


# -- the seeded workspace -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    workspace: Path
    url: str | None  # None: the workspace's SQLite store
    model: str
    suite: str
    baseline: str
    candidate: str
    gates: dict[str, str]  # gate id -> its recorded verdict
    reports: list[str]


def seed(workspace: Path, url: str | None, model: str, suite: str, *, gates: int, reports: int) -> Seeded:
    """A baseline and a candidate run (the same model: the candidate comes from the generation cache), `gates`
    recorded gates on the pair and `reports` imported user reports, each asking its own question."""
    from workbench.gating import gate_runs
    from workbench.probes import resolve_probes
    from workbench.reports import Redactor, read_reports
    from workbench.reports.queue import add_reports
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store, utcnow
    from workbench.types import ModelSpec

    workspace.mkdir(parents=True, exist_ok=True)
    store = Store.open(workspace, url=url)
    loaded_suite, loaded = resolve_probes(suite)
    spec, opts = ModelSpec(model=model, dtype="float32"), EvalOptions(bootstrap=0)
    base = run_eval(store, spec, loaded_suite, loaded, opts).run_id
    cand = run_eval(store, spec, loaded_suite, loaded, opts).run_id
    recorded: dict[str, str] = {}
    for _ in range(gates):
        g = gate_runs(store, base, cand)
        recorded[g.id] = str(g.result.verdict)
    src = workspace / "user-reports.jsonl"
    src.write_text("".join(json.dumps({"conversation_id": f"c{i}", "rating": -1, "comment": "made up",
                                       "messages": [{"role": "user", "content": f"Where is landmark number {i}?"},
                                                    {"role": "assistant", "content": f"In city {i}."}]}) + "\n"
                           for i in range(reports)))
    now = utcnow()
    read = [r for r in read_reports(src, columns={}, redactor=Redactor(), imported_at=now)
            if not isinstance(r, Exception)]
    add_reports(store, read, imported_at=now)
    store.engine.dispose()
    return Seeded(workspace, url, model, suite, base, cand, recorded, [r.id for r in read])


# -- processes: the app and the CLI ----------------------------------------------------------------------------------

#: Starts `workbench ARGS` with extra environment variables; returns a Popen-like (pid, poll, wait, communicate).
Launcher = Callable[[list[str], dict[str, str]], Any]


def popen_launcher(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hallucination_workbench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env}, start_new_session=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class App:
    """`workbench app` over the seeded workspace on 127.0.0.1:`port`, as its own process (SIGKILL-able)."""

    def __init__(self, seeded: Seeded, launch: Launcher, port: int | None = None) -> None:
        self.seeded, self.launch = seeded, launch
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.proc: Any = None

    def start(self, timeout: float = 120.0) -> float:
        """Start it and wait until it serves its config; the seconds that took."""
        import httpx

        t0 = time.monotonic()
        env = {"WORKBENCH_STORE_URL": self.seeded.url} if self.seeded.url else {}
        self.proc = self.launch(["app", "--workspace", str(self.seeded.workspace), "--port", str(self.port)], env)
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                _, err = self.proc.communicate()
                raise RuntimeError(f"the app exited ({self.proc.returncode}): {err[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "config", timeout=5).status_code == 200:
                    return time.monotonic() - t0
            time.sleep(0.2)
        raise RuntimeError(f"the app did not serve {self.url} within {timeout:.0f} s")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)


class InProcessApp:
    """The app in this process (`app.launch`), as `App` offers it but without `kill`: a test's cheaper stand-in (no
    second interpreter importing gradio) where no fault kills the app."""

    def __init__(self, seeded: Seeded) -> None:
        self.seeded = seeded
        self.url = ""
        self.demo: Any = None

    def start(self) -> float:
        import app as webapp

        t0 = time.monotonic()
        before = os.environ.pop("WORKBENCH_STORE_URL", None)
        if self.seeded.url:  # the app opens its store as `workbench app` does: from the workspace or this variable
            os.environ["WORKBENCH_STORE_URL"] = self.seeded.url
        try:
            self.demo, self.url = webapp.launch(self.seeded.workspace, port=free_port(), prevent_thread_lock=True,
                                                quiet=True)
        finally:
            os.environ.pop("WORKBENCH_STORE_URL", None)
            if before is not None:
                os.environ["WORKBENCH_STORE_URL"] = before
        return time.monotonic() - t0

    def kill(self) -> None:
        raise RuntimeError("the app runs in this process: the kill-app fault needs `App`")

    def stop(self) -> None:
        self.demo.close()


class CallFailed(Exception):
    """An app call that did not complete: no connection, an HTTP error, or the handler's error."""


class Client:
    """One reviewer's browser: its own session, calling events by their index as the page does (`queue/join`, then
    the event stream until `process_completed`), so the private events the page uses are called as it calls them."""

    def __init__(self, url: str) -> None:
        import httpx

        self.http = httpx.Client(base_url=url, timeout=CALL_TIMEOUT_S)
        self.session = uuid.uuid4().hex
        self.events: dict[str, int] = {}

    def connect(self) -> None:
        config = self.http.get("config").raise_for_status().json()
        self.events = {d["api_name"]: d["id"] for d in config["dependencies"] if d.get("api_name")}

    def call(self, event: str, data: list[Any]) -> list[Any]:
        import httpx

        try:
            if not self.events:
                self.connect()
            joined = self.http.post("gradio_api/queue/join", json={
                "data": data, "fn_index": self.events[event], "session_hash": self.session, "event_data": None,
                "trigger_id": None})
            joined.raise_for_status()
            event_id = joined.json()["event_id"]
            with self.http.stream("GET", "gradio_api/queue/data", params={"session_hash": self.session}) as s:
                for line in s.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    msg = json.loads(line[5:])
                    if msg.get("event_id") == event_id and msg.get("msg") == "process_completed":
                        if not msg.get("success"):
                            raise CallFailed(str((msg.get("output") or {}).get("error") or msg.get("title")))
                        return list(msg["output"]["data"])
        except httpx.HTTPError as e:
            self.events = {}  # the app may be another process now: read its config again
            raise CallFailed(f"{type(e).__name__}: {e}") from None
        raise CallFailed("the event stream ended before the call completed")


# -- reviewers ------------------------------------------------------------------------------------------------------


@dataclass
class Call:
    action: str
    reviewer: str
    at: float  # seconds since the load started
    seconds: float
    ok: bool  # completed (the app answered, whatever it said)
    acknowledged: bool = False  # a decision the app said it recorded
    error: str = ""  # why not completed, or the refusal the app showed
    key: str = ""  # a decision's unique reason / note, to find its row afterwards
    target: str = ""  # the gate or report decided
    decision: str = ""


@dataclass
class Load:
    """What the reviewers did, shared by their threads (list.append is atomic)."""

    seeded: Seeded
    t0: float = field(default_factory=time.monotonic)
    calls: list[Call] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


def reviewer(load: Load, url: str, name: str, rounds: int | None, seed: int) -> None:
    """Loop over the four actions until `load.stop` (or `rounds` rounds); every call recorded in `load.calls`."""
    rng = random.Random(seed)
    client = Client(url)
    gates, reports = list(load.seeded.gates), load.seeded.reports
    n = 0
    while not load.stop.is_set() and (rounds is None or n < rounds):
        n += 1
        gate = rng.choice(gates)
        report = reports[rng.randrange(len(reports))]
        key = f"{name}/{n}"
        decision = "block" if rng.random() < 0.5 else "sign_off"
        override = decision == "sign_off" and load.seeded.gates[gate] != "pass"
        steps: list[tuple[str, list[Any], dict[str, str]]] = [
            ("open_gates", [""], {}),
            ("read_evidence", [gate], {}),
            # The form, then the queue's filters as the tab sends them: status, source, since, until, order, min risk.
            ("decide_report", [report, "hallucinated", f"answer of {key}", False, name, f"report {key}", "", "", "",
                               "", "reported", ""],
             {"key": f"report {key}", "target": report, "decision": "hallucinated"}),
            (decision, [gate, name, f"gate {key}", override, f"override {key}" if override else "", False],
             {"key": f"gate {key}", "target": gate, "decision": "signoff" if decision == "sign_off" else "block"}),
        ]
        for action, data, about in steps:
            if load.stop.is_set():
                return
            t = time.monotonic()
            call = Call(action, name, t - load.t0, 0.0, False, key=about.get("key", ""),
                        target=about.get("target", ""), decision=about.get("decision", ""))
            try:
                out = client.call(ACTIONS[action], data)
                call.ok = True
                event = ACTIONS[action]
                if event in MESSAGE_AT:
                    message = str(out[MESSAGE_AT[event]] or "")
                    call.acknowledged = bool(message) and not message.startswith(NOT_RECORDED)
                    call.error = "" if call.acknowledged else message[:300]
                elif action == "read_evidence" and gate not in str(out[0]):  # the note beside it says why
                    call.error = f"evidence of {gate} not shown: {str(out[1] or out[0])[:200]}"
            except CallFailed as e:
                call.error = str(e)[:300]
                time.sleep(0.2)  # the app is down or refusing: a person would wait a moment too
            call.seconds = time.monotonic() - t
            load.calls.append(call)


# -- checks ---------------------------------------------------------------------------------------------------------


def check_decisions(seeded: Seeded, calls: Sequence[Call]) -> dict[str, Any]:
    """Every acknowledged decision in the store exactly once, on its gate or report and under its reviewer; a call
    that was not acknowledged left at most one row (counted: recorded though the reviewer saw no answer)."""
    from sqlalchemy import select

    from workbench.store import Store
    from workbench.store import schema as t

    store = Store.open(seeded.workspace, url=seeded.url)
    with store.engine.connect() as c:
        gate_rows = c.execute(select(t.reviews.c.reason, t.reviews.c.gate_id, t.reviews.c.reviewer,
                                     t.reviews.c.new_value).where(t.reviews.c.target == "release")).all()
        report_rows = c.execute(select(t.report_decisions.c.note, t.report_decisions.c.report_id,
                                       t.report_decisions.c.reviewer, t.report_decisions.c.decision)).all()
    store.engine.dispose()
    rows: dict[str, list[tuple[str, str, str]]] = {}
    for key, target, who, what in [*gate_rows, *report_rows]:
        rows.setdefault(str(key), []).append((str(target), str(who), str(what)))
    lost: list[str] = []
    duplicated: list[str] = []
    misattributed: list[str] = []
    acknowledged = unacknowledged = recorded_unacknowledged = 0
    decided = [c for c in calls if c.key]
    for call in decided:
        found = rows.get(call.key, [])
        if len(found) > 1:
            duplicated.append(call.key)
        misattributed += [f"{call.key}: stored as {row}, made as {(call.target, call.reviewer, call.decision)}"
                          for row in found if row != (call.target, call.reviewer, call.decision)]
        if call.acknowledged:
            acknowledged += 1
            if not found:
                lost.append(call.key)
        else:
            unacknowledged += 1
            recorded_unacknowledged += bool(found)
    ours = {c.key for c in decided}
    return {"acknowledged": acknowledged, "lost": lost, "duplicated": duplicated, "misattributed": misattributed,
            "unacknowledged": unacknowledged, "recorded_unacknowledged": recorded_unacknowledged,
            "unknown_rows": sorted(k for k in rows if "/" in k and k not in ours)}  # a row no call made


def check_run(seeded: Seeded, run_id: str) -> dict[str, Any]:
    """A writer's run: its status, answers, and any answer stored twice (the key is the table's primary key, so a
    duplicate would be a bug in the schema itself: counted from the rows, not assumed)."""
    from sqlalchemy import func, select

    from workbench.store import Store
    from workbench.store import schema as t

    store = Store.open(seeded.workspace, url=seeded.url)
    run = store.get_run(run_id)
    a = t.answers.c
    with store.engine.connect() as c:
        n = c.execute(select(func.count()).select_from(t.answers).where(a.run_id == run_id)).scalar_one()
        distinct = c.execute(select(func.count()).select_from(
            select(a.probe_id, a.variant, a.kind, a.sample_index).where(a.run_id == run_id).distinct().subquery())
        ).scalar_one()
    store.engine.dispose()
    return {"run": run_id, "status": run.status, "answers": int(n), "duplicated": int(n) - int(distinct)}


# -- writers and faults ---------------------------------------------------------------------------------------------


@dataclass
class Writer:
    name: str
    args: list[str]
    proc: Any = None
    run_id: str = ""
    code: int | None = None
    stderr: str = ""


def eval_args(seeded: Seeded, seed: int, samples: int) -> list[str]:
    return ["eval", "--model", seeded.model, "--probes", seeded.suite, "--samples", str(samples), "--seed", str(seed),
            "--dtype", "float32", "--json", "--workspace", str(seeded.workspace)]


def store_env(seeded: Seeded) -> dict[str, str]:
    return {"WORKBENCH_STORE_URL": seeded.url} if seeded.url else {}


def finish_writer(w: Writer, timeout: float) -> None:
    out, err = w.proc.communicate(timeout=timeout)
    w.code, w.stderr = w.proc.returncode, err[-2000:]
    with contextlib.suppress(ValueError, KeyError, TypeError):
        found = json.loads(out.strip().splitlines()[-1])
        w.run_id = str(found.get("run_id") or found.get("gate_id") or "")


def run_of(seeded: Seeded, pid: int) -> tuple[str, int]:
    """The run a writer process created (by its pid) and its answers so far; ("", 0) before it has one."""
    from sqlalchemy import func, select

    from workbench.store import Store
    from workbench.store import schema as t

    store = Store.open(seeded.workspace, url=seeded.url)
    try:
        with store.engine.connect() as c:
            run = c.execute(select(t.runs.c.id).where(t.runs.c.pid == pid)).scalar()
            if run is None:
                return "", 0
            n = c.execute(select(func.count()).select_from(t.answers).where(t.answers.c.run_id == run)).scalar_one()
        return str(run), int(n)
    finally:
        store.engine.dispose()


def kill_cli_writer(seeded: Seeded, launch: Launcher, samples: int, timeout: float) -> dict[str, Any]:
    """SIGKILL a writer once it has committed answers, then `eval --resume` its run: the run reads interrupted in
    between, and ends done with every answer once."""
    t0 = time.monotonic()
    proc = launch(eval_args(seeded, 99, samples), store_env(seeded))
    run, n = "", 0
    while time.monotonic() - t0 < timeout and proc.poll() is None:
        run, n = run_of(seeded, proc.pid)
        if n:
            break
        time.sleep(0.05)
    killed = proc.poll() is None
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    from workbench.store import Store

    store = Store.open(seeded.workspace, url=seeded.url)
    between = store.get_run(run).status if run else "none"
    store.engine.dispose()
    tries = []
    for _ in range(3):  # refused (another fault at the same time: a full disk)? run it again, as its message says
        resumed = launch(["eval", "--resume", run, "--json", "--workspace", str(seeded.workspace)], store_env(seeded))
        _, err = resumed.communicate(timeout=timeout)
        tries.append({"exit": resumed.returncode, **({"error": err.strip().splitlines()[-1][-300:]}
                                                     if resumed.returncode and err.strip() else {})})
        if resumed.returncode == 0:
            break
        time.sleep(2.0)
    return {"fault": "kill-cli", "killed_mid_write": killed, "answers_at_kill": n, "status_between": between,
            "resumes": tries,
            **check_run(seeded, run)} if run else {"fault": "kill-cli", "killed_mid_write": False,
                                                  "note": "the writer finished or failed before its first batch"}


def first_decision_after(calls: Sequence[Call], at: float) -> float | None:
    """Seconds after `at` when a decision was first acknowledged again."""
    after = [c.at + c.seconds for c in calls if c.acknowledged and c.at >= at]
    return round(min(after) - at, 2) if after else None


def during(call: Call, windows: Sequence[tuple[float, float]], margin: float = 1.0) -> bool:
    """The call was under way while a fault was (a call in flight when the app was killed counts)."""
    return any(call.at <= end + margin and call.at + call.seconds >= start - margin for start, end in windows)


def messages_between(calls: Sequence[Call], start: float, end: float, n: int = 4) -> list[str]:
    """The distinct messages of the calls under way between `start` and `end` that failed or were refused."""
    seen: dict[str, None] = {}
    for c in calls:
        if c.error and during(c, [(start, end)], margin=0.0):
            seen.setdefault(c.error[:240], None)
    return list(seen)[:n]


@contextlib.contextmanager
def small_tmpfs(size: str) -> Iterator[Path | None]:
    """A small tmpfs (root's mount) for the disk-full fault; None where it cannot be mounted."""
    mnt = Path(tempfile.mkdtemp(prefix="wb-full-"))
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True,
                        timeout=30).returncode == 0
    try:
        yield mnt if ok else None
    finally:
        if ok:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)
        shutil.rmtree(mnt, ignore_errors=True)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        while True:
            f.write(b"\0" * (1 << 16))
            f.flush()
    return filler


# -- one store under load -------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))] if ordered else 0.0


def figures(calls: Sequence[Call], seconds: float) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for action in ACTIONS:
        mine = [c for c in calls if c.action == action]
        if not mine:
            continue
        ms = [1000 * c.seconds for c in mine if c.ok]
        per[action] = {"calls": len(mine), "errors": sum(not c.ok for c in mine),
                       "refused": sum(c.ok and bool(c.error) for c in mine),
                       "p50_ms": round(percentile(ms, 50), 1), "p95_ms": round(percentile(ms, 95), 1),
                       "p99_ms": round(percentile(ms, 99), 1),
                       "mean_ms": round(statistics.fmean(ms), 1) if ms else 0.0}
    done = [c for c in calls if c.ok]
    return {"requests": len(calls), "completed": len(done), "errors": len(calls) - len(done),
            "requests_per_s": round(len(done) / seconds, 1) if seconds else 0.0, "actions": per}


@dataclass
class Plan:
    reviewers: int = 20
    seconds: float | None = 60.0  # None: `rounds` rounds per reviewer
    rounds: int | None = None
    faults: tuple[str, ...] = ()
    samples: int = 3  # per CLI writer's eval: the more, the longer it writes
    gates: int = 6
    reports: int = 200
    launch: Launcher = popen_launcher
    in_process_app: bool = False  # InProcessApp instead of App (no kill-app fault then)


def run_store(seeded: Seeded, plan: Plan, pg: Postgres | None = None, full_disk: Path | None = None
              ) -> dict[str, Any]:
    """The load on one seeded store: the app, the reviewers, the writers and the faults; the figures and checks."""
    app: App | InProcessApp = InProcessApp(seeded) if plan.in_process_app else App(seeded, plan.launch)
    started = app.start()
    load = Load(seeded)
    threads = [threading.Thread(target=reviewer, args=(load, app.url, f"reviewer-{i:02d}", plan.rounds, i),
                                daemon=True) for i in range(plan.reviewers)]
    for th in threads:
        th.start()
    writers = [Writer(f"eval seed {s}", eval_args(seeded, s, plan.samples)) for s in (1, 2)]
    writers.append(Writer("regress", ["regress", "--baseline", seeded.baseline, "--candidate", seeded.candidate,
                                      "--no-guard", "--no-field", "--json", "--workspace", str(seeded.workspace)]))
    for w in writers:
        w.proc = plan.launch(w.args, store_env(seeded))
    faults: list[dict[str, Any]] = []

    def inject(fault: str, at: float) -> None:
        time.sleep(max(0.0, load.t0 + at - time.monotonic()))
        start = time.monotonic() - load.t0
        if fault == "kill-cli":
            faults.append({"at_s": round(start, 1), **kill_cli_writer(seeded, plan.launch, plan.samples, 300.0)})
        elif fault == "kill-app":
            app.kill()
            restart_s = app.start()
            faults.append({"fault": "kill-app", "at_s": round(start, 1), "restart_s": round(restart_s, 1),
                           "_window": (start, start + restart_s)})
        elif fault == "restart-store" and pg is not None:
            pg.restart()
            end = time.monotonic() - load.t0
            faults.append({"fault": "restart-store", "at_s": round(start, 1), "restart_s": round(end - start, 1),
                           "app_restarted": False, "_window": (start, end)})
        elif fault == "disk-full" and full_disk is not None:
            filler = fill(full_disk)
            time.sleep(DISK_FULL_S)
            filler.unlink()
            faults.append({"fault": "disk-full", "at_s": round(start, 1), "full_for_s": DISK_FULL_S,
                           "app_restarted": False, "_window": (start, time.monotonic() - load.t0)})

    # Each fault in its own thread at its share of the first 70% of the load (with `rounds`: at once, in turn), so a
    # slow one (a killed writer's resume) delays no other, and every one is followed by load it must recover under.
    span = 0.7 * plan.seconds if plan.seconds is not None else 0.0
    injectors = [threading.Thread(target=inject, args=(f, span * (i + 1) / (len(plan.faults) + 1)), daemon=True)
                 for i, f in enumerate(plan.faults)]
    try:
        for th in injectors:
            th.start()
        if plan.seconds is not None:
            time.sleep(max(0.0, load.t0 + plan.seconds - time.monotonic()))
            load.stop.set()
        for th in threads:
            th.join(timeout=600)
        elapsed = time.monotonic() - load.t0
        load.stop.set()
        for th in injectors:
            th.join(timeout=600)
        for w in writers:
            finish_writer(w, 600.0)
    finally:
        load.stop.set()
        app.stop()
    calls = list(load.calls)
    windows = []
    for f in faults:
        if "_window" in f:
            start, end = f.pop("_window")
            windows.append((start, end))
            f["decisions_again_after_s"] = first_decision_after(calls, end)  # once the fault is over
            f["calls_during"] = sum(during(c, [(start, end)], 0.0) for c in calls)
            f["failed_or_refused_during"] = sum(during(c, [(start, end)], 0.0) and bool(c.error) for c in calls)
            f["messages"] = messages_between(calls, start, end)
    outside = [c for c in calls if not during(c, windows)]
    return {
        "store": "postgresql" if seeded.url else "sqlite", "reviewers": plan.reviewers,
        "seconds": round(elapsed, 1), "app_start_s": round(started, 1), **figures(calls, elapsed),
        "outside_faults": {"calls": len(outside), "errors": sum(not c.ok for c in outside),
                           "refused": sum(c.ok and bool(c.error) for c in outside)},
        "decisions": check_decisions(seeded, calls),
        "writers": [{"name": w.name, "exit": w.code, **(check_run(seeded, w.run_id) if w.name != "regress" and
                                                         w.run_id else {"id": w.run_id}),
                     **({"stderr": w.stderr} if w.code not in (0, 1, 3) else {})} for w in writers],
        "faults": faults,
        "error_messages": messages_between(calls, 0.0, float("inf"), 8),
    }


def table(results: Sequence[dict[str, Any]]) -> str:
    """The figures as the benchmark page shows them (Markdown)."""
    lines = ["| store | action | calls | failed | refused | p50 | p95 | p99 |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for action, a in r["actions"].items():
            lines.append(f"| {r['store']} | {action} | {a['calls']} | {a['errors']} | {a['refused']} | "
                         f"{a['p50_ms']:.0f} ms | {a['p95_ms']:.0f} ms | {a['p99_ms']:.0f} ms |")
    lines += ["", "| store | requests/s | outside faults: calls, failed, refused | acknowledged | lost | duplicated | "
              "misattributed | recorded, not acknowledged |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        d, o = r["decisions"], r["outside_faults"]
        lines.append(f"| {r['store']} | {r['requests_per_s']} | {o['calls']}, {o['errors']}, {o['refused']} | "
                     f"{d['acknowledged']} | {len(d['lost'])} | {len(d['duplicated'])} | {len(d['misattributed'])} | "
                     f"{d['recorded_unacknowledged']} |")
    return "\n".join(lines)


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError):
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "system": platform.system(),
            "load_average_at_start": load_average()}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stores", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    p.add_argument("--reviewers", type=int, default=20)
    p.add_argument("--seconds", type=float, default=60.0, help="length of the load on each store")
    p.add_argument("--faults", default="kill-cli,restart-store,kill-app,disk-full",
                   help="comma-separated: kill-cli, kill-app, restart-store (PostgreSQL), disk-full (SQLite); or none")
    p.add_argument("--samples", type=int, default=3, help="samples per probe of each CLI writer's eval")
    p.add_argument("--out", type=Path, help="work folder (default: a temporary one, removed)")
    p.add_argument("--json", type=Path, help="write the figures here")
    args = p.parse_args(argv)
    import torch

    from evals.world import TEST_CONFIG, build_world

    torch.set_num_threads(1)
    host = machine()
    faults = tuple(f for f in args.faults.split(",") if f and f != "none")
    root = args.out or Path(tempfile.mkdtemp(prefix="wb-store-load-"))
    world = build_world(Path(__file__).resolve().parents[1] / ".bench-cache" / "world-test", TEST_CONFIG)
    results = []
    for kind in [s.strip() for s in args.stores.split(",") if s.strip()]:
        print(f"{kind}: seeding", flush=True)
        pg = None
        if kind == "postgresql":
            why = Postgres.missing()
            if why:
                print(f"postgresql: skipped ({why})", flush=True)
                continue
            pg = Postgres()
            pg.start()
        try:
            with small_tmpfs("64m") if "disk-full" in faults and kind == "sqlite" else contextlib.nullcontext() as mnt:
                base = mnt if mnt is not None else root
                seeded = seed(base / kind, pg.database("wb_load") if pg else None, str(world.model), str(world.suite),
                              gates=6, reports=200)
                mine = tuple(f for f in faults if not (f == "restart-store" and pg is None)
                             and not (f == "disk-full" and (pg is not None or mnt is None)))
                print(f"{kind}: {args.reviewers} reviewers for {args.seconds:.0f} s, faults "
                      f"{', '.join(mine) or 'none'}", flush=True)
                result = run_store(seeded, Plan(reviewers=args.reviewers, seconds=args.seconds, faults=mine,
                                                samples=args.samples), pg=pg, full_disk=mnt)
                if "disk-full" in faults and kind == "sqlite" and mnt is None:
                    result["faults"].append({"fault": "disk-full", "skipped": "cannot mount a small tmpfs here"})
        finally:
            if pg is not None:
                pg.stop()
        results.append(result)
        print(json.dumps(result, indent=1)[:4000], flush=True)
    report = {"date": time.strftime("%Y-%m-%d"), "machine": host, "load_average_at_end": load_average(),
              "command": "python bench/store_load.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "results": results}
    print(table(results), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.out is None:
        shutil.rmtree(root, ignore_errors=True)
    bad = [r["store"] for r in results if r["decisions"]["lost"] or r["decisions"]["duplicated"]
           or r["decisions"]["misattributed"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""A run whose process is gone reads `interrupted` (never `running` forever), in `runs`, `show`, the gate and the
app, with how to resume it; a live run, or one on another host with a fresh heartbeat, stays `running`."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from clirun import ENV, assert_refused, start, workbench
from sqlalchemy import func, select

from workbench import procstat
from workbench.store import Store
from workbench.store import liveness as lv
from workbench.store.schema import gen_cache, runs

NOW = dt.datetime.now(dt.UTC)


def _ago(seconds: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds)).isoformat()


def _judge(pid: int | None, host: str | None, heartbeat: float | None, created: float = 0) -> str:
    return lv.judge("running", pid=pid, host=host, created_at=_ago(created),
                    heartbeat_at=None if heartbeat is None else _ago(heartbeat), now=NOW).status


def test_same_host_is_judged_by_the_process() -> None:
    me = lv.host_id()
    assert _judge(os.getpid(), me, heartbeat=0) == "running"  # alive, whatever other hosts would think
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid is free
    assert _judge(child.pid, me, heartbeat=0) == "interrupted"
    # A run created a day ago and resumed by this process (its heartbeat is this process's): running.
    assert _judge(os.getpid(), me, heartbeat=0, created=86_400) == "running"
    # Our own pid, but the run's last heartbeat predates this process by a day: its writer is gone and
    # the pid was reused by a newer process.
    assert _judge(os.getpid(), me, heartbeat=86_400, created=2 * 86_400) == "interrupted"


def test_a_zombie_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.time() + 60
        while time.time() < deadline and (p := procstat.read(child.pid)) is not None and not p.ended:
            time.sleep(0.05)
        assert not lv.process_alive(child.pid)
    finally:
        child.wait()


def test_another_host_is_judged_by_the_heartbeat() -> None:
    other = "elsewhere pid:[1]"
    assert _judge(1, other, heartbeat=60) == "running"
    assert _judge(1, other, heartbeat=lv.STALE_AFTER_S + 60) == "interrupted"
    assert _judge(None, None, heartbeat=None, created=lv.STALE_AFTER_S + 60) == "interrupted"  # a v1 row
    assert lv.judge("done", pid=1, host=other, heartbeat_at=_ago(10**6), created_at=_ago(10**6)).status == "done"


def test_create_run_records_liveness_and_touch_run_beats(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "ws")
    run_id = store.create_run(model="m", adapter=None, backend="hf", fingerprint="f", suite="s", suite_config={},
                              options={}, n_probes=0, skipped_bad=0)
    rec = store.get_run(run_id)
    assert (rec.status, rec.pid, rec.host, rec.note) == ("running", os.getpid(), lv.host_id(), None)
    first = rec.heartbeat_at
    assert first is not None
    time.sleep(0.01)
    store.touch_run(run_id)
    assert (store.get_run(run_id).heartbeat_at or "") > first


def _cache_rows(ws: Path) -> int:
    with Store.open(ws).engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(gen_cache)).scalar_one())


@pytest.mark.slow  # over 20 s on 2 cores
def test_a_killed_eval_reads_interrupted_everywhere(world: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    proc = start(["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(ws),
                  "--samples", "2", "--backend-option", "batch_size=2", "--json"], ENV)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if (ws / "store.sqlite").exists() and _cache_rows(ws) >= 10:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    listed = json.loads(workbench("runs", "--json", "--workspace", str(ws)).stdout)
    assert [r["status"] for r in listed] == ["interrupted"]
    run_id = listed[0]["run_id"]
    assert f"process {proc.pid} on this host is gone" in listed[0]["note"]
    text = workbench("runs", "--workspace", str(ws)).stdout
    assert "interrupted" in text and f"workbench eval --resume {run_id}" in text
    shown = workbench("show", run_id, "--workspace", str(ws))
    assert shown.returncode == 0 and "status interrupted" in shown.stdout and "workbench eval" in shown.stdout
    assert_refused(workbench("regress", "--baseline", run_id, "--candidate", run_id, "--workspace", str(ws)),
                   f"{run_id} is interrupted")
    from workbench import views

    assert "interrupted" in views.runs_table(Store.open(ws))["status"].tolist()
    assert run_id in views.interrupted_note(Store.open(ws))
    # The stored row is untouched (readers never write): a rerun of the same eval finishes the work.
    with Store.open(ws).engine.connect() as c:
        assert c.execute(select(runs.c.status)).scalar_one() == "running"

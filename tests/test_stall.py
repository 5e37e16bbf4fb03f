"""The stall watchdog, SIGTERM and `eval --resume`, with a backend that really stalls: `workbench eval --backend
openai` (a subprocess with a hard time limit) against a local OpenAI-style server that answers a set number
of requests and then stops answering (it holds the connection open and says nothing, as a hung server does)."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from clirun import finish, run_workbench, start

from workbench.results import load_results
from workbench.store import Store

N_PROBES, BATCH = 12, 4


class _Server:
    """Answers `budget` requests (None: all), then holds every further request until `release` is set."""

    def __init__(self) -> None:
        self.budget: int | None = None
        self.answered = 0
        self.held = 0
        self.lock = threading.Lock()
        self.release = threading.Event()


def _handler(state: _Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                hang = state.budget is not None and state.answered >= state.budget
                state.held += hang
                state.answered += not hang
            if hang:
                state.release.wait()
                return  # the client gave up long ago; say nothing
            m = re.search(r"q(\d+)", body["prompt"])
            data = json.dumps({"choices": [{"index": 0, "text": f" a{m[1] if m else '?'}", "finish_reason": "stop"}]})
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

    return Handler


@pytest.fixture()
def server() -> Iterator[tuple[str, _Server]]:
    state = _Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def probes(tmp_path: Path) -> Path:
    path = tmp_path / "probes.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "question": f"q{i}", "answers": [f"a{i}"]}) + "\n"
                            for i in range(N_PROBES)))
    return path


def _eval_args(url: str, probes: Path, ws: Path, *extra: str) -> list[str]:
    return ["eval", "--backend", "openai", "--model", "world", "--probes", str(probes), "--workspace", str(ws),
            "--backend-option", f"base_url={url}", "--backend-option", f"batch_size={BATCH}", "--json", *extra]


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_stalled_server_stops_the_run_keeps_its_answers_and_resume_finishes_it(
        server: tuple[str, _Server], probes: Path, tmp_path: Path) -> None:
    url, state = server
    ws = tmp_path / "ws"
    state.budget = 2 * BATCH  # two batches come back, the third never does
    stalled = run_workbench(_eval_args(url, probes, ws, "--stall-timeout", "3"), timeout=120)
    assert stalled.returncode == 2, stalled.stderr[-2000:]
    err = stalled.stderr
    assert "Traceback" not in err
    assert f"stalled: waited 3 s for the openai backend to finish a batch of {BATCH} prompts" in err
    assert f"{2 * BATCH} of {N_PROBES} answers are finished and kept" in err and "--stall-timeout" in err
    (run,) = Store.open(ws).list_runs()
    assert f"workbench eval --resume {run.id}" in err and run.status == "failed"
    assert state.held == BATCH  # the stalled batch was really sent and really held
    res = load_results(Store.open(ws), run.id)
    assert len(res.probes) == 2 * BATCH and all(r.answer == f"a{r.probe.id[1:]}" for r in res.probes)
    assert res.engines() == {f"openai {url}": 2 * BATCH}

    state.budget = None  # the server answers again
    resumed = run_workbench(["eval", "--resume", run.id, "--workspace", str(ws), "--json"], timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    out = json.loads(resumed.stdout)
    assert out["run_id"] == run.id and out["kept"] == 2 * BATCH and out["generated"] == BATCH
    assert out["correct"] == 1.0 and out["n"] == N_PROBES
    (done,) = Store.open(ws).list_runs()
    assert done.status == "done" and done.generated == N_PROBES
    assert state.answered == N_PROBES  # nothing asked twice


def test_sigterm_ends_the_run_like_ctrl_c(server: tuple[str, _Server], probes: Path, tmp_path: Path) -> None:
    url, state = server
    ws = tmp_path / "ws"
    state.budget = BATCH
    t0 = time.monotonic()
    proc = start(_eval_args(url, probes, ws))  # default stall timeout: only SIGTERM ends it
    while state.held < BATCH:  # the second batch is in flight, and held
        assert proc.poll() is None and time.monotonic() - t0 < 60, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    ended = finish(proc, timeout=30)
    assert ended.returncode == 143, ended.stderr[-2000:]
    assert "interrupted" in ended.stderr and "Traceback" not in ended.stderr
    (run,) = Store.open(ws).list_runs()
    assert run.status == "interrupted" and len(Store.open(ws).answer_rows(run.id)) == BATCH


@pytest.mark.parametrize(("args", "message"), [
    (["--resume", "run-x", "--model", "m"], "leave out --model, --probes"),
    (["--resume", "run-x"], "no run `run-x`"),
    (["--model", "m"], "--model and --probes are required (or --resume RUN"),
    (["--model", "m", "--probes", "p.jsonl", "--stall-timeout", "0"], "--stall-timeout must be > 0 seconds, got 0.0"),
])
def test_resume_and_timeout_mistakes_exit_2(args: list[str], message: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from hallucination_workbench import main

    assert main(["eval", "--workspace", str(tmp_path / "ws"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_finished_run_has_nothing_to_resume(server: tuple[str, _Server], probes: Path, tmp_path: Path) -> None:
    url, _ = server
    ws = tmp_path / "ws"
    done = run_workbench(_eval_args(url, probes, ws), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    again = run_workbench(["eval", "--resume", json.loads(done.stdout)["run_id"], "--workspace", str(ws)], timeout=120)
    assert again.returncode == 2 and "is done: nothing to resume" in again.stderr

"""A pre-imported parent that forks `workbench` commands for the tests (`clirun.workbench`).

Why: a command that loads a model spends 5-14 s of a two-core machine importing torch and transformers before it
does anything, and the suite runs about a hundred of them (every other command pays 1-2 s of Python start-up). A
zygote imports all that once per test worker; each command is then a fork of it: its own process (own pid,
process group, cwd, environment, stdin/stdout/stderr, exit code), running `python -m hallucination_workbench`'s
own `__main__` (or a test's own script, `python SCRIPT`) to its end, with a hard time limit that kills its
process group. What a fork cannot show is import-time behaviour (what a command imports, warnings printed while
importing): the tests of that run a fresh interpreter (`workbench(..., fresh=True)`,
`subprocess.run([sys.executable, ...])`).

Protocol (a Unix socket): the client sends one JSON request (args, cwd, env, script) with three file descriptors
(stdin, stdout, stderr); the zygote answers the child's pid, then its wait status when it ends.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import gc
import json
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import BinaryIO, NoReturn

#: What the zygote imports before its first fork: every module of the project's packages, and what a
#: model-loading or training command imports besides (the project imports these inside functions).
PACKAGES = ("hallucination_workbench", "workbench", "finetune", "evals")
PRELOAD = ("torch", "transformers", "transformers.models.llama.modeling_llama", "peft", "datasets", "trl")
_MAX_REQUEST = 1 << 20


def _send(sock: socket.socket, payload: dict[str, object], fds: list[int]) -> None:
    data = json.dumps(payload).encode()
    sock.sendmsg([len(data).to_bytes(4, "big") + data],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def _receive(sock: socket.socket) -> tuple[dict[str, object], list[int]]:
    fds = array.array("i")
    msg, ancdata, _, _ = sock.recvmsg(_MAX_REQUEST, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, cdata in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cdata[:len(cdata) - len(cdata) % fds.itemsize])
    size = int.from_bytes(msg[:4], "big")
    while len(msg) < 4 + size:
        chunk = sock.recv(4 + size - len(msg))
        if not chunk:
            raise ValueError("the client went away mid-request")
        msg += chunk
    return json.loads(msg[4:4 + size]), list(fds)


# -- the zygote ---------------------------------------------------------------------------------------------------


def serve(path: str) -> None:
    """Import PRELOAD, then fork one child per request until the parent (the test worker) is gone."""
    import importlib
    import pkgutil

    # A module that cannot be imported here (an optional package missing) is left to the commands that need it,
    # which fail on it as a fresh interpreter does.
    for package in PACKAGES:
        importlib.import_module(package)
        for info in pkgutil.walk_packages(sys.modules[package].__path__, package + "."):
            if not info.name.endswith("__main__"):
                with contextlib.suppress(ImportError):
                    importlib.import_module(info.name)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    gc.freeze()  # the imports' objects are never collected by a child: its collections (and exit) skip them
    # fork copies only the calling thread: a lock another thread held would stay locked in every child
    assert [t.name for t in threading.enumerate()] == ["MainThread"], threading.enumerate()
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    waiting: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    while os.getppid() == parent:
        for _ in selector.select(timeout=0.05):
            conn, _ = listener.accept()
            conn.settimeout(30)
            fds: list[int] = []
            try:  # a client gone mid-request costs its request, never the zygote
                request, fds = _receive(conn)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    for sock in (listener, conn, *waiting.values()):
                        sock.close()
                    _child(request, fds)  # never returns
                waiting[pid] = conn
                conn.sendall(f"{pid}\n".encode())
            except (OSError, ValueError):
                conn.close()
            finally:
                for fd in fds:
                    os.close(fd)
        while True:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid:
                    if pid in waiting:
                        conn = waiting.pop(pid)
                        with contextlib.suppress(OSError):
                            conn.sendall(f"{status}\n".encode())
                        conn.close()
                    continue
            break


def _child(request: dict[str, object], fds: list[int]) -> NoReturn:
    """Become `python -m hallucination_workbench ARGS` (or `python SCRIPT ARGS`) in `cwd` with `env`, and leave with
    its exit code."""
    code = 1
    try:
        os.setsid()  # a session of its own (Popen's start_new_session): a timeout kills all it started
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(str(request["cwd"]))
        env, args = request["env"], request["args"]
        assert isinstance(env, dict) and isinstance(args, list)
        os.environ.clear()
        os.environ.update(env)
        script = request.get("script")
        code = _run_main([str(a) for a in args], str(script) if script else None)
        _finalize()
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _finalize() -> None:
    """What the interpreter's exit does that a command's outcome depends on: join non-daemon threads, run the atexit
    handlers, and close what is still open (a store's SQLite connection folds its write-ahead log back and removes
    it as it closes; a file flushes). Not the interpreter's own teardown: over the zygote's frozen imports it takes
    0.8 s a command, and triton's bindings then report their objects as leaked on stderr."""
    import io
    import sqlite3

    threading._shutdown()  # type: ignore[attr-defined]  # no public name does the interpreter's wait
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):  # before any other wrapper of fd 1 or 2 closes it
        with contextlib.suppress(Exception):
            stream.flush()
    gc.collect()
    std = {id(sys.stdin), id(sys.stdout), id(sys.stderr), id(sys.__stdout__), id(sys.__stderr__), id(sys.__stdin__)}
    for obj in gc.get_objects():  # the command's objects: the zygote's own (its stdio among them) are frozen
        if isinstance(obj, sqlite3.Connection) or (isinstance(obj, io.IOBase) and id(obj) not in std):
            with contextlib.suppress(Exception):
                obj.close()


def _run_main(args: list[str], script: str | None) -> int:
    """Run `python -m hallucination_workbench ARGS`'s `__main__` (or `python SCRIPT ARGS`); its exit code as the
    interpreter makes it."""
    import runpy

    try:
        if script is None:
            sys.argv = [str(Path(__file__).resolve().parents[1] / "hallucination_workbench" / "__main__.py"), *args]
            sys.path[0] = os.getcwd()  # -m puts the working directory first
            runpy.run_module("hallucination_workbench", run_name="__main__", alter_sys=True)
        else:
            sys.argv = [script, *args]
            sys.path[0] = str(Path(script).resolve().parent)  # python SCRIPT puts the script's folder first
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


# -- the client ---------------------------------------------------------------------------------------------------


class Zygote:
    """One zygote process per test worker, started at its first use with the environment `env`."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = dict(env)
        self.folder = tempfile.mkdtemp(prefix="wbz")
        self.path = os.path.join(self.folder, "s")
        log = Path(self.folder) / "zygote.log"
        with log.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, __file__, self.path], env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the test zygote did not start (exit {self.proc.wait()}):\n{log.read_text()[-3000:]}")
        atexit.register(self.close)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def start(self, args: list[str], cwd: Path | None, env: dict[str, str], script: str | None = None) -> Forked:
        """`workbench ARGS` (or `python SCRIPT ARGS`) forked from the zygote, in a session of its own; a
        subprocess.Popen look-alike."""
        return Forked(self.path, args, cwd, env, script)

    def run(self, args: list[str], cwd: Path | None, env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess[str]:
        """Like subprocess.run(..., capture_output=True, text=True, stdin=DEVNULL, timeout=timeout): over the limit
        the command's session is killed and subprocess.TimeoutExpired raised."""
        proc = self.start(args, cwd, env)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill_session()
            out, err = proc.communicate(timeout=60)
            raise subprocess.TimeoutExpired(proc.args, timeout, out, err) from None
        assert proc.returncode is not None
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class Forked:
    """A command forked from the zygote, with what the tests use of subprocess.Popen (`pid`, `args`, `returncode`,
    `poll`, `wait`, `communicate`, `send_signal`, `terminate`, `kill`). Its stdout and stderr go to files, read
    when it has ended: `stdout`/`stderr` are None (a test reading them live runs the command fresh)."""

    stdout = None
    stderr = None

    def __init__(self, path: str, args: list[str], cwd: Path | None, env: dict[str, str],
                 script: str | None = None) -> None:
        self.args = [sys.executable, *([script] if script else ["-m", "hallucination_workbench"]), *args]
        self.returncode: int | None = None
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115  # read at the end
        self._buffer = b""
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        with open(os.devnull, "rb") as stdin:
            _send(self._sock, {"args": args, "cwd": str(cwd or os.getcwd()), "env": env, "script": script},
                  [stdin.fileno(), self._out.fileno(), self._err.fileno()])
        pid = self._answer(60.0)
        if pid is None:
            raise RuntimeError("the test zygote did not fork the command within 60 s")
        self.pid = pid

    def _answer(self, timeout: float | None) -> int | None:
        """The zygote's next answer (the pid, then the wait status), or None when none came within `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._sock], [], [], left)[0]:
                return None
            chunk = self._sock.recv(64)
            if not chunk:
                if hasattr(self, "pid"):
                    self.kill_session()
                raise RuntimeError("the test zygote closed the connection (it died?)")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return int(line)

    def poll(self) -> int | None:
        if self.returncode is None:
            self._collect(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (negative: the signal that ended it); subprocess.TimeoutExpired after `timeout`."""
        if self.returncode is None and not self._collect(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def _collect(self, timeout: float | None) -> bool:
        status = self._answer(timeout)
        if status is None:
            return False
        self.returncode = os.waitstatus_to_exitcode(status)
        self._sock.close()
        return True

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """(stdout, stderr) once it has ended; subprocess.TimeoutExpired (and still running) after `timeout`."""
        self.wait(timeout)
        return _text(self._out), _text(self._err)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # as Popen: never signal a pid that may have been reused
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def kill_session(self) -> None:
        """SIGKILL the command and everything it started (its own session)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)


def _text(f: BinaryIO) -> str:
    """The file's bytes as subprocess.run(text=True) decodes them (locale encoding, universal newlines)."""
    import locale

    f.seek(0)
    data = f.read()
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    serve(sys.argv[1])

"""Run the `workbench` CLI as a user does: a subprocess with a hard time limit, and check how it refused
or that nothing it started outlives it.

`start`/`finish` run the command in its own session (`start_new_session`): every process it starts (vLLM's
EngineCore and workers, multiprocessing's resource tracker) inherits the session id, so "gone" is checked
over the whole session, not only the first process. Over its time limit the whole session is killed and
the test fails with the output so far, instead of hanging CI.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from zygote import Forked, Zygote

from workbench import procstat

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


#: Variables a command reads only while it runs (never at import), so a command forked from the zygote may be
#: given other values than the zygote started with. PYTEST_CURRENT_TEST is set per test phase; RAY_*: the zygote
#: never imports ray (the pool imports it when built), and a command joining a test's cluster needs its auth mode.
RUNTIME_ENV = ("WORKBENCH_", "COLUMNS", "LINES", "PYTEST_", "RAY_")
_zygote: Zygote | None = None
_no_zygote: str | None = None  # why the zygote could not start


def workbench(*args: str, cwd: Path | None = None, timeout: float = 180, env: dict[str, str] | None = None,
              prefix: Sequence[str] = (), fresh: bool = False) -> subprocess.CompletedProcess[str]:
    """`python -m hallucination_workbench ARGS`, i.e. `workbench ARGS` (stdin closed: nothing may wait for
    a terminal), forked from this worker's zygote (tests/zygote.py: torch and transformers imported once).
    A fresh interpreter instead where import-time behaviour is what the test checks (`fresh`), under a
    `prefix`, or with an environment that differs from the zygote's in more than RUNTIME_ENV."""
    env = env or ENV
    zygote = None if prefix else _fork_parent(env, fresh)
    if zygote is None:
        return subprocess.run([*prefix, sys.executable, "-m", "hallucination_workbench", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return zygote.run(list(args), cwd, env, timeout)


def _fork_parent(env: dict[str, str], fresh: bool = False) -> Zygote | None:
    """The zygote to fork a command with environment `env` from; None where it must run fresh: `fresh` asked,
    `$WORKBENCH_TEST_FRESH` set, `env` differing from the zygote's in more than RUNTIME_ENV, or no zygote."""
    if fresh or os.environ.get("WORKBENCH_TEST_FRESH") or not _runtime_only(env, ENV):
        return None
    return _the_zygote()


def _the_zygote() -> Zygote | None:
    """This worker's zygote, started (or replaced, when it died) now; None when it cannot start: the commands then
    run fresh, slower but checked the same, and the reason is a warning in the run's summary."""
    global _zygote, _no_zygote
    if _no_zygote is None and (_zygote is None or _zygote.proc.poll() is not None):
        try:
            _zygote = Zygote(ENV)
        except RuntimeError as e:
            _no_zygote = str(e)
            warnings.warn(f"commands run fresh: {e}", stacklevel=3)
    return None if _no_zygote else _zygote


def _runtime_only(env: dict[str, str], base: dict[str, str]) -> bool:
    changed = (set(env) ^ set(base)) | {k for k in env if env[k] != base.get(k)}
    return all(k.startswith(RUNTIME_ENV) for k in changed)


def assert_refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, no traceback, and every needle in stderr (the file, line and field it names). Returns stderr."""
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    for needle in needles:
        assert needle in err, (needle, err[-2000:])
    return err


def without_write_access() -> list[str] | None:
    """A command prefix under which permission bits apply (root bypasses them): [] for a normal user,
    setpriv dropping root's override capabilities, or None when neither is possible."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all", "--"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
    return prefix if probe.returncode == 0 else None


#: Seconds the processes of a finished command may take to disappear (the resource tracker exits when
#: it sees its pipe close; a loaded machine is slow to reap).
GONE_WITHIN = 20.0


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # start to exit of the command's own process


def session_processes(sid: int) -> list[str]:
    """`pid name` of every live process in session `sid`."""
    return [f"{p.pid} {p.name}" for p in procstat.every() if p.session == sid and not p.ended]


def start(args: list[str], env: dict[str, str] | None = None, fresh: bool = False) -> subprocess.Popen[str] | Forked:
    """`python -m hallucination_workbench ARGS` (the `workbench` command) in a new session, stdout/stderr captured:
    forked from the zygote where `workbench` would fork it (then stdout/stderr are read at the end), else a
    fresh interpreter with stdout/stderr pipes."""
    full = {**os.environ, **(env or {})}
    # Decided on what the caller asks for, not on os.environ: in-process use of a library in this worker (the vllm
    # backend sets VLLM_* variables) would otherwise send every later command of the worker to a fresh interpreter.
    # The child gets `full` either way, as a fresh one would.
    zygote = _fork_parent({**ENV, **(env or {})}, fresh)
    if zygote is None:
        return subprocess.Popen([sys.executable, "-m", "hallucination_workbench", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True, env=full)
    return zygote.start(args, None, full)


def start_script(script: Path, args: list[str], cwd: Path | None = None) -> subprocess.Popen[str] | Forked:
    """`python SCRIPT ARGS` (a test's own entry point, such as tests/jobworker.py) with this process's environment:
    forked from the zygote where `start` would fork, else a fresh interpreter with stdout/stderr pipes. Read its
    output with `communicate()`."""
    zygote = _fork_parent(ENV)
    if zygote is None:  # a session of its own, as a forked one has
        return subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=cwd, start_new_session=True)
    return zygote.start(args, cwd, dict(os.environ), str(script))


def finish(proc: subprocess.Popen[str] | Forked, timeout: float, t0: float | None = None) -> Finished:
    """Wait for `proc` at most `timeout` s (else kill its session and fail), then require that every
    process of its session is gone within GONE_WITHIN s."""
    t0 = time.monotonic() if t0 is None else t0
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        left = session_processes(proc.pid)
        with contextlib.suppress(ProcessLookupError):  # a forked command may be gone (reaped) already
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"`{' '.join(map(str, proc.args))}` still running after {timeout:.0f} s "  # type: ignore[arg-type]
                    f"(processes: {left}); stderr tail:\n{err[-3000:]}")
    seconds = time.monotonic() - t0
    deadline = time.monotonic() + GONE_WITHIN
    while (left := session_processes(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"processes outlived the command by {GONE_WITHIN:.0f} s: {left}; stderr tail:\n{err[-3000:]}")
    assert proc.returncode is not None
    return Finished(proc.returncode, out, err, seconds)


def run_workbench(args: list[str], *, timeout: float, env: dict[str, str] | None = None) -> Finished:
    """Run `workbench ARGS` to its end (see `finish`)."""
    t0 = time.monotonic()
    return finish(start(args, env), timeout, t0)

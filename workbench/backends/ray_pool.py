"""Evaluation on a Ray cluster: a `Backend` that spreads each batch over N Ray actors, each holding one
real backend (hf or vllm) built from the same `ModelSpec`.

The runner does not change: it plans the missing generations, calls `generate`, and alone writes the
cache and the store after each call. Actors only compute. So exactly-once survives lost workers: a chunk
whose actor dies is retried on the restarted actor (Ray's `max_restarts` / `max_task_retries`) or on
another live one; the first result of a chunk is kept, a late duplicate is dropped; when every actor is
gone the finished chunks are handed back in a `PartialGenerationError` (the runner keeps them) and a rerun
generates exactly what is missing.

Identical answers: a batch is cut into chunks of the inner backend's own batch size, in order, and each
chunk is one `generate` call on one actor. The runner of a single process cuts the same slots into the
same batches, so every actor call is a call the single-process run makes too: greedy answers and seeded
samples come out identical (checked in tests/test_ray_pool.py, at one torch thread per process).

ray is an optional extra, imported only when a pool is built.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from workbench.backends.base import Backend
from workbench.errors import MissingDependencyError, PartialGenerationError, WorkbenchError
from workbench.types import Completion, GenerationRequest, ModelSpec

log = logging.getLogger(__name__)

PIP_LINE = "pip install 'hallucination-workbench[ray]'   # or: pip install 'ray==2.60.*'"
#: Inner backends a pool can hold: engines that run in the actor's process. An OpenAI-compatible server
#: already serves many requests at once (its `concurrency` option), so it gains nothing from actors.
POOLABLE = ("hf", "vllm")
#: Seconds a closed pool waits for its actors' CPUs to be free again (ray.kill is asynchronous).
_RELEASE_WAIT_S = 30.0
#: Environment the actors need beside the driver's (a remote cluster does not inherit the driver's).
_PASS_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
             "TOKENIZERS_PARALLELISM", "VLLM_CPU_KVCACHE_SPACE", "HF_HOME")


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise MissingDependencyError("--ray (evaluation on a Ray cluster)", PIP_LINE) from e
    return ray


@dataclass(frozen=True)
class RayConfig:
    """Where and how the actors run.

    Attributes:
        address: `local` starts a Ray instance on this machine (shut down again when the cluster object
            closes); `auto` joins the one `ray start --head` made here; `HOST:PORT` (the head's GCS port,
            6379 by default) or `ray://HOST:PORT` (Ray Client) joins a remote cluster, whose nodes must have
            the workbench installed and read the model at the same path (or from the hub).
        actors: Actors per pool. None: one per GPU of the cluster; on a cluster without GPUs, its CPUs
            divided by `cpus_per_actor`.
        cpus_per_actor: CPUs (and torch threads) each actor reserves. 1 by default: on CPU, N single-thread
            engines beat one N-thread engine for a small model (bench/ray_throughput.py).
        gpus_per_actor: GPUs each actor reserves. None: 1 on a cluster with GPUs (the spec's
            `tensor_parallel_size` for vllm), 0 without.
        chunks_in_flight: Chunks queued per actor, so an actor starts the next chunk while the driver
            collects the last (2: the actor never waits on the driver's round trip).
        max_restarts: Times Ray restarts an actor whose process died (it reloads the model).
        max_task_retries: Times Ray resubmits a chunk that was running on an actor that died.
        connect_timeout_s: How long a remote address may take to accept a TCP connection before it is
            reported unreachable (ray.init itself retries for minutes).
        start_timeout_s: How long the actors may take to be placed and load the model (a cluster busy with
            other jobs, or a 70B model read from network storage, takes minutes).
    """

    address: str = "local"
    actors: int | None = None
    cpus_per_actor: int = 1
    gpus_per_actor: float | None = None
    chunks_in_flight: int = 2
    max_restarts: int = 3
    max_task_retries: int = 3
    connect_timeout_s: float = 10.0
    start_timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.actors is not None and self.actors < 1:
            raise WorkbenchError(f"`actors` must be >= 1, got {self.actors}")
        if self.cpus_per_actor < 1:
            raise WorkbenchError(f"`cpus_per_actor` must be >= 1, got {self.cpus_per_actor}")
        if self.chunks_in_flight < 1:
            raise WorkbenchError(f"`chunks_in_flight` must be >= 1, got {self.chunks_in_flight}")
        if not self.address.strip():
            raise WorkbenchError("the Ray address is empty; give `local`, `auto`, HOST:PORT or ray://HOST:PORT")


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a HOST:PORT or ray://HOST:PORT address; None for `auto`."""
    if address == "auto":
        return None
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise WorkbenchError(f"Ray address `{address}` is not `local`, `auto`, HOST:PORT or ray://HOST:PORT")
    return host, int(port)


class RayCluster:
    """A driver's connection to a Ray cluster, started here for `local`. Pools borrow it; `close()`
    disconnects (and stops a cluster started here). Use it as a context manager.

    It logs (INFO) what the user should see: each pool's actors started (how many, where, how long) and, when a
    pool closes, how many chunks each actor returned (the run spread, or did not)."""

    def __init__(self, config: RayConfig, *, started_here: bool) -> None:
        self.config, self.started_here = config, started_here
        self._pools: list[RayPoolBackend] = []

    @classmethod
    def connect(cls, config: RayConfig = RayConfig()) -> RayCluster:
        ray = import_ray()
        if ray.is_initialized():  # e.g. a test or notebook already called ray.init: use that one
            return cls(config, started_here=False)
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "runtime_env": {"env_vars": env} if env else None}
        if config.address == "local":
            want = (config.actors or 0) * config.cpus_per_actor
            ray.init(num_cpus=max(want, os.cpu_count() or 1), **kw)
            return cls(config, started_here=True)
        where = _host_port(config.address)
        if where is not None:  # ray.init retries an unreachable GCS for minutes: fail fast instead
            try:
                socket.create_connection(where, timeout=config.connect_timeout_s).close()
            except OSError as e:
                raise WorkbenchError(f"cannot reach the Ray cluster at `{config.address}`: {e}. Start one with "
                                     "`ray start --head` (port 6379), or use --ray local") from e
        try:
            ray.init(address=config.address, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise WorkbenchError(f"cannot connect to the Ray cluster at `{config.address}`: {e}") from e
        return cls(config, started_here=False)

    def pool(self, spec: ModelSpec, *, on_dispatch: Callable[[int, int], None] | None = None) -> RayPoolBackend:
        """A pool of actors serving `spec`; closed with the cluster if not before."""
        pool = RayPoolBackend(spec, self, on_dispatch=on_dispatch)
        self._pools.append(pool)
        return pool

    def plan(self, spec: ModelSpec) -> tuple[int, float, int]:
        """(actors, GPUs per actor, CPUs per actor) for `spec` on this cluster's resources."""
        ray = import_ray()
        res, free = ray.cluster_resources(), ray.available_resources()
        gpus, cpus = float(res.get("GPU", 0)), float(res.get("CPU", 0))
        per_gpu = self.config.gpus_per_actor
        if per_gpu is None:
            per_gpu = float(str(spec.option("tensor_parallel_size", 1))) if gpus else 0.0
        # By default as many actors as fit in what is free now: sized by the cluster's total, a pool on a
        # cluster others use would queue actors Ray cannot place and wait out start_timeout_s.
        if self.config.actors is not None:
            n = self.config.actors
        elif per_gpu:
            n = int(float(free.get("GPU", 0)) // per_gpu)
        else:
            n = int(float(free.get("CPU", 0)) // self.config.cpus_per_actor)
        need_cpus, need_gpus = n * self.config.cpus_per_actor, n * per_gpu
        if n < 1 or need_cpus > cpus or need_gpus > gpus:
            # Ray would queue actors it cannot place and wait for ever: say so instead.
            raise WorkbenchError(f"the Ray cluster at `{self.config.address}` has {cpus:g} CPUs and {gpus:g} GPUs "
                                 f"({float(free.get('CPU', 0)):g} and {float(free.get('GPU', 0)):g} free): "
                                 f"not enough for {max(n, 1)} actors of {self.config.cpus_per_actor} CPUs and "
                                 f"{per_gpu:g} GPUs each (set --ray-actors)")
        return n, per_gpu, self.config.cpus_per_actor

    def close_pools(self) -> None:
        """Close every pool made so far: their actors and the CPUs/GPUs they hold are given back (a command
        that evaluates several models one after another frees the cluster for the next one this way)."""
        for pool in self._pools:
            pool.close()
        self._pools.clear()

    def close(self) -> None:
        self.close_pools()
        ray = import_ray()
        if ray.is_initialized() and (self.started_here or self.config.address != "local"):
            ray.shutdown()  # stops a local instance; only disconnects from a remote one

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


class _Worker:
    """One actor: one real backend. Built again by Ray when the actor restarts after its process died."""

    def __init__(self, spec: ModelSpec, threads: int) -> None:
        from workbench.backends import load_backend

        self.backend = load_backend(spec)
        self._threads = threads
        self.error: str | None = None
        try:
            self._pin_threads()
            self.backend.generate([])  # loads the model (hf); vllm builds its engine on the first prompts
        except WorkbenchError as e:  # a user error (bad path): reported by the driver, not retried
            self.error = str(e)

    def _pin_threads(self) -> None:
        import torch

        torch.set_num_threads(self._threads)

    def ready(self) -> tuple[int, str | None]:
        return os.getpid(), self.error

    def engine(self) -> str:
        identity = getattr(self.backend, "engine", None)
        return str(identity()) if callable(identity) else self.backend.name

    def generate(self, requests: Sequence[GenerationRequest]) -> tuple[str | None, list[list[Completion]]]:
        if self.error:
            return self.error, []
        try:
            return None, self.backend.generate(requests)
        except WorkbenchError as e:
            return str(e), []


class RayPoolBackend(Backend):
    """N Ray actors, each with the inner backend named by `spec.backend` (hf or vllm).

    `generate` cuts the requests into chunks of the inner backend's batch size, keeps
    `chunks_in_flight` chunks queued on every actor (a faster actor takes more), gathers the results in
    request order, and survives actors that die (see the module docstring). `batch_size` is what keeps
    every actor busy for one runner batch: inner batch x actors x chunks in flight.

    The cache fingerprint is the inner backend's (the base class hashes the same spec): the answers are
    the same model's, so a Ray rerun reuses a single-process run's cache and vice versa.
    """

    name = "ray"

    def __init__(self, spec: ModelSpec, cluster: RayCluster, *,
                 on_dispatch: Callable[[int, int], None] | None = None) -> None:
        """`on_dispatch(chunk, actor)` is called after each chunk is sent (tests use it to kill an actor
        while its chunk is in flight)."""
        super().__init__(spec)
        if spec.backend not in POOLABLE:
            raise WorkbenchError(f"--ray runs {' or '.join(POOLABLE)} engines in Ray actors, not `{spec.backend}`"
                                 " (an OpenAI-compatible server serves requests concurrently itself)")
        from workbench.backends import backend_class

        self._inner_batch = backend_class(spec.backend)(spec).batch_size  # validates the spec's options too
        self._cluster, self._on_dispatch = cluster, on_dispatch
        self._actors: list[Any] = []
        self._alive: list[bool] = []
        self._n_actors = 0
        self._lock = threading.Lock()
        self.chunks_done: list[int] = []  # per actor: chunks it returned (the bench reads it)

    # -- actors ----------------------------------------------------------------------------------
    @property
    def actors(self) -> int:
        """How many actors this pool runs (planned from the cluster's resources; started lazily)."""
        if not self._n_actors:
            self._n_actors = self._cluster.plan(self.spec)[0]
        return self._n_actors

    def _start(self) -> list[Any]:
        with self._lock:
            if self._actors:
                return self._actors
            ray = import_ray()
            n, gpus, cpus = self._cluster.plan(self.spec)
            cfg = self._cluster.config
            # Ray runs workers at niceness 15 (RAY_worker_niceness) so its own daemons come first; these actors
            # are the run's main work, and at 15 any other process on the node starves them (a chunk took
            # 2-3x longer in an actor than in the driver on a shared 2-core machine). Hence niceness 0, and
            # the driver's offline settings (a remote node does not inherit them).
            env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
            env.update(RAY_worker_niceness="0", OMP_NUM_THREADS=str(cpus))
            cls = ray.remote(_Worker).options(num_cpus=cpus, num_gpus=gpus, max_restarts=cfg.max_restarts,
                                              max_task_retries=cfg.max_task_retries, runtime_env={"env_vars": env})
            t0 = time.monotonic()
            actors = [cls.remote(self.spec, cpus) for _ in range(n)]
            try:
                ready = ray.get([a.ready.remote() for a in actors], timeout=cfg.start_timeout_s)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as e:
                for a in actors:
                    ray.kill(a, no_restart=True)
                why = (f"not ready within {cfg.start_timeout_s:g}s (resources free now: "
                       f"{ray.available_resources()})" if isinstance(e, ray.exceptions.GetTimeoutError) else str(e))
                raise WorkbenchError(f"Ray actors for `{self.spec.model}` failed to start: {why}") from e
            errors = [err for _, err in ready if err]
            if errors:
                for a in actors:
                    ray.kill(a, no_restart=True)
                raise WorkbenchError(errors[0])
            self._actors, self._alive, self._n_actors = actors, [True] * n, n
            self.chunks_done = [0] * n
            log.info("ray: %d actors for %s started in %.0fs (%s CPU, %g GPU each; pids %s)", n, self._label(),
                     time.monotonic() - t0, cpus, gpus, ", ".join(str(p) for p, _ in ready))
            return actors

    def actor_pids(self) -> list[int | None]:
        """Process id of each actor's worker (where it runs now, after any restart); None for a dead one."""
        ray = import_ray()
        refs = [a.ready.remote() for a in self._start()]
        pids: list[int | None] = []
        for ref in refs:
            try:
                pids.append(int(ray.get(ref)[0]))
            except ray.exceptions.RayActorError:
                pids.append(None)
        return pids

    @property
    def batch_size(self) -> int:
        return self._inner_batch * self.actors * self._cluster.config.chunks_in_flight

    @property
    def tokenizer(self) -> Any:
        # Only chat templates need it on the driver: load the tokenizer alone, never the weights.
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.spec.model, revision=self.spec.revision)

    def engine(self) -> str:
        """What produces the text: the inner engine, run by Ray actors."""
        ray = import_ray()
        return f"ray[{self.actors}]/{ray.get(self._start()[0].engine.remote())}"

    # -- generation ------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        if not requests:
            return []
        ray = import_ray()
        actors = self._start()
        size = self._inner_batch
        chunks = [list(range(i, min(i + size, len(requests)))) for i in range(0, len(requests), size)]
        pending: deque[int] = deque(range(len(chunks)))
        inflight: dict[Any, tuple[int, int]] = {}  # object ref -> (chunk, actor)
        load = [0] * len(actors)
        done: dict[int, list[list[Completion]]] = {}
        lost: dict[int, str] = {}  # chunk -> why its last try failed
        tries = [0] * len(chunks)

        def fill() -> None:
            per_actor = self._cluster.config.chunks_in_flight
            for a in sorted(range(len(actors)), key=lambda k: load[k]):  # least loaded first
                while self._alive[a] and load[a] < per_actor and pending:
                    c = pending.popleft()
                    ref = actors[a].generate.remote([requests[i] for i in chunks[c]])
                    inflight[ref] = (c, a)
                    load[a] += 1
                    if self._on_dispatch is not None:
                        self._on_dispatch(c, a)

        fill()
        while inflight:
            (ref,), _ = ray.wait(list(inflight), num_returns=1)
            c, a = inflight.pop(ref)
            load[a] -= 1
            try:
                error, out = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                # Ray already restarted the actor and retried the chunk max_task_retries times, or
                # max_restarts is spent: that actor is gone. The chunk goes to a live one (a few times).
                if isinstance(e, ray.exceptions.ActorDiedError):
                    self._alive[a] = False
                tries[c] += 1
                lost[c] = f"actor {a}: {type(e).__name__}"
                if c not in done and tries[c] <= len(actors):
                    pending.append(c)
                if not any(self._alive):
                    break
            else:
                if error:
                    raise WorkbenchError(error)
                if c not in done:  # the first result of a chunk counts; a retried duplicate is dropped
                    done[c] = out
                    self.chunks_done[a] += 1
            fill()
        if len(done) < len(chunks):
            completed = {i: done[c][k] for c in done for k, i in enumerate(chunks[c])}
            failures = {i: lost.get(c, "not run: no live actor") for c in range(len(chunks)) if c not in done
                        for i in chunks[c]}
            raise PartialGenerationError(completed, failures)
        return [out for c in range(len(chunks)) for out in done[c]]

    def _label(self) -> str:
        return self.spec.model + (f" + adapter {self.spec.adapter}" if self.spec.adapter else "")

    def close(self) -> None:
        """Kill the actors (their engines and memory go with them). The cluster stays for other pools."""
        with self._lock:
            actors, self._actors = self._actors, []
        if not actors:
            return
        log.info("ray: %s: chunks done per actor %s", self._label(), ", ".join(map(str, self.chunks_done)))
        ray = import_ray()
        if not ray.is_initialized():
            return
        free = ray.available_resources().get("CPU", 0.0)
        for a in actors:
            ray.kill(a, no_restart=True)
        # ray.kill returns before the actors' resources are free again; the next pool's plan counts what
        # is free, so wait (briefly) until this pool's CPUs are back.
        held = sum(self._alive) * self._cluster.config.cpus_per_actor  # a dead actor holds nothing
        deadline = time.monotonic() + _RELEASE_WAIT_S
        while ray.available_resources().get("CPU", 0.0) < free + held and time.monotonic() < deadline:
            time.sleep(0.1)

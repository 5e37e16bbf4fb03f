"""`--ray [ADDRESS]` for the commands that generate (eval, regress, demo): one Ray connection per command,
one actor pool per model evaluated, all closed when the command ends.

Why a flag and not a backend option: where the generations run is not part of what generates them. The
ModelSpec (and so the cache fingerprint) stays the inner backend's, a Ray rerun reuses a single-process
run's cache, and the inner backends never see an option they would have to reject (vllm refuses unknown
options).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from workbench.cli._common import bounded

#: Builds the backend for one model: a Ray pool under --ray, else None (the runner builds its own).
BackendFor = Callable[[Any], Any]


def add_ray_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="generate on a Ray cluster: bare or `local` starts one on this machine; `auto`, "
                        "HOST:PORT or ray://HOST:PORT joins one (needs `pip install 'hallucination-workbench[ray]'`)")
    p.add_argument("--ray-actors", type=bounded(1, 4096), metavar="N",
                   help="actors (engines) per model under --ray (default: one per GPU, else one per CPU)")


@contextmanager
def ray_backends(args: argparse.Namespace) -> Iterator[BackendFor]:
    """Yields `backend_for(spec)`; connects (or starts) the cluster on first use, closes every pool and
    the connection on exit, error or not. Each call closes the pools of earlier calls first: the commands
    evaluate one model at a time (the demo: the base model, then each adapter), and a finished model's
    actors would otherwise hold the CPUs/GPUs the next model's actors wait for (on a 2-CPU machine the
    demo's first adapter waited for ever). Pool starts and each pool's chunks per actor are logged (INFO, on stderr)."""
    address = getattr(args, "ray", None)
    if not address:
        if getattr(args, "ray_actors", None) is not None:
            from workbench.errors import WorkbenchError

            raise WorkbenchError("--ray-actors needs --ray")
        yield lambda spec: None
        return
    from workbench.backends.ray_pool import RayCluster, RayConfig

    config = RayConfig(address=address, actors=getattr(args, "ray_actors", None))  # checked before any work
    cluster: RayCluster | None = None

    def backend_for(spec: Any) -> Any:
        nonlocal cluster
        if cluster is None:  # lazily: a regress of two stored runs evaluates nothing and needs no cluster
            cluster = RayCluster.connect(config)  # it logs its pools' starts
        cluster.close_pools()
        return cluster.pool(spec)

    try:
        yield backend_for
    finally:
        if cluster is not None:
            cluster.close()

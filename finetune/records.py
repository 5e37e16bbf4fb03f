"""Store records of training jobs: the `jobs` row, per-step `job_metrics` and `job_events`.

Every write is its own small transaction, so a killed job keeps everything it recorded, and a
resumed job overwrites the metrics of the steps it repeats instead of failing on duplicates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, insert, select, update

from workbench.errors import WorkbenchError
from workbench.store import Store, new_id, utcnow
from workbench.store.schema import job_events, job_metrics, jobs

#: Event kinds written by the finetune layer.
EVENT_KINDS = ("start", "resume", "checkpoint", "nan", "spike", "early_stop", "collapse", "reward_hacking",
               "kl_blowup", "collapsed_length", "done", "failed")


@dataclass(frozen=True)
class JobEvent:
    at: str
    kind: str
    message: str
    data: dict[str, Any] | None


def create_job(store: Store, *, method: str, spec: Mapping[str, Any], run_id: str | None,
               fixset_path: str, fixset_hash: str, job_id: str | None = None) -> str:
    """Insert a job row (status `pending`) and return its id."""
    job_id = job_id or new_id("job")
    with store.write() as c:
        c.execute(insert(jobs).values(
            id=job_id, created_at=utcnow(), status="pending", method=method,
            spec_json=json.dumps(dict(spec), sort_keys=True, default=str), run_id=run_id,
            fixset_path=fixset_path, fixset_hash=fixset_hash))
    return job_id


def job_exists(store: Store, job_id: str) -> bool:
    with store.engine.connect() as c:
        return c.execute(select(jobs.c.id).where(jobs.c.id == job_id)).first() is not None


def set_status(store: Store, job_id: str, status: str, *, adapter_path: str | None = None,
               metrics: Mapping[str, Any] | None = None, finished: bool = False) -> None:
    values: dict[str, Any] = {"status": status}
    if adapter_path is not None:
        values["adapter_path"] = adapter_path
    if metrics is not None:
        values["metrics_json"] = json.dumps(dict(metrics), default=str)
    values["finished_at"] = utcnow() if finished else None
    with store.write() as c:
        c.execute(update(jobs).where(jobs.c.id == job_id).values(**values))


def get_job(store: Store, job_id: str) -> dict[str, Any]:
    with store.engine.connect() as c:
        row = c.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
    if row is None:
        raise WorkbenchError(f"no job `{job_id}` in {store.workspace}")
    out = dict(row)
    out["spec"] = json.loads(out.pop("spec_json"))
    out["metrics"] = json.loads(out.pop("metrics_json")) if out.get("metrics_json") else None
    return out


def job_dirs(store: Store) -> list[str]:
    """The output folder of every job the store recorded (as its spec named it), oldest first."""
    with store.engine.connect() as c:
        rows = c.execute(select(jobs.c.spec_json).order_by(jobs.c.created_at)).all()
    out = []
    for (spec,) in rows:
        folder = json.loads(spec).get("output_dir") if spec else None
        if isinstance(folder, str) and folder:
            out.append(folder)
    return out


def add_event(store: Store, job_id: str, kind: str, message: str, data: Mapping[str, Any] | None = None) -> None:
    with store.write() as c:
        c.execute(insert(job_events).values(
            job_id=job_id, at=utcnow(), kind=kind, message=message,
            data_json=json.dumps(dict(data), default=str) if data is not None else None))


def events(store: Store, job_id: str) -> list[JobEvent]:
    with store.engine.connect() as c:
        rows = c.execute(select(job_events).where(job_events.c.job_id == job_id)
                         .order_by(job_events.c.id)).mappings().all()
    return [JobEvent(r["at"], r["kind"], r["message"], json.loads(r["data_json"]) if r["data_json"] else None)
            for r in rows]


def add_metrics(store: Store, job_id: str, step: int, values: Mapping[str, float]) -> None:
    """Record one step's metrics; a repeated (step, name) after a resume replaces the old value.
    Non-finite values are skipped (JSON readers choke on them); the `nan` event records them."""
    clean = {k: float(v) for k, v in values.items() if isinstance(v, int | float) and math.isfinite(float(v))}
    if not clean:
        return
    with store.write() as c:
        c.execute(delete(job_metrics).where(and_(job_metrics.c.job_id == job_id, job_metrics.c.step == step,
                                                 job_metrics.c.name.in_(list(clean)))))
        c.execute(insert(job_metrics), [{"job_id": job_id, "step": step, "name": k, "value": v}
                                        for k, v in clean.items()])


def metrics(store: Store, job_id: str, name: str | None = None) -> list[tuple[int, str, float]]:
    """(step, name, value) rows of a job, by step then name."""
    q = select(job_metrics.c.step, job_metrics.c.name, job_metrics.c.value).where(job_metrics.c.job_id == job_id)
    if name is not None:
        q = q.where(job_metrics.c.name == name)
    with store.engine.connect() as c:
        rows = c.execute(q.order_by(job_metrics.c.step, job_metrics.c.name)).all()
    return [(int(r[0]), str(r[1]), float(r[2])) for r in rows]


class JobRecorder:
    """The store writes of one running job (job row, status, events, metrics); silent without a store, so a
    job runs the same with or without one."""

    def __init__(self, store: Store | None, job_id: str) -> None:
        self.store, self.job_id = store, job_id

    def create(self, *, method: str, spec: Mapping[str, Any], run_id: str | None, fixset_path: str,
               fixset_hash: str) -> None:
        """The job row, unless it exists (a resumed job keeps its row)."""
        if self.store is None or job_exists(self.store, self.job_id):
            return
        create_job(self.store, method=method, spec=spec, run_id=run_id, fixset_path=fixset_path,
                   fixset_hash=fixset_hash, job_id=self.job_id)

    def status(self, status: str, *, adapter: str | None = None, metrics: Mapping[str, Any] | None = None,
               finished: bool = False) -> None:
        if self.store is not None:
            set_status(self.store, self.job_id, status, adapter_path=adapter, metrics=metrics, finished=finished)

    def event(self, kind: str, message: str, data: Mapping[str, Any] | None = None) -> None:
        if self.store is not None:
            add_event(self.store, self.job_id, kind, message, data)

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        if self.store is not None:
            add_metrics(self.store, self.job_id, step, values)

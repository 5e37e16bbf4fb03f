"""The recorded gates as rows (`regressions` table, without their results): what a release decision is tied
to. Apart from `gating.py` so that `workbench.reviews` can read them without importing the gate, which
reads reviews."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from workbench.store import Store
from workbench.store.schema import regressions


@dataclass(frozen=True)
class GateRow:
    """One recorded gate (a row of the `regressions` table), without its result.

    Attributes:
        id: The gate id (`gate-...`).
        created_at: When it was recorded (UTC ISO 8601, microseconds).
        baseline_run, candidate_run: The pair it compared.
        verdict: pass | warn | fail | inconclusive.
    """

    id: str
    created_at: str
    baseline_run: str
    candidate_run: str
    verdict: str


def recorded_gates(store: Store, candidate: str | None = None, baseline: str | None = None) -> list[GateRow]:
    """Recorded gates, oldest first, optionally of one candidate run (and one baseline run)."""
    q = select(regressions.c.id, regressions.c.created_at, regressions.c.baseline_run, regressions.c.candidate_run,
               regressions.c.verdict)
    if candidate is not None:
        q = q.where(regressions.c.candidate_run == candidate)
    if baseline is not None:
        q = q.where(regressions.c.baseline_run == baseline)
    with store.engine.connect() as c:
        rows = c.execute(q.order_by(regressions.c.created_at)).all()
    return [GateRow(*r) for r in rows]

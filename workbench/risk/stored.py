"""The `answer_risk` table (its one owner): each scored answer's risk and the evidence behind it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select

from workbench.risk.features import Features
from workbench.store import Store, utcnow
from workbench.store import schema as t


@dataclass(frozen=True)
class AnswerRisk:
    """One scored answer: `risk` is the estimated probability that it is made up (workbench/risk/score.py)."""

    probe_id: str
    variant: int
    risk: float
    features: Features
    scored_by: str


def save_risks(store: Store, run_id: str, risks: Sequence[AnswerRisk]) -> None:
    """Replace the run's stored risks with `risks` (in one transaction: a killed scoring keeps the old ones)."""
    at = utcnow()
    with store.write() as c:
        c.execute(delete(t.answer_risk).where(t.answer_risk.c.run_id == run_id))
        if risks:
            c.execute(insert(t.answer_risk), [
                {"run_id": run_id, "probe_id": r.probe_id, "variant": r.variant, "risk": r.risk,
                 "features_json": json.dumps(r.features.to_dict()), "scored_by": r.scored_by, "scored_at": at}
                for r in risks])


def load_risks(store: Store, run_id: str) -> dict[str, AnswerRisk]:
    """The run's stored risks by probe id (empty: the run was never scored)."""
    with store.engine.connect() as c:
        rows = c.execute(select(t.answer_risk).where(t.answer_risk.c.run_id == run_id)).mappings().all()
    return {r["probe_id"]: _risk(r) for r in rows}


def _risk(r: Any) -> AnswerRisk:
    return AnswerRisk(probe_id=r["probe_id"], variant=r["variant"], risk=float(r["risk"]),
                      features=Features(**json.loads(r["features_json"])), scored_by=r["scored_by"])

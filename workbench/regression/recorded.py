"""The recorded gates as rows (`regressions` table, without their results): what a release decision is tied
to. Apart from `gating.py` so that `workbench.reviews` can read them without importing the gate, which
reads reviews."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


BUILT_IN = "built-in policy"
BUILT_IN_SOURCE = "built-in"
"""The `policy_source` a gate records when it ran under the built-in policy of its day."""


@dataclass(frozen=True)
class RecordedGate:
    """One recorded gate whole: its row and the result it recorded (`ComparisonResult.to_dict()`). What every
    view of a gate shows is read from here, never computed again: the verdict, each gate's status and the policy.

    Attributes:
        row: The gate's row (id, time, pair, verdict).
        exit_code: The exit code `workbench regress` gave.
        policy: The policy it ran under (`Policy.model_dump`).
        result: The recorded result (`ComparisonResult.to_dict()`, any format version).
        report: The HTML report's path ("" when none was written).
        policy_source: The policy file named at `regress --policy`, BUILT_IN_SOURCE for the built-in policy of the
            day the gate was recorded, "" for a policy given in code or a gate recorded before the source was kept.
    """

    row: GateRow
    exit_code: int
    policy: dict[str, Any]
    result: dict[str, Any]
    report: str = ""
    policy_source: str = ""

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def verdict(self) -> str:
        return self.row.verdict

    @property
    def policy_label(self) -> str:
        """`policy strict.yaml`, `built-in policy`, or `custom policy` (a gate recorded without its source, under a
        policy other than today's built-in one)."""
        if self.policy_source == BUILT_IN_SOURCE:
            return BUILT_IN
        if self.policy_source:
            return f"policy {Path(self.policy_source).name}"
        from workbench.regression.policy import default_policy

        return BUILT_IN if self.policy == default_policy().model_dump(mode="json") else "custom policy"

    def gates(self) -> list[dict[str, Any]]:
        """The recorded gates in policy order, each with its `status` as recorded (`gate_status`)."""
        return [{**g, "status": gate_status(g)} for g in self.result.get("gates") or ()]


def gate_status(gate: dict[str, Any]) -> str:
    """A recorded gate's status. Results of format 3 and older wrote `pass` for a gate whose set was not evaluated
    (a guard gate without a guard set, a field gate without a field suite): it reads `not_checked`, as today."""
    status = str(gate.get("status", ""))
    if gate.get("checked") is False:
        return "not_checked"
    if status == "pass" and gate.get("observed") is None and str(gate.get("message", "")).startswith("not checked"):
        return "not_checked"
    return status


def read_gates(store: Store, *, gate_id: str | None = None, candidate: str | None = None,
               baseline: str | None = None) -> list[RecordedGate]:
    """Recorded gates whole, oldest first: one (`gate_id`), or those of a candidate run (and a baseline run)."""
    q = select(regressions)
    if gate_id is not None:
        q = q.where(regressions.c.id == gate_id)
    if candidate is not None:
        q = q.where(regressions.c.candidate_run == candidate)
    if baseline is not None:
        q = q.where(regressions.c.baseline_run == baseline)
    with store.engine.connect() as c:
        rows = c.execute(q.order_by(regressions.c.created_at)).mappings().all()
    out = []
    for r in rows:
        result = json.loads(r["result_json"])
        out.append(RecordedGate(GateRow(r["id"], r["created_at"], r["baseline_run"], r["candidate_run"], r["verdict"]),
                                int(r["exit_code"]), json.loads(r["policy_json"]), result, r["report_path"] or "",
                                str(result.get("policy_source") or "")))
    return out

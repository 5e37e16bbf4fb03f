"""The release history: every recorded gate with the release decision on it and what that decision stands on,
and the decisions outside any gate. `workbench history` prints it and the app's gate history shows it, both
from `release_history`, so the two never disagree about a sign-off.

Apart from `workbench.reviews` (which reads the decisions) because it joins them to the gate's own history
(`gating.history`), and the gate reads reviews: here neither imports the other in a cycle.
"""

from __future__ import annotations

from typing import Any

from workbench.store import Store


def release_history(store: Store) -> list[dict[str, Any]]:
    """`gating.history` (a row per gate, with the candidate's model and adapter) whose `signoff` says
    what the decision stands on (`reviews.Standing.to_dict`: the gate's verdict, the override and its reason,
    the later gates of the same candidate that did not clear, and the line the CLI and the app show), plus a
    row per run whose latest decision is outside any gate (`gate_id`, `baseline_run`, `verdict`, `exit_code`
    and `report` None; `created_at` the decision's time); oldest first."""
    from workbench.gating import history
    from workbench.reviews import standings

    rows = history(store)
    decided = standings(store)
    on_gate = {s.gate.id: s for s in decided if s.gate is not None}
    for row in rows:
        s = on_gate.get(row["gate_id"])
        row["signoff"] = None if s is None else s.to_dict()
    runs = {r.id: r for r in store.list_runs()}
    for s in decided:
        if s.gate is None:
            run = runs[s.decision.run_id]
            rows.append({"gate_id": None, "created_at": s.decision.at, "baseline_run": None,
                         "candidate_run": run.id, "model": run.model, "adapter": run.adapter, "verdict": None,
                         "exit_code": None, "report": None, "signoff": s.to_dict()})
    return sorted(rows, key=lambda r: str(r["created_at"]))

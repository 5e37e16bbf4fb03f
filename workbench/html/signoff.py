"""What the app shows about release decisions: the sign-off line of a compared pair, the gates a decision
can be about, the note beside the sign-off form and the line a recorded decision gets. Plain strings and lists
(no gradio); the rules themselves (a sign-off over a failed or inconclusive gate, or none, needs an override
with a reason; grades changed since the gate need confirming) live in `workbench.reviews`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.html import macro
from workbench.store import Store, shown_time

if TYPE_CHECKING:
    from workbench.reviews import Review


def signoff_line(store: Store, baseline: str, candidate: str) -> str:
    """HTML: the release decision on the latest recorded gate of this pair, or why there is none to sign."""
    from workbench.regression.recorded import recorded_gates
    from workbench.reviews import gate_decisions, signoff_check

    gates = recorded_gates(store, candidate=candidate, baseline=baseline)
    if not gates:
        return macro("signoff.html", "line", None, None, [])
    gate = gates[-1]
    decision = gate_decisions(store).get(gate.id)
    check = signoff_check(store, candidate, gate.id)
    shown = None if decision is None else {
        "new_value": decision.new_value, "reviewer": decision.reviewer, "at": shown_time(decision.at),
        "reason": decision.reason, "override_reason": decision.override_reason}
    notes = [check.warning(), check.later_note() if decision and decision.new_value == "signoff" else ""]
    return macro("signoff.html", "line", gate, shown, [n for n in notes if n])


def gate_choices(store: Store, run_id: str) -> list[tuple[str, str]]:
    """(label, gate id) of every recorded gate with `run_id` as candidate, newest first; [] for no run."""
    from workbench.regression.recorded import recorded_gates

    if not run_id:
        return []
    rid = store.get_run(run_id).id
    return [(f"{g.id} · {g.verdict.upper()} · baseline {g.baseline_run} · {shown_time(g.created_at)}", g.id)
            for g in reversed(recorded_gates(store, candidate=rid))]


def signoff_note(store: Store, run_id: str, gate_id: str = "") -> str:
    """Markdown shown beside the sign-off form: the gate the decision covers and its verdict, and what a
    sign-off needs beyond a reason (a FAIL or INCONCLUSIVE gate, or none: the *override* box and an override
    reason; grades changed since the gate: the *confirm* box), and later gates of the candidate that did not
    clear."""
    from workbench.reviews import signoff_check

    if not run_id:
        return "pick the candidate run to sign off or block"
    check = signoff_check(store, run_id, gate_id)
    if check.gate_id is None:
        head = f"**no recorded gate** for candidate `{check.run_id}`"
    else:
        head = (f"decision on gate `{check.gate_id}` (**{check.gate_verdict.upper()}**, baseline "
                f"`{check.baseline_run}`, candidate `{check.run_id}`)")
    notes = [f"**a sign-off needs**: {check.warning()}"] if check.warning() else []
    if check.later:
        notes.append(f"**not the latest word**: {check.later_note()}")
    return "\n\n".join([head, *notes])


def recorded_line(r: Review) -> str:
    """Markdown for a release decision just recorded: its id, run, decision, gate and any override."""
    return macro("signoff.html", "recorded", r)

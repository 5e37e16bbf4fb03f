"""What the app shows about release decisions: the sign-off line of a compared pair, the gates a decision
can be about, and the note beside the sign-off form. Plain strings and lists (no gradio); the rules
themselves (a sign-off needs a gate; grades changed since it need confirming) live in `workbench.reviews`.
"""

from __future__ import annotations

from html import escape

from workbench.store import Store, shown_time


def signoff_line(store: Store, baseline: str, candidate: str) -> str:
    """HTML: the release decision on the latest recorded gate of this pair, or why there is none to sign."""
    from workbench.regression.records import recorded_gates
    from workbench.reviews import gate_decisions, signoff_check

    gates = recorded_gates(store, candidate=candidate, baseline=baseline)
    if not gates:
        return ("<p id='wb-release'>release: <b>no recorded gate for this pair</b>: record one (below) before a "
                "sign-off</p>")
    gate = gates[-1]
    decision = gate_decisions(store).get(gate.id)
    warn = signoff_check(store, candidate, gate.id).warning()
    out = f"<p id='wb-release'>release on gate <code>{escape(gate.id)}</code> ({escape(gate.verdict)}): "
    if decision is None:
        out += "no sign-off yet"
    else:
        out += (f"<b>{escape(decision.new_value)}</b> by {escape(decision.reviewer)} at "
                f"{escape(shown_time(decision.at))}: {escape(decision.reason)}")
    return out + (f"<br><b style='color:#9a6700'>{escape(warn)}</b>" if warn else "") + "</p>"


def gate_choices(store: Store, run_id: str) -> list[tuple[str, str]]:
    """(label, gate id) of every recorded gate with `run_id` as candidate, newest first; [] for no run."""
    from workbench.regression.records import recorded_gates

    if not run_id:
        return []
    rid = store.get_run(run_id).id
    return [(f"{g.id} · {g.verdict} · baseline {g.baseline_run} · {shown_time(g.created_at)}", g.id)
            for g in reversed(recorded_gates(store, candidate=rid))]


def signoff_note(store: Store, run_id: str, gate_id: str = "") -> str:
    """Markdown shown beside the sign-off form: the gate the decision is about, and any warning (no gate:
    a sign-off is refused; grades changed since the gate: a sign-off needs the confirmation box)."""
    from workbench.reviews import signoff_check

    if not run_id:
        return "pick the candidate run to sign off or block"
    check = signoff_check(store, run_id, gate_id)
    if check.gate_id is None:
        return f"**no sign-off possible**: {check.warning()}"
    head = (f"decision on gate `{check.gate_id}` (**{check.gate_verdict}**, baseline `{check.baseline_run}`, "
            f"candidate `{check.run_id}`)")
    if check.changed:
        return f"{head}\n\n**warning**: {check.warning()}; tick *confirm* to sign off anyway"
    return head

"""The decision queue: the app's first screen, as plain data. Every recorded gate is a card: its verdict as recorded
(never computed again), the policy that decided it, the candidate named by what made it (`naming.candidate_name`),
the trade-offs that decide it with their denominators (hallucinated and abstained over all probes, known facts
broken over the baseline-correct probes, the guard set's), and the release decision on it with who, when and any
override. Gates awaiting a decision come first, newest first; decided ones below, latest decision first.

Everything is read from the records (`regression.recorded`, `reviews`): the queue costs no comparison. A decision is
recorded through `reviews.record_release`, the CLI's path (`workbench review RUN --target release --gate GATE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.html import macro
from workbench.html.verdict import VERDICT_COLOUR, gate_rows
from workbench.naming import candidate_name
from workbench.regression.recorded import RecordedGate, read_gates
from workbench.store import RunRecord, Store, shown_time

AWAITING_COLUMNS = ("gate", "recorded", "verdict", "candidate", "hallucinated", "abstained", "known facts broken",
                    "policy")
DECIDED_COLUMNS = ("gate", "verdict", "candidate", "decision", "by", "at", "override")
MAX_BROKEN_SHOWN = 10


@dataclass(frozen=True)
class Decision:
    """The latest release decision on a gate (`reviews.gate_decisions`), as the queue shows it."""

    decision: str
    reviewer: str
    at: str
    reason: str
    override_reason: str | None
    later: str  # later gates of the same candidate that did not clear ("" for none)


@dataclass(frozen=True)
class GateCard:
    """One recorded gate as the queue shows it.

    Attributes:
        gate: The recorded gate (its verdict and gates as recorded).
        candidate, baseline: The runs' names (`naming.candidate_name`).
        hallucinated, abstained: `40 → 2 of 96` (probes, baseline → candidate).
        known_broken: `2 of 58 baseline-correct probes (3.4%)`.
        guard: The guard set's line (`guard set: 3 of 212 known facts broken (1.4%)`), or why it was not checked.
        not_checked: The gates whose set was not evaluated.
        decision: The release decision on it; None while it awaits one.
    """

    gate: RecordedGate
    candidate: str
    baseline: str
    hallucinated: str
    abstained: str
    known_broken: str
    guard: str
    not_checked: tuple[str, ...]
    decision: Decision | None

    @property
    def id(self) -> str:
        return self.gate.id

    @property
    def verdict(self) -> str:
        return self.gate.verdict

    def label(self) -> str:
        """`gate-... · FAIL · name`: the gate picker's label."""
        return f"{self.id} · {self.verdict.upper()} · {self.candidate}"


@dataclass(frozen=True)
class DecisionQueue:
    awaiting: list[GateCard]  # newest gate first
    decided: list[GateCard]  # latest decision first

    def first(self) -> str:
        """The gate the screen opens on: the newest awaiting a decision, else the latest decided; "" for none."""
        cards = self.awaiting or self.decided
        return cards[0].id if cards else ""

    def after(self, gate: RecordedGate) -> str:
        """The gate awaiting a decision that comes after `gate` in the queue (the next older one, else the newest);
        "" when none awaits."""
        others = [c for c in self.awaiting if c.id != gate.id]
        older = [c for c in others if c.gate.row.created_at < gate.row.created_at]
        return (older or others)[0].id if others else ""


def decision_queue(store: Store) -> DecisionQueue:
    """Every recorded gate as a card: the undecided newest first, then the decided, latest decision first."""
    from workbench.reviews import standings

    runs = {r.id: r for r in store.list_runs()}
    decided = {s.gate.id: s for s in standings(store) if s.gate is not None}
    cards = [_card(g, runs, decided.get(g.id)) for g in reversed(read_gates(store))]
    awaiting = [c for c in cards if c.decision is None]
    done = sorted((c for c in cards if c.decision is not None), key=lambda c: c.decision.at if c.decision else "",
                  reverse=True)
    return DecisionQueue(awaiting, done)


def _name(runs: dict[str, RunRecord], run_id: str) -> str:
    run = runs.get(run_id)
    return candidate_name(run.model, run.adapter) if run else run_id


def _card(gate: RecordedGate, runs: dict[str, RunRecord], standing: Any) -> GateCard:
    r = gate.result
    rows = {row["label"]: row for row in (r.get("headline") or {}).get("rows", [])}
    n = int((r.get("headline") or {}).get("n") or r.get("n_probes") or 0)

    def moved(label: str) -> str:
        row = rows.get(label)
        return "-" if row is None else f"{row['baseline_count']} → {row['candidate_count']} of {n}"

    known = {k.get("scope"): k for k in r.get("known_facts") or ()}
    probes = known.get("probes") or {"known": rows.get("correct", {}).get("baseline_count", 0),
                                     "broken": len(r.get("broken") or ())}  # results before known facts were kept
    guard = known.get("guard")
    decision = None
    if standing is not None:
        d = standing.decision
        decision = Decision(d.new_value, d.reviewer, d.at, d.reason, d.override_reason,
                            ", ".join(f"gate {g.id} {g.verdict.upper()}" for g in standing.later))
    return GateCard(
        gate, _name(runs, gate.row.candidate_run), _name(runs, gate.row.baseline_run),
        moved("hallucinated"), moved("abstained"), _broken(probes, "baseline-correct probes"),
        "guard set: " + (_broken(guard, "known facts") if guard else f"not checked ({r.get('guard_note') or '-'})"),
        tuple(g["name"] for g in gate.gates() if g["status"] == "not_checked"), decision)


def _broken(k: dict[str, Any], of: str) -> str:
    """`2 of 58 baseline-correct probes (3.4%)`."""
    known, broken = int(k.get("known") or 0), int(k.get("broken") or 0)
    return f"{broken} of {known} {of}" + (f" ({broken / known:.1%})" if known else "")


# -- tables -----------------------------------------------------------------------------------------------------


def _verdict_style(df: pd.DataFrame) -> Any:
    """The verdict column in its colour (`not checked` and `not recorded` grey; only pass green)."""
    def colour(v: Any) -> str:
        c = VERDICT_COLOUR.get(str(v).lower())
        return f"color: {c}; font-weight: 700" if c else ""

    return df.style.map(colour, subset=["verdict"]) if not df.empty else df


def awaiting_table(q: DecisionQueue) -> Any:
    """The gates awaiting a decision, newest first, verdicts coloured."""
    rows = [[c.id, shown_time(c.gate.row.created_at), c.verdict.upper(), c.candidate, c.hallucinated, c.abstained,
             c.known_broken, c.gate.policy_label] for c in q.awaiting]
    return _verdict_style(pd.DataFrame(rows, columns=list(AWAITING_COLUMNS)))


def decided_table(q: DecisionQueue) -> Any:
    """The decided gates, latest decision first: who, when, and any override (marked ⚠)."""
    rows = []
    for c in q.decided:
        d = c.decision
        assert d is not None
        override = f"⚠ override: {d.override_reason}" if d.override_reason else ""
        if d.later:
            override = "; ".join(x for x in (override, f"later {d.later}") if x)
        rows.append([c.id, c.verdict.upper(), c.candidate, d.decision, d.reviewer, shown_time(d.at), override])
    return _verdict_style(pd.DataFrame(rows, columns=list(DECIDED_COLUMNS)))


def queue_summary(q: DecisionQueue) -> str:
    """Markdown over the queue: how many gates await a decision, by recorded verdict, and how many are decided."""
    if not q.awaiting and not q.decided:
        return "**No gate recorded yet**: `workbench regress` (or Compare → Record gate verdict) records one."
    counts: dict[str, int] = {}
    for c in q.awaiting:
        counts[c.verdict.upper()] = counts.get(c.verdict.upper(), 0) + 1
    waiting = (f"**{len(q.awaiting)} gate{'s' if len(q.awaiting) != 1 else ''} await a decision** ("
               + ", ".join(f"{n} {v}" for v, n in counts.items()) + ")") if q.awaiting else \
        "**No gate awaits a decision**"
    return (f"{waiting}, newest first, each with its **recorded** verdict; {len(q.decided)} decided (below). Click "
            "a gate for its evidence, then sign it off or block it.")


def gate_choices(q: DecisionQueue) -> list[tuple[str, str]]:
    """(label, gate id) of every gate, in the queue's order."""
    return [(c.label(), c.id) for c in (*q.awaiting, *q.decided)]


# -- one gate's evidence ----------------------------------------------------------------------------------------


def card(store: Store, gate_id: str) -> GateCard:
    """The card of one recorded gate (WorkbenchError naming the known ones when there is none)."""
    from workbench.errors import unknown_name

    q = decision_queue(store)
    found = next((c for c in (*q.awaiting, *q.decided) if c.id == gate_id), None)
    if found is None:
        raise unknown_name("recorded gate", gate_id, [c.id for c in (*q.awaiting, *q.decided)])
    return found


def evidence_html(store: Store, gate_id: str) -> str:
    """HTML: the gate's recorded verdict (badge in its colour), policy, pair by name, the trade-offs with their
    denominators, every gate as recorded (`not checked` grey), the first broken probes, the report, and the decision
    on it when there is one."""
    if not gate_id:
        return macro("decisions.html", "empty")
    c = card(store, gate_id)
    r = c.gate.result
    broken = [{"id": b.get("probe_id", ""), "question": b.get("question", ""), "was": b.get("baseline_answer", ""),
               "now": b.get("candidate_answer", ""), "transition": b.get("transition", "")}
              for b in (r.get("broken") or ())[:MAX_BROKEN_SHOWN]]
    report = c.gate.report
    if report and Path(report).resolve().is_relative_to(store.workspace.resolve()):
        report = Path(report).resolve().relative_to(store.workspace.resolve()).as_posix()
    return macro("decisions.html", "evidence", c, VERDICT_COLOUR.get(c.verdict, "#57606a"),
                 shown_time(c.gate.row.created_at), gate_rows(c.gate.gates()), broken, len(r.get("broken") or ()),
                 None if c.decision is None else shown_time(c.decision.at), report)


def gates_of_adapter(store: Store, adapter: str | Path) -> list[GateCard]:
    """The recorded gates whose candidate ran `adapter` (any run of it), newest first."""
    target = Path(adapter).resolve()
    runs = {r.id for r in store.list_runs() if r.adapter and Path(r.adapter).resolve() == target}
    q = decision_queue(store)
    return sorted((c for c in (*q.awaiting, *q.decided) if c.gate.row.candidate_run in runs),
                  key=lambda c: c.gate.row.created_at, reverse=True)


# -- deciding ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decided:
    """A release decision just recorded from the queue: its line, its CLI command, and the gate to show next."""

    message: str  # markdown
    cli: str
    next_gate: str  # the next gate awaiting a decision ("" when none is left)


def decide(store: Store, gate_id: str, *, decision: str, reviewer: str, reason: str, override_reason: str | None = None,
           confirm: bool = False) -> Decided:
    """Sign off (`signoff`) or block (`block`) the candidate of a recorded gate on that gate: the rules of
    `reviews.record_release` (a sign-off over a FAIL or INCONCLUSIVE gate needs an override with a reason; grades
    changed since the gate need `confirm`) hold, and its refusals are raised as WorkbenchError."""
    from workbench import views
    from workbench.html.signoff import recorded_line
    from workbench.reviews import record_release

    gate = card(store, gate_id).gate
    r = record_release(store, reviewer=reviewer, run_id=gate.row.candidate_run, decision=decision, reason=reason,
                       gate_id=gate.id, confirm=confirm, override_reason=override_reason)
    cli = views.cli_review(store.workspace, r.run_id, target="release", value=decision, reason=r.reason,
                           reviewer=r.reviewer, gate_id=r.gate_id, confirm=confirm, override_reason=r.override_reason)
    return Decided(recorded_line(r), cli, decision_queue(store).after(gate))

"""The Compare tab's verdict block as HTML: the gate verdict, the headline over all probes, each gate with
what it could detect, and the named verdict changes. Plain strings (no gradio) rendered from
`templates/verdict.html` (workbench.html: autoescaped).

What a reviewer reads first answers "may the candidate ship?": the verdict badge of the pair's *recorded* gate,
read from the record (its policy, its verdict, each gate's status as recorded), never computed again under another
policy; an `inconclusive` one is never green and says why it is not a pass, and a gate whose set was not evaluated
reads `not checked` in grey, never `pass`. Then the trade the candidate makes over *all* probes (correct /
hallucinated / abstained, before -> after), whatever the gates say. A comparison computed now is a what-if,
labelled so, below the recorded gates; without a recorded gate the badge says so and only the what-if is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from workbench.html import Markup, macro
from workbench.regression.comparison import ComparisonResult, GateResult
from workbench.regression.headline import Headline
from workbench.regression.transitions import TRANSITION_HELP

if TYPE_CHECKING:
    from workbench.regression.recorded import RecordedGate

VERDICT_COLOUR = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e", "inconclusive": "#8250df",
                  "not_checked": "#57606a", "not recorded": "#57606a"}
"""Badge colour per verdict or gate status; only `pass` is green (`not_checked`, `not recorded`: grey)."""
STATUS_TEXT = {"not_checked": "not checked"}
"""A gate status as the app writes it, where it differs from its value."""

VERDICT_MEANING = {
    "pass": "every gate passed and could have failed on this probe set",
    "warn": "a warning gate failed; the fail gates passed",
    "fail": "a fail gate failed: do not ship",
    "inconclusive": "not a pass: a fail gate passed but could not have failed on this probe set "
                    "(too few probes to judge); grow the probe set or review by hand",
    "not recorded": "no gate is recorded for this pair: Record gate verdict (below) records one as `workbench "
                    "regress` does; until then nothing here is a verdict",
}
HEADLINE_COLOUR = {"correct": "#1a7f37", "hallucinated": "#cf222e", "abstained": "#9a6700"}


def verdict_badge(verdict: str) -> str:
    return macro("verdict.html", "badge", verdict, VERDICT_COLOUR.get(verdict, "#57606a"))


def headline_html(h: Headline) -> str:
    """A table: correct / hallucinated / abstained, baseline -> candidate (% and count), delta with its CI."""
    return macro("verdict.html", "headline", h, HEADLINE_COLOUR)


def changes_html(result: ComparisonResult) -> str:
    """'N of M verdicts changed: now_abstains 95 (answered wrongly before, now abstains ...), ...'."""
    return macro("verdict.html", "changes", result.headline.changed, result.overall.n, _named_changes(result))


def _named_changes(result: ComparisonResult) -> list[tuple[str, int, str]]:
    counts = result.overall.transitions.transitions()
    return [(str(t), k, TRANSITION_HELP[t]) for t, k in counts.items() if k and t.changed]


def gate_html(g: GateResult) -> str:
    """One gate: status, name, message, what the gate checks (its policy description), and what it could detect
    on this probe set."""
    return macro("verdict.html", "gate", gate_row(g.to_dict()))


def gate_row(g: Mapping[str, Any]) -> dict[str, Any]:
    """What `verdict.html`'s gate macro shows of one gate (`GateResult.to_dict()` or a recorded gate's entry,
    whose `status` the caller read with `recorded.gate_status`)."""
    status = str(g.get("status", ""))
    detectable = g.get("detectable") or {}
    return {"status": status, "text": STATUS_TEXT.get(status, status), "colour": VERDICT_COLOUR.get(status, "#57606a"),
            "name": g.get("name", ""), "message": g.get("message", ""), "description": g.get("description", ""),
            "detectable": detectable.get("text", "") if status != "not_checked" else ""}


def gate_rows(gates: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [gate_row(g) for g in gates]


def verdict_summary_html(result: ComparisonResult, *, signoff_html: str = "",
                         recorded: RecordedGate | None = None, policy_label: str = "") -> str:
    """The verdict block: the recorded gate's badge and its meaning, the pair, the headline, verdict changes, the
    sign-off line (`signoff_html`, already HTML: `signoff.signoff_line`'s output), every recorded gate with its
    detectability, then `result` as a what-if (`verdict_context`)."""
    return macro("verdict.html", "summary", verdict_context(result, signoff_html, recorded, policy_label))


def verdict_context(result: ComparisonResult, signoff_html: str = "", recorded: RecordedGate | None = None,
                    policy_label: str = "") -> dict[str, Any]:
    """What `verdict.html`'s summary macro shows: the headline verdict and gates from `recorded` (the pair's latest
    recorded gate; None: "not recorded"), the pair and the trade from `result` (computed now), and `result`'s own
    verdict and gates as a what-if under `policy_label` (the policy it was computed under)."""
    from workbench.store import shown_time

    verdict = recorded.verdict if recorded is not None else "not recorded"
    source = "" if recorded is None else (f"recorded gate {recorded.id} · {recorded.policy_label} · "
                                          f"{shown_time(recorded.row.created_at)}")
    inconclusive = recorded.result.get("inconclusive_gates", []) if recorded is not None else []
    return {"result": result, "verdict": verdict, "colour": VERDICT_COLOUR.get(verdict, "#57606a"),
            "meaning": VERDICT_MEANING.get(verdict, ""), "source": source,
            "inconclusive": ", ".join(str(n) for n in inconclusive),
            "headline_colours": HEADLINE_COLOUR, "named": _named_changes(result),
            "signoff": Markup(signoff_html),  # trusted: a rendered template, never user text
            "gates": gate_rows(recorded.gates()) if recorded is not None else [],
            "whatif": {"verdict": result.verdict, "text": STATUS_TEXT.get(result.verdict, result.verdict),
                       "colour": VERDICT_COLOUR.get(result.verdict, "#57606a"),
                       "policy": policy_label or "the built-in policy", "open": recorded is None,
                       "gates": gate_rows(g.to_dict() for g in result.gates)}}

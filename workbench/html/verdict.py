"""The Compare tab's verdict block as HTML: the gate verdict, the headline over all probes, each gate with
what it could detect, and the named verdict changes. Plain strings (no gradio) rendered from
`templates/verdict.html` (workbench.html: autoescaped).

What a reviewer reads first answers "may the candidate ship?": the verdict badge (an `inconclusive` one is
never green and says why it is not a pass), then the trade the candidate makes over *all* probes
(correct / hallucinated / abstained, before -> after), whatever the gates say.
"""

from __future__ import annotations

from typing import Any

from workbench.html import Markup, macro
from workbench.regression.comparison import ComparisonResult, GateResult
from workbench.regression.headline import Headline
from workbench.regression.transitions import TRANSITION_HELP

VERDICT_COLOUR = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e", "inconclusive": "#8250df"}
"""Badge colour per verdict; only `pass` is green."""

VERDICT_MEANING = {
    "pass": "every gate passed and could have failed on this probe set",
    "warn": "a warning gate failed; the fail gates passed",
    "fail": "a fail gate failed: do not ship",
    "inconclusive": "not a pass: a fail gate passed but could not have failed on this probe set "
                    "(too few probes to judge); grow the probe set or review by hand",
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
    return macro("verdict.html", "gate", g, VERDICT_COLOUR.get(g.status, "#57606a"))


def verdict_summary_html(result: ComparisonResult, *, signoff_html: str = "") -> str:
    """The verdict block: badge and its meaning, the pair, the headline, verdict changes, the sign-off line
    (`signoff_html`, already HTML: `signoff.signoff_line`'s output), then every gate with its
    detectability."""
    return macro("verdict.html", "summary", verdict_context(result, signoff_html))


def verdict_context(result: ComparisonResult, signoff_html: str = "") -> dict[str, Any]:
    """What `verdict.html`'s summary macro shows of `result`."""
    return {"result": result, "colour": VERDICT_COLOUR.get(result.verdict, "#57606a"),
            "meaning": VERDICT_MEANING[result.verdict],
            "inconclusive": ", ".join(g.name for g in result.inconclusive_gates),
            "headline_colours": HEADLINE_COLOUR, "named": _named_changes(result),
            "signoff": Markup(signoff_html),  # trusted: a rendered template, never user text
            "gates": [(g, VERDICT_COLOUR.get(g.status, "#57606a")) for g in result.gates]}

"""The Compare tab's verdict block as HTML: the gate verdict, the headline over all probes, each gate with
what it could detect, and the named verdict changes. Plain strings (no gradio), every text escaped.

What a reviewer reads first answers "may the candidate ship?": the verdict badge (an `inconclusive` one is
never green and says why it is not a pass), then the trade the candidate makes over *all* probes
(correct / hallucinated / abstained, before -> after), whatever the gates say.
"""

from __future__ import annotations

from html import escape

from workbench.regression.headline import Headline
from workbench.regression.results import ComparisonResult, GateResult
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
    colour = VERDICT_COLOUR.get(verdict, "#57606a")
    return (f"<span class='wb-badge wb-{escape(verdict)}' style='background:{colour};color:white;padding:2px 8px;"
            f"border-radius:4px'>gate: {escape(verdict.upper())}</span>")


def headline_html(h: Headline) -> str:
    """A table: correct / hallucinated / abstained, baseline -> candidate (% and count), delta with its CI."""
    rows = []
    for r in h.rows:
        d = r.delta
        colour = HEADLINE_COLOUR.get(r.label, "#333")
        rows.append(f"<tr><td style='color:{colour};font-weight:600'>{escape(r.label)}</td>"
                    f"<td>{100 * d.baseline:.1f}% ({r.baseline_count})</td><td>→</td>"
                    f"<td>{100 * d.candidate:.1f}% ({r.candidate_count})</td>"
                    f"<td><b>{100 * d.delta:+.1f} pt</b> [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}]</td></tr>")
    return ("<table id='wb-headline'><tr><th>over all " f"{h.n} probes</th><th>baseline</th><th></th>"
            "<th>candidate</th><th>change (95% CI)</th></tr>" + "".join(rows) + "</table>")


def changes_html(result: ComparisonResult) -> str:
    """'N of M verdicts changed: now_abstains 95 (answered wrongly before, now abstains ...), ...'."""
    counts = result.overall.transitions.transitions()
    named = [f"<li><b>{escape(str(t))}</b> {k}: {escape(TRANSITION_HELP[t])}</li>"
             for t, k in counts.items() if k and t.changed]
    head = f"<p id='wb-changed'>{result.headline.changed} of {result.overall.n} verdicts changed</p>"
    return head + (f"<ul>{''.join(named)}</ul>" if named else "")


def gate_html(g: GateResult) -> str:
    """One gate: status, name, message, what the gate checks (its policy description), and what it could detect
    on this probe set."""
    colour = VERDICT_COLOUR.get(g.status, "#57606a")
    det = f"<br><small class='wb-detect'>{escape(g.detectable.text)}</small>" if g.detectable else ""
    what = f"<br><small class='wb-gate-help'>{escape(g.description)}</small>" if g.description else ""
    return (f"<li><span style='color:{colour};font-weight:600'>{escape(g.status)}</span>: <b>{escape(g.name)}</b>: "
            f"{escape(g.message)}{what}{det}</li>")


def verdict_summary_html(result: ComparisonResult, *, signoff_html: str = "") -> str:
    """The verdict block: badge and its meaning, the pair, the headline, verdict changes, the sign-off line
    (`signoff_html`, already HTML), then every gate with its detectability."""
    inconclusive = ", ".join(g.name for g in result.inconclusive_gates)
    meaning = VERDICT_MEANING[result.verdict] + (f" ({escape(inconclusive)})" if inconclusive else "")
    return "\n".join([
        f"<div id='wb-verdict'>{verdict_badge(result.verdict)} <span id='wb-meaning'>{meaning}</span><br>"
        f"candidate <b>{escape(result.candidate_label)}</b> vs baseline <b>{escape(result.baseline_label)}</b>"
        f" · {result.overall.n} probes · broken {len(result.broken)} · fixed {len(result.fixed)}"
        f" · McNemar p = {result.overall.mcnemar.p_value:.3g}</div>",
        headline_html(result.headline),
        changes_html(result),
        signoff_html,
        "<details open><summary>gates (each with what it could detect on this probe set)</summary><ul>"
        + "".join(gate_html(g) for g in result.gates) + "</ul></details>",
    ])

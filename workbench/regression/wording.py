"""Number formatting and labels shared by the report renderers."""

from __future__ import annotations

from workbench.regression.comparison import ComparisonResult, ProbeChange
from workbench.regression.stats import MetricDelta
from workbench.regression.transitions import TransitionMatrix

METRIC_LABELS: dict[str, str] = {
    "correct": "correct",
    "incorrect": "incorrect (hallucination)",
    "not_attempted": "not attempted",
    "accuracy_given_attempted": "accuracy given attempted",
    "f_score": "F score",
}
"""Display names of stats.METRICS."""

VERDICT_LABELS: tuple[str, ...] = ("correct", "incorrect", "not attempted")
"""Display names of stats.VERDICT_ORDER."""

MAX_LISTED = 200
"""Changed probes listed at most per section in Markdown, HTML and JUnit reports (JSON has them all)."""


def pct(x: float) -> str:
    """A rate as a percentage: 0.4231 -> '42.3%'."""
    return f"{100 * x:.1f}%"


def pts(x: float) -> str:
    """A delta of rates in signed points: 0.0123 -> '+1.23'."""
    return f"{100 * x:+.2f}"


def ci(d: MetricDelta) -> str:
    """The CI of a delta in points: '[-2.10, +0.50]'."""
    return f"[{pts(d.ci_low)}, {pts(d.ci_high)}]"


def p_value(p: float) -> str:
    return f"{p:.3g}" if p >= 1e-4 else f"{p:.1e}"


def count_pct(count: int, rate: float) -> str:
    """'4 (4.0%)'."""
    return f"{count} ({pct(rate)})"


def verdict_line(result: ComparisonResult) -> str:
    """'FAIL (exit 1)' and what decided it: the fail gates that failed; the gates that could not have failed on
    this probe set, with what to add; a gate the guard set decided in the probes' place (too few baseline-correct
    probes for it), with that evidence and what to add to decide on the probes themselves."""
    notes = []
    failed = [g.name for g in result.gates if g.status == "fail"]
    if failed:
        notes.append(f"{', '.join(failed)} failed")
    if result.inconclusive_gates:
        names = ", ".join(g.name for g in result.inconclusive_gates)
        notes.append(f"{names} could not have failed on this probe set{_what_to_add(result)}")
    decided = [g for g in result.gates if g.detectable is not None and g.detectable.decided_by]
    if decided:
        have = sum(result.overall.transitions.counts[0])
        need = max((g.detectable.needed or 0 for g in decided if g.detectable), default=0)
        add = f">= {need - have} " if need > have else ""
        by = decided[0].detectable.decided_by if decided[0].detectable else ""
        notes.append(f"{', '.join(g.name for g in decided)} decided on {by}, your probes holding {have} "
                     f"baseline-correct{f' (McNemar needs >= {need})' if need else ''}: add {add}probes the baseline "
                     "answers right to decide on your own")
    line = f"{result.verdict.upper()} (exit {result.exit_code})"
    return line + (": " + "; ".join(notes) if notes else "")


def _what_to_add(result: ComparisonResult) -> str:
    """For gates blind for want of baseline-correct probes: how many they have and need, and the two remedies
    (more such probes; the guard set, when it was not evaluated or is too small)."""
    short = [g.detectable for g in result.inconclusive_gates if g.detectable and g.detectable.needed is not None]
    if not short:
        return ""
    need, have = max(d.needed or 0 for d in short), short[0].population
    text = (f" ({have} baseline-correct probes, it needs >= {need}): add >= {need - have} probes the baseline "
            "answers right")
    if result.guard is None:
        return text + f", or evaluate the guard set beside them (not checked: {result.guard_note})"
    known = sum(result.guard.transitions.counts[0])
    return text + f", or grow the guard set ({known} known facts; `--guard-pool FILE` adds your own)"


def answers(change: ProbeChange) -> str:
    """Both answers, quoted: 'Paris' -> 'I don't know'."""
    return f"{change.baseline_answer!r} -> {change.candidate_answer!r}"


def transition_counts(tm: TransitionMatrix) -> str:
    """Non-zero named transitions: 'now_abstains 95, still_correct 4, still_abstains 1'."""
    return ", ".join(f"{t} {k}" for t, k in tm.transitions().items() if k) or "none"


INCONCLUSIVE_NOTE = (
    "Inconclusive: a fail-severity gate passed but could not have failed on this probe set (too few "
    "probes of the kind it counts, e.g. fewer than 6 baseline-correct probes for McNemar at alpha 0.05). "
    "The candidate is not shown to be worse, nor shown not to be: add probes the baseline answers "
    "correctly, or review by hand."
)


def known_facts_lines(result: ComparisonResult) -> list[str]:
    """Known facts per scope (probes, guard set), replayed and unreplayed apart, or why the guard was not checked:
    the same lines in every report."""
    lines = [k.line() for k in result.known]
    if result.guard is None:
        lines.append(f"guard set: not checked ({result.guard_note})")
    return lines


STATUS_LABELS: dict[str, str] = {"not_checked": "not checked"}
"""How a gate status reads in reports where it differs from its value."""


def status_label(status: str) -> str:
    """A gate status as reports print it: `not_checked` reads `not checked`, the others as they are."""
    return STATUS_LABELS.get(status, status)


def not_checked_line(result: ComparisonResult) -> str:
    """'Not checked (the verdict says nothing about them): guard_facts_kept (no guard set ...)'; "" when every gate
    was checked."""
    gates = result.unchecked_gates
    if not gates:
        return ""
    return "Not checked (the verdict says nothing about them): " + "; ".join(
        f"{g.name} ({g.message.removeprefix('not checked: ')})" for g in gates)

"""Number formatting and labels shared by the report renderers."""

from __future__ import annotations

from workbench.regression.stats import MetricDelta

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
"""Fixed / broken probes listed at most in Markdown and HTML reports (JSON has them all)."""


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

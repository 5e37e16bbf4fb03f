"""The headline over all probes: correct / hallucinated / abstained, before -> after, with deltas and CIs.

The first thing every report shows, and what the app renders on top of a comparison: the trade a
candidate makes reads in one line ("hallucinated 95.0% -> 0.0%, abstained 1.0% -> 96.0%, correct 4.0% ->
4.0%") whatever the gates say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.regression.stats import MetricDelta
from workbench.regression.transitions import TransitionMatrix

HEADLINE_METRICS: tuple[tuple[str, str], ...] = (
    ("correct", "correct"),
    ("incorrect", "hallucinated"),
    ("not_attempted", "abstained"),
)
"""(metric name in stats.METRICS, headline label), in headline order."""


@dataclass(frozen=True)
class HeadlineRow:
    """One verdict's share of all probes, baseline and candidate.

    Attributes:
        label: "correct", "hallucinated" (graded incorrect) or "abstained" (not attempted).
        metric: The stats metric behind it: correct, incorrect or not_attempted.
        baseline_count: Probes with this verdict in the baseline.
        candidate_count: Probes with this verdict in the candidate.
        delta: Rates (fractions), delta and paired bootstrap CI of the delta.
    """

    label: str
    metric: str
    baseline_count: int
    candidate_count: int
    delta: MetricDelta

    def text(self) -> str:
        """'hallucinated 95.0% -> 0.0% (-95.0 pt, CI [-99.0, -90.0])'."""
        d = self.delta
        return (
            f"{self.label} {100 * d.baseline:.1f}% -> {100 * d.candidate:.1f}% "
            f"({100 * d.delta:+.1f} pt, CI [{100 * d.ci_low:+.1f}, {100 * d.ci_high:+.1f}])"
        )

    def to_dict(self) -> dict[str, Any]:
        d = self.delta
        return {
            "label": self.label,
            "metric": self.metric,
            "baseline_count": self.baseline_count,
            "candidate_count": self.candidate_count,
            "baseline": d.baseline,
            "candidate": d.candidate,
            "delta": d.delta,
            "ci_low": d.ci_low,
            "ci_high": d.ci_high,
        }


@dataclass(frozen=True)
class Headline:
    """Correct / hallucinated / abstained over all probes, before -> after.

    Attributes:
        n: Probes compared.
        rows: One HeadlineRow per verdict, in HEADLINE_METRICS order.
        changed: Probes whose verdict changed (any transition off the diagonal).
    """

    n: int
    rows: tuple[HeadlineRow, ...]
    changed: int

    @classmethod
    def from_group(cls, metrics: dict[str, MetricDelta], transitions: TransitionMatrix) -> Headline:
        base = [sum(row) for row in transitions.counts]
        cand = [sum(col) for col in zip(*transitions.counts, strict=True)]
        rows = tuple(
            HeadlineRow(label, metric, base[i], cand[i], metrics[metric])
            for i, (metric, label) in enumerate(HEADLINE_METRICS)
        )
        return cls(n=transitions.total, rows=rows, changed=transitions.changed)

    def row(self, label: str) -> HeadlineRow:
        """The row of `label` ("correct", "hallucinated" or "abstained")."""
        return next(r for r in self.rows if r.label == label)

    def text(self) -> str:
        """One line: every row's text, then how many verdicts changed."""
        return "; ".join(r.text() for r in self.rows) + f"; {self.changed} of {self.n} verdicts changed"

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "changed": self.changed, "rows": [r.to_dict() for r in self.rows]}

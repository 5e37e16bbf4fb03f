"""What a comparison produces: per-group deltas, flips, gate results and the overall verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from workbench.regression.policy import Policy
from workbench.regression.stats import METRICS, McNemarResult, MetricDelta
from workbench.regression.transitions import Flip, TransitionMatrix
from workbench.types import Verdict

Outcome = Literal["pass", "warn", "fail"]


@dataclass(frozen=True)
class GroupComparison:
    """Baseline vs candidate over one group of probes ("overall" or one tag).

    Attributes:
        name: "overall" or the tag.
        n: Probes in the group.
        metrics: MetricDelta per metric name (see stats.METRICS); fractions, not points.
        mcnemar: Exact McNemar test on the group's correct / not-correct flips.
        transitions: The group's 3x3 transition matrix.
    """

    name: str
    n: int
    metrics: dict[str, MetricDelta]
    mcnemar: McNemarResult
    transitions: TransitionMatrix

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n": self.n,
            "metrics": {m: asdict(self.metrics[m]) for m in METRICS},
            "mcnemar": {**asdict(self.mcnemar), "worse": self.mcnemar.worse},
            "transitions": self.transitions.to_dict(),
        }


@dataclass(frozen=True)
class ProbeChange:
    """A probe that was fixed or broken, with both runs' answers."""

    probe_id: str
    flip: Flip
    tags: tuple[str, ...]
    category: str | None
    baseline_verdict: Verdict
    candidate_verdict: Verdict
    baseline_answer: str
    candidate_answer: str

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(tags=list(self.tags), flip=str(self.flip))
        d.update(baseline_verdict=str(self.baseline_verdict), candidate_verdict=str(self.candidate_verdict))
        return d


@dataclass(frozen=True)
class GateResult:
    """One gate's outcome.

    Attributes:
        name: The gate's unique name.
        type: The gate's `type` in the policy.
        severity: "fail" or "warn".
        passed: Whether the gate's condition holds.
        observed: The number compared (in `unit`); None when nothing was measurable (e.g. no tags).
        threshold: The limit it was compared with (in `unit`).
        unit: "points", "fraction", "count" or "p".
        message: One line saying what was compared and why it passed or failed.
        description: The gate's description from the policy.
        details: Extra lines, e.g. each failing tag.
    """

    name: str
    type: str
    severity: str
    passed: bool
    observed: float | None
    threshold: float
    unit: str
    message: str
    description: str = ""
    details: tuple[str, ...] = ()

    @property
    def status(self) -> Outcome:
        """`pass`, or the severity (`warn` / `fail`) when the condition does not hold."""
        return "pass" if self.passed else ("fail" if self.severity == "fail" else "warn")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "details": list(self.details), "status": self.status}


@dataclass(frozen=True)
class ComparisonResult:
    """Everything `compare` found. `to_dict()` is JSON-serialisable (no NaN, no enums).

    Attributes:
        policy: The policy the gates came from (its bootstrap settings made the CIs).
        overall: All probes.
        by_tag: One GroupComparison per tag (baseline's tags), sorted by tag.
        by_category: Transition matrix per baseline attribution category; probes without one are left out.
        changes: Fixed and broken probes, by probe id, with both answers.
        gates: One result per policy gate, in policy order.
    """

    baseline_run_id: str
    baseline_label: str
    candidate_run_id: str
    candidate_label: str
    policy: Policy
    overall: GroupComparison
    by_tag: dict[str, GroupComparison]
    by_category: dict[str, TransitionMatrix]
    changes: tuple[ProbeChange, ...]
    gates: tuple[GateResult, ...]

    @property
    def verdict(self) -> Outcome:
        """`fail` if any fail-severity gate failed, else `warn` if any warn gate failed, else `pass`."""
        statuses = {g.status for g in self.gates}
        return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"

    @property
    def exit_code(self) -> int:
        """0 pass (warnings allowed), 1 fail. (2, an error, is raised as WorkbenchError instead.)"""
        return 1 if self.verdict == "fail" else 0

    @property
    def broken(self) -> tuple[ProbeChange, ...]:
        return tuple(c for c in self.changes if c.flip == Flip.BROKEN)

    @property
    def fixed(self) -> tuple[ProbeChange, ...]:
        return tuple(c for c in self.changes if c.flip == Flip.FIXED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "baseline": {"run_id": self.baseline_run_id, "label": self.baseline_label},
            "candidate": {"run_id": self.candidate_run_id, "label": self.candidate_label},
            "n_probes": self.overall.n,
            "gates": [g.to_dict() for g in self.gates],
            "overall": self.overall.to_dict(),
            "by_tag": {t: g.to_dict() for t, g in self.by_tag.items()},
            "by_category": {k: m.to_dict() for k, m in self.by_category.items()},
            "changes": [c.to_dict() for c in self.changes],
            "policy": self.policy.model_dump(mode="json"),
        }

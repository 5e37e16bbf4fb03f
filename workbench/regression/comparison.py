"""What a comparison produces: per-group deltas, flips, gate results and the overall verdict."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from workbench.regression.detect import Detectability
from workbench.regression.headline import Headline
from workbench.regression.policy import Policy
from workbench.regression.stats import METRICS, McNemarResult, MetricDelta
from workbench.regression.transitions import Flip, Transition, TransitionMatrix
from workbench.risk.shift import RiskShift
from workbench.types import Verdict

Outcome = Literal["pass", "warn", "fail", "inconclusive"]
"""A gate's status or the comparison's verdict. `inconclusive`: a fail-severity gate passed but could not
have failed where its threshold says it should (see detect.py)."""
GateStatus = Literal["pass", "warn", "fail", "inconclusive", "not_checked"]
"""A gate's status: an Outcome, or `not_checked` for a gate whose set was not evaluated (a `scope: guard` gate
without a guard comparison, a `scope: field` gate without a field suite). Never a pass; the verdict leaves it out."""

EXIT_CODES: dict[Outcome, int] = {"pass": 0, "warn": 0, "fail": 1, "inconclusive": 3}
"""Exit code of each verdict. 2 is an error (raised as WorkbenchError, never a verdict). Inconclusive is 3,
not 0: a release check must not ship what the probe set could not judge, and not 1: "the candidate is
worse" and "the probe set cannot tell" call for different actions (fix the model vs grow the probe set or
review by hand)."""

_WORST_FIRST: tuple[Outcome, ...] = ("fail", "inconclusive", "warn")

FORMAT_VERSION = 4
"""Version of `ComparisonResult.to_dict()`. 1 (no field): verdict pass/warn/fail, `changes` fixed and broken
only. 2: verdict may be `inconclusive` (exit code 3); `changes` lists every probe whose verdict changed, each
with its `transition`; new `headline`, `broken`, gate `detectable` and transition counts fields. 3: `known_facts`
(baseline-correct probes and guard facts, broken, replayed and unreplayed apart) and `guard` (the guard set's
comparison, or null with `guard_note`). 4: a gate's `status` may be `not_checked` (its set was not evaluated;
`checked` false), where 3 wrote `pass`."""


def worst_exit_code(codes: Iterable[int]) -> int:
    """The exit code of several verdicts (e.g. one `watch` scan): fail (1) over inconclusive (3) over pass (0)."""
    rank = {0: 0, 3: 1, 1: 2}
    return max(codes, key=lambda c: rank.get(c, 3), default=0)


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
    """A probe whose verdict changed, with both runs' answers.

    Attributes:
        flip: McNemar's partition (fixed / broken / still_wrong).
        transition: The named transition (broken_abstains, now_abstains, ...).
        question: The probe's question when the runs carry it, else "".
    """

    probe_id: str
    flip: Flip
    tags: tuple[str, ...]
    category: str | None
    baseline_verdict: Verdict
    candidate_verdict: Verdict
    baseline_answer: str
    candidate_answer: str
    transition: Transition
    question: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(tags=list(self.tags), flip=str(self.flip), transition=str(self.transition))
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
        detectable: What the gate could detect on this probe set (None only for results made by hand).
        checked: False when the gate's set was not evaluated (no guard set, no field suite): status
            `not_checked`, whatever `passed` says.
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
    detectable: Detectability | None = None
    checked: bool = True

    @property
    def inconclusive(self) -> bool:
        """A fail-severity gate that passed but could not have failed where its threshold says it should."""
        blind = self.detectable is not None and not self.detectable.adequate
        return self.passed and self.severity == "fail" and blind

    @property
    def status(self) -> GateStatus:
        """`not_checked` when its set was not evaluated; the severity (`warn` / `fail`) when the condition does not
        hold; else `inconclusive` for a blind fail-severity gate, else `pass`."""
        if not self.checked:
            return "not_checked"
        if not self.passed:
            return "fail" if self.severity == "fail" else "warn"
        return "inconclusive" if self.inconclusive else "pass"

    def to_dict(self) -> dict[str, Any]:
        d = {**asdict(self), "details": list(self.details), "status": self.status}
        d["detectable"] = None if self.detectable is None else self.detectable.to_dict()
        return d


@dataclass(frozen=True)
class KnownFacts:
    """Known facts (baseline-correct) of one set and what the candidate did to them.

    Attributes:
        scope: "probes" (the compared runs' probes) or "guard" (the base model's guard set).
        known: Baseline-correct probes / facts.
        wrong: Of those, answered wrongly by the candidate.
        refused: Of those, not attempted by the candidate (abstained).
        replayed: Of `known`, the ones the candidate's fix set trained on as replay or anchors; None when the
            candidate's lineage is unknown (an adapter made elsewhere, or no adapter).
        replayed_broken: Of `replayed`, broken (wrong or refused); None as `replayed`.
    """

    scope: str
    known: int
    wrong: int
    refused: int
    replayed: int | None = None
    replayed_broken: int | None = None

    @property
    def broken(self) -> int:
        return self.wrong + self.refused

    def line(self) -> str:
        """One line for every report: `guard set: 4 of 212 known facts broken (1.9%: 1 wrong, 3 refused); ...`."""
        what = "guard set" if self.scope == "guard" else "probes"
        frac = f"{self.broken / self.known:.1%}: " if self.known else ""
        text = (f"{what}: {self.broken} of {self.known} known facts broken ({frac}{self.wrong} now wrong, "
                f"{self.refused} now refused)")
        if self.replayed is None:
            return text + "; replayed by the fix: unknown (no fix-set lineage)"
        rb = self.replayed_broken or 0
        return (text + f"; replayed by the fix {rb} of {self.replayed}, never seen by it "
                f"{self.broken - rb} of {self.known - self.replayed}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "broken": self.broken}


@dataclass(frozen=True)
class ComparisonResult:
    """Everything `compare` found. `to_dict()` is JSON-serialisable (no NaN, no enums).

    Attributes:
        policy: The policy the gates came from (its bootstrap settings made the CIs).
        overall: All probes.
        by_tag: One GroupComparison per tag (baseline's tags), sorted by tag.
        by_category: Transition matrix per baseline attribution category; probes without one are left out.
        changes: Every probe whose verdict changed, by probe id, with both answers and its transition.
        gates: One result per policy gate, in policy order.
        known: Known facts per scope (probes, then the guard set when it was compared).
        guard: The guard set's comparison (workbench/guard), or None (`guard_note` says why).
        guard_changes: The guard facts whose verdict changed.
        guard_note: Why no guard set was compared ("" when one was).
        risk: Both runs' hallucination risk on the same questions (workbench/risk/shift.py; None: not read).
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
    known: tuple[KnownFacts, ...] = ()
    guard: GroupComparison | None = None
    guard_changes: tuple[ProbeChange, ...] = ()
    guard_note: str = ""
    risk: RiskShift | None = None

    @property
    def verdict(self) -> Outcome:
        """`fail` if any fail-severity gate failed; else `inconclusive` if a fail-severity gate could not have
        failed (GateResult.inconclusive); else `warn` if a warn gate failed; else `pass`."""
        statuses = {g.status for g in self.gates}
        return next((s for s in _WORST_FIRST if s in statuses), "pass")

    @property
    def exit_code(self) -> int:
        """EXIT_CODES[verdict]: 0 pass or warn, 1 fail, 3 inconclusive (2, an error, is a WorkbenchError)."""
        return EXIT_CODES[self.verdict]

    @property
    def headline(self) -> Headline:
        """Correct / hallucinated / abstained over all probes, before -> after."""
        return Headline.from_group(self.overall.metrics, self.overall.transitions)

    @property
    def inconclusive_gates(self) -> tuple[GateResult, ...]:
        """The fail-severity gates that passed but could not have failed."""
        return tuple(g for g in self.gates if g.inconclusive)

    @property
    def unchecked_gates(self) -> tuple[GateResult, ...]:
        """The gates whose set was not evaluated (status `not_checked`): the verdict says nothing about them."""
        return tuple(g for g in self.gates if not g.checked)

    @property
    def broken(self) -> tuple[ProbeChange, ...]:
        """Baseline-correct probes the candidate gets wrong or abstains on."""
        return tuple(c for c in self.changes if c.flip == Flip.BROKEN)

    @property
    def fixed(self) -> tuple[ProbeChange, ...]:
        return tuple(c for c in self.changes if c.flip == Flip.FIXED)

    def changed(self, *transitions: Transition) -> tuple[ProbeChange, ...]:
        """Changed probes with one of `transitions` (every changed probe when none is given)."""
        return tuple(c for c in self.changes if not transitions or c.transition in transitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "headline": self.headline.to_dict(),
            "broken": [c.to_dict() for c in self.broken],
            "inconclusive_gates": [g.name for g in self.inconclusive_gates],
            "not_checked_gates": [g.name for g in self.unchecked_gates],
            "baseline": {"run_id": self.baseline_run_id, "label": self.baseline_label},
            "candidate": {"run_id": self.candidate_run_id, "label": self.candidate_label},
            "n_probes": self.overall.n,
            "gates": [g.to_dict() for g in self.gates],
            "overall": self.overall.to_dict(),
            "by_tag": {t: g.to_dict() for t, g in self.by_tag.items()},
            "by_category": {k: m.to_dict() for k, m in self.by_category.items()},
            "changes": [c.to_dict() for c in self.changes],
            "policy": self.policy.model_dump(mode="json"),
            "known_facts": [k.to_dict() for k in self.known],
            "guard": None if self.guard is None else {**self.guard.to_dict(),
                                                      "changes": [c.to_dict() for c in self.guard_changes]},
            "guard_note": self.guard_note,
            "risk": None if self.risk is None else self.risk.to_dict(),
        }

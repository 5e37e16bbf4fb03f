"""What each gate could detect on this probe set, and whether that is enough for its threshold.

A gate that passes proves little if it could not have failed: McNemar's exact test over 4
baseline-correct probes gives p = 0.125 even when all four break, so "not significantly worse" holds
whatever the candidate does to them. For every gate this module finds the smallest adverse effect that
would make it fail on *this* probe set, in the best case for detection: that change alone, every other
probe unchanged (changes elsewhere only widen the CIs).

- Counting gates (`max_broken`, `max_broken_fraction`, `max_abstention_on_previously_correct`): exact;
  a fraction of the B baseline-correct probes moves in steps of 1/B.
- `mcnemar`: with no fixed probe, the fewest broken ones that give p < alpha (6 at alpha 0.05, 8 at 0.01).
- CI gates: when k of a group's n probes move the adverse way, the paired bootstrap's delta is X/n with
  X ~ Binomial(n, k/n) (the exact bootstrap distribution of that change; the report's 2,000-resample CI
  can differ from it by about one probe at the edge). The smallest k whose chosen bound crosses the
  threshold is what the gate could detect.

Adequacy: a gate whose threshold is an effect size (a count, a fraction, a `delta`, or the CI bound on
the unfavourable side) is adequate when it fails at the smallest effect beyond its threshold that can
happen on this probe set (always true of counts; vacuously true when no such effect can happen). A
significance gate (McNemar; `ci_low` of an increase or `ci_high` of a drop, "significantly more than X")
states no effect size of its own: it is adequate when some possible effect makes it fail at all. Effect
sizes on known facts are `max_broken_fraction`'s job, which counts exactly. A fail-severity gate that is
not adequate makes the comparison's verdict `inconclusive`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from workbench.regression.policy import (
    Bound,
    Gate,
    HallucinationRateMustDrop,
    MaxAbstentionIncrease,
    MaxAbstentionOnPreviouslyCorrect,
    MaxBroken,
    MaxBrokenFraction,
    MaxHallucinationIncrease,
    MaxStillWrong,
    MaxTagCorrectDrop,
    McNemar,
    MinFixed,
    Policy,
)
from workbench.regression.stats import McNemarResult, mcnemar_exact
from workbench.regression.transitions import TransitionMatrix

Reading = Literal["low", "delta", "high"]
"""Which number of the adverse change's bootstrap distribution a gate reads: its lower or upper CI
quantile, or the point estimate."""


@dataclass(frozen=True)
class Detectability:
    """What one gate could detect on this probe set.

    Attributes:
        can_fail: Some change possible on this probe set would make the gate fail.
        adequate: False when the gate could not have failed where its threshold says it should (see the
            module docstring); a fail-severity gate that is not adequate makes the verdict inconclusive.
        text: One line for reports: "could detect: >= 6 broken probes ..." or "could not fail on this
            probe set: ...".
        smallest: The fewest probes whose change makes it fail (best case), None when none can.
        population: Probes that could move the adverse way (e.g. the baseline-correct probes).
        details: Extra lines (e.g. per tag).
        needed: For a gate blind for want of probes (McNemar): the baseline-correct probes it needs to be able
            to fail; None otherwise.
        decided_by: The evidence that decided in this gate's place when the probe set could not (e.g. "the guard
            set's 212 known facts (guard_facts_kept)", see checks.py); the gate then counts as `adequate`.
    """

    can_fail: bool
    adequate: bool
    text: str
    smallest: int | None = None
    population: int = 0
    details: tuple[str, ...] = ()
    needed: int | None = None
    decided_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "details": list(self.details)}


def smallest_shift(n: int, movable: int, limit: float, reading: Reading, confidence: float) -> int | None:
    """The fewest of `movable` probes (out of a group of `n`) that, moving the adverse way with nothing
    else changing, push the chosen reading of the adverse delta (a fraction) strictly past `limit`.
    None when even all `movable` probes do not."""
    if movable < 1 or n < 1:
        return None
    ks = np.arange(1, movable + 1)
    if reading == "delta":
        hit = np.round(100 * ks / n, 9) > round(100 * limit, 9)  # as checks.py rounds points
    else:
        q = (1 - confidence) / 2 if reading == "low" else (1 + confidence) / 2
        # quantile_q(X) > limit * n  <=>  P(X <= floor(limit * n)) < q, for X ~ Binomial(n, k / n)
        from scipy.stats import binom  # here: scipy.stats takes 1-2 s to import, and most commands never get here

        hit = binom.cdf(math.floor(limit * n + 1e-9), n, ks / n) < q
    found = np.flatnonzero(hit)
    return int(ks[found[0]]) if found.size else None


def smallest_mcnemar(alpha: float, fixed: int = 0) -> int:
    """The fewest broken probes that, against `fixed` fixed ones, give exact McNemar p < alpha."""
    k = fixed + 1
    while not _worse(mcnemar_exact(k, fixed), alpha):
        k += 1
    return k


def _worse(mc: McNemarResult, alpha: float) -> bool:
    return mc.worse and mc.p_value < alpha


def gate_detectability(
    gate: Gate, policy: Policy, overall: TransitionMatrix, tag_sizes: Mapping[str, tuple[int, int]]
) -> Detectability:
    """The gate's detectability. `overall` is the all-probe transition matrix; `tag_sizes` maps each tag
    to (probes, baseline-correct probes)."""
    rows = [sum(r) for r in overall.counts]  # baseline correct, incorrect, not attempted
    n, known = overall.total, rows[0]
    conf = policy.bootstrap.confidence
    if isinstance(gate, MaxBroken):
        return _count(known, _smallest_count(known, lambda k: k > gate.max_count), "broken probe", "baseline-correct")
    if isinstance(gate, MaxBrokenFraction | MaxAbstentionOnPreviouslyCorrect):
        what = "broken probe" if isinstance(gate, MaxBrokenFraction) else "new abstention"
        return _count(known, _smallest_count(known, lambda k: k / known > gate.max_fraction), what, "baseline-correct")
    if isinstance(gate, MaxStillWrong):
        # On the field suite a refusal of a question the reviewer answered is not fixed either (checks.py).
        what = "unfixed reported failure" if gate.scope == "field" else "still hallucinated probe"
        return _count(rows[1], _smallest_count(rows[1], lambda k: k > gate.max_count), what, "baseline-hallucinated")
    if isinstance(gate, MinFixed):
        failing = rows[1] + rows[2]
        text = (f"fails unless >= {gate.min_count} of the {failing} failing probes are fixed" if failing
                else "no failing probe to fix")
        return Detectability(failing > 0, True, text, gate.min_count if failing else None, failing)
    if isinstance(gate, McNemar):
        return _mcnemar(known, gate.alpha)
    if isinstance(gate, MaxHallucinationIncrease | MaxAbstentionIncrease):
        hallucination = isinstance(gate, MaxHallucinationIncrease)
        movable = n - rows[1] if hallucination else n - rows[2]
        what = "more hallucinated probe" if hallucination else "more abstention"
        return _increase(n, movable, gate.max_points, gate.bound, conf, what)
    if isinstance(gate, HallucinationRateMustDrop):
        k = smallest_shift(n, rows[1], gate.min_drop_points / 100, _reading(gate.bound, up=False), conf)
        text = (f"fails unless >= {k} hallucinated probes stop being hallucinated ({_pt(k, n, '-')})"
                if k else f"could not pass on this probe set ({rows[1]} hallucinated probes to fix)")
        return Detectability(True, True, text, 0, n)
    if isinstance(gate, MaxTagCorrectDrop):
        return _tags(gate, conf, tag_sizes)
    raise TypeError(f"unhandled gate type {type(gate).__name__}")  # pragma: no cover


def _smallest_count(population: int, fails: Any) -> int | None:
    return next((k for k in range(1, population + 1) if fails(k)), None)


def _count(population: int, k: int | None, what: str, of: str) -> Detectability:
    if k is None:
        why = f"no {of} probes" if population == 0 else f"even all {population} {of} probes stay under the limit"
        return Detectability(False, True, f"could not fail on this probe set: {why}", None, population)
    text = f"could detect: >= {_probes(k, what)} of {population} {of} ({k / population:.1%})"
    return Detectability(True, True, text, k, population)


def _mcnemar(known: int, alpha: float) -> Detectability:
    k = smallest_mcnemar(alpha)
    p_at = mcnemar_exact(k, 0).p_value
    if k <= known:
        text = f"could detect: >= {k} broken probes with none fixed (p = {p_at:.3g} < {alpha:g})"
        return Detectability(True, True, text, k, known)
    p_all = mcnemar_exact(known, 0).p_value
    text = (f"could not fail on this probe set: {known} baseline-correct probes, all broken with none fixed "
            f"give p = {p_all:.3g} >= {alpha:g} (needs >= {k} baseline-correct probes)")
    return Detectability(False, False, text, None, known, needed=k)


def _reading(bound: Bound, *, up: bool) -> Reading:
    """The reading of the adverse change's magnitude that a gate's bound corresponds to. For a drop gate
    the delta is minus the magnitude, so its ci_high is the magnitude's lower quantile."""
    if bound == "delta":
        return "delta"
    return ("low" if bound == "ci_low" else "high") if up else ("low" if bound == "ci_high" else "high")


def _judge(n: int, movable: int, limit: float, reading: Reading, conf: float) -> tuple[int | None, bool]:
    """(smallest k, adequate) for a CI or delta gate; see the module docstring."""
    k = smallest_shift(n, movable, limit, reading, conf)
    if reading == "low":  # significance reading: adequate when it can fail at all
        return k, k is not None
    required = smallest_shift(n, movable, limit, "delta", conf)
    return k, required is None or (k is not None and k <= required)


def _increase(n: int, movable: int, max_points: float, bound: Bound, conf: float, what: str) -> Detectability:
    k, adequate = _judge(n, movable, max_points / 100, _reading(bound, up=True), conf)
    if k is None:
        text = (f"could not fail on this probe set: even all {movable} probes that could move give "
                f"{bound} <= +{max_points:g} pt")
        return Detectability(False, adequate, text, None, movable)
    return Detectability(True, adequate, f"could detect: >= {_probes(k, what)} ({_pt(k, n, '+')})", k, movable)


def _tags(gate: MaxTagCorrectDrop, conf: float, sizes: Mapping[str, tuple[int, int]]) -> Detectability:
    named = gate.tags is not None
    wanted = list(gate.tags) if gate.tags is not None else sorted(sizes)
    checked = [t for t in wanted if t in sizes and sizes[t][0] >= gate.min_probes]
    reading = _reading(gate.bound, up=False)
    found = {t: _judge(sizes[t][0], sizes[t][1], gate.max_points / 100, reading, conf) for t in checked}
    able = {t: k for t, (k, _) in found.items() if k is not None}
    blind = [t for t in checked if t not in able]
    unchecked = [t for t in wanted if t not in checked]
    details = tuple(f"{t}: >= {k} of {sizes[t][0]} probes lost ({_pt(k, sizes[t][0], '-')})" for t, k in able.items())
    if blind:
        details += (f"blind (too few baseline-correct probes to cross the bound): {', '.join(blind)}",)
    if named:
        adequate = not unchecked and all(ok for _, ok in found.values())
        if unchecked:
            details += (f"named but not checked (absent or under min_probes): {', '.join(unchecked)}",)
    else:
        adequate = not checked or any(ok for _, ok in found.values())
    if not checked:
        text = "nothing to check: no tag in the probe set" if not named else "could not fail: no named tag checked"
        return Detectability(False, adequate, text, None, 0, details)
    if not able:
        text = f"could not fail on this probe set: none of {len(checked)} tags can lose enough probes"
        return Detectability(False, adequate, text, None, 0, details)
    lo, hi = min(able.values()), max(able.values())
    span = f"{lo}" if lo == hi else f"{lo}-{hi}"
    text = f"could detect: a tag losing >= {span} probes ({len(able)} of {len(checked)} tags checkable)"
    if blind:
        text += f"; blind on {len(blind)}: {', '.join(blind[:5])}{' ...' if len(blind) > 5 else ''}"
    return Detectability(True, adequate, text, lo, 0, details)


def _probes(k: int, what: str) -> str:
    """'6 broken probes' / '1 broken probe' (`what` is singular)."""
    return f"{k} {what}{'' if k == 1 else 's'}"


def _pt(k: int, n: int, sign: str) -> str:
    return f"{sign}{100 * k / n:.2f} pt"

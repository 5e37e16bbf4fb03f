"""Evaluate a policy's gates against computed comparisons. Thresholds in points are x100 of fractions."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from workbench.regression.comparison import GateResult, GroupComparison
from workbench.regression.detect import Detectability, gate_detectability, smallest_mcnemar
from workbench.regression.policy import (
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
from workbench.regression.transitions import TransitionMatrix
from workbench.types import Verdict


def evaluate_gates(
    policy: Policy, overall: GroupComparison, by_tag: Mapping[str, GroupComparison],
    guard: GroupComparison | None = None, guard_note: str = "",
    field: GroupComparison | None = None, field_note: str = "", field_refused: int = 0,
    targets: GroupComparison | None = None, targets_note: str = "",
) -> tuple[GateResult, ...]:
    """Every gate of the policy, in order, each with what it could detect on this probe set. Gates of `scope:
    guard` count `guard` (the guard set's comparison) instead, gates of `scope: field` count `field` (the field
    suite's); without one they are reported as not checked, with `guard_note` / `field_note` saying why.
    `field_refused`: field probes the baseline hallucinated on that the candidate now refuses though the reviewer
    wrote the answer; a `max_still_wrong` gate of `scope: field` counts them as not fixed. Gates of `scope: targets`
    count `targets` (the probes the candidate's fix set targeted)."""
    sizes = {t: (g.n, sum(g.transitions.counts[0])) for t, g in by_tag.items()}
    other = {"guard": (guard, guard_note or "no guard set", "guard set"),
             "field": (field, field_note or "no field suite", "field suite"),
             "targets": (targets, targets_note or "no fix targets known", "fix targets")}
    out = []
    for g in policy.gates:
        scope = getattr(g, "scope", "probes")
        if scope in other:
            group, note, label = other[scope]
            if group is None:
                why = f"not checked: {note}"
                unchecked = Detectability(can_fail=False, adequate=True, text=why)  # said, not a blind pass
                out.append(dataclasses.replace(_result(g, True, None, _limit(g), "fraction", why),
                                               detectable=unchecked, checked=False))
                continue
            if scope == "field" and isinstance(g, MaxStillWrong):
                result = _field_not_fixed(g, group, field_refused)
            else:
                result = evaluate_gate(g, group, {})
            out.append(dataclasses.replace(result, message=f"{label}: {result.message}",
                                           detectable=gate_detectability(g, policy, group.transitions, {})))
            continue
        out.append(dataclasses.replace(
            evaluate_gate(g, overall, by_tag), detectable=gate_detectability(g, policy, overall.transitions, sizes)))
    return _guard_decides(out, policy, guard)


def _guard_decides(results: list[GateResult], policy: Policy, guard: GroupComparison | None
                   ) -> tuple[GateResult, ...]:
    """Probe-set gates of harm to what the model answered (`mcnemar`, `max_hallucination_increase`,
    `max_tag_correct_drop` over every tag; one naming its tags asks for those) that cannot fail for want of
    baseline-correct probes (a team's own questions, which the model mostly gets wrong) are decided on the guard set
    instead, when one was evaluated beside the probes with at least as many known facts as McNemar needs and the
    policy counts their breakage with a fail-severity `scope: guard` gate: that gate's exact count of broken known
    facts stands where the probes could not judge. Each such gate's detectability says so (`decided_by`), so it
    leaves the verdict conclusive, and the verdict line names the evidence and what to add. Without a guard
    comparison, or with too small a one, they stay inconclusive."""
    if guard is None:
        return tuple(results)
    known = sum(guard.transitions.counts[0])
    counted = [r.name for r, g in zip(results, policy.gates, strict=True)
               if getattr(g, "scope", "probes") == "guard" and g.severity == "fail"]
    out = []
    for result, g in zip(results, policy.gates, strict=True):
        d = result.detectable
        harm = isinstance(g, McNemar | MaxHallucinationIncrease) or (
            isinstance(g, MaxTagCorrectDrop) and g.tags is None)
        stands_in = (counted and harm and g.severity == "fail" and d is not None and not d.adequate
                     and known >= (d.needed or smallest_mcnemar(0.05)))
        if stands_in and d is not None:
            by = f"the guard set's {known} known facts ({', '.join(counted)})"
            result = dataclasses.replace(result, detectable=dataclasses.replace(
                d, adequate=True, decided_by=by, text=f"{d.text}; decided on {by} instead"))
        out.append(result)
    return tuple(out)


def _limit(gate: Gate) -> float:
    return float(getattr(gate, "max_fraction", getattr(gate, "max_count", 0)))


def evaluate_gate(gate: Gate, overall: GroupComparison, by_tag: Mapping[str, GroupComparison]) -> GateResult:
    """One gate's result."""
    hall, tm = overall.metrics["incorrect"], overall.transitions
    if isinstance(gate, MaxHallucinationIncrease):
        value = _points(hall.bound(gate.bound))
        ok = value <= gate.max_points
        msg = (
            f"Δ hallucination rate {gate.bound} {value:+.2f} pt {'<=' if ok else '>'} +{gate.max_points:g} pt"
        )
        return _result(gate, ok, value, gate.max_points, "points", msg)
    if isinstance(gate, HallucinationRateMustDrop):
        value, limit = _points(hall.bound(gate.bound)), -gate.min_drop_points
        ok = value < limit
        msg = f"Δ hallucination rate {gate.bound} {value:+.2f} pt {'<' if ok else '>='} {limit:+g} pt"
        return _result(gate, ok, value, limit, "points", msg)
    if isinstance(gate, MaxTagCorrectDrop):
        return _tag_drop(gate, by_tag)
    if isinstance(gate, MaxStillWrong):
        still, was_wrong = tm.count(Verdict.INCORRECT, Verdict.INCORRECT), sum(tm.counts[1])
        ok = still <= gate.max_count
        msg = f"{still} of {was_wrong} probes hallucinated by the baseline still hallucinated " \
              f"{'<=' if ok else '>'} {gate.max_count}"
        return _result(gate, ok, float(still), float(gate.max_count), "count", msg)
    if isinstance(gate, MaxAbstentionOnPreviouslyCorrect):
        return _share_of_known(gate, tm, tm.count(Verdict.CORRECT, Verdict.NOT_ATTEMPTED), "not attempted")
    if isinstance(gate, MaxAbstentionIncrease):
        value = _points(overall.metrics["not_attempted"].bound(gate.bound))
        ok = value <= gate.max_points
        msg = (
            f"Δ abstention rate (all probes) {gate.bound} {value:+.2f} pt "
            f"{'<=' if ok else '>'} +{gate.max_points:g} pt"
        )
        return _result(gate, ok, value, gate.max_points, "points", msg)
    if isinstance(gate, MaxBrokenFraction):
        split = (f": {tm.count(Verdict.CORRECT, Verdict.INCORRECT)} now wrong, "
                 f"{tm.count(Verdict.CORRECT, Verdict.NOT_ATTEMPTED)} now abstain")
        return _share_of_known(gate, tm, tm.broken, "broken", split)
    if isinstance(gate, MaxBroken):
        broken = tm.broken
        ok = broken <= gate.max_count
        msg = f"{broken} probes broken (correct -> not correct) {'<=' if ok else '>'} {gate.max_count}"
        return _result(gate, ok, broken, gate.max_count, "count", msg)
    if isinstance(gate, MinFixed):
        fixed = tm.count(Verdict.INCORRECT, Verdict.CORRECT) + tm.count(Verdict.INCORRECT, Verdict.NOT_ATTEMPTED) \
            + tm.count(Verdict.NOT_ATTEMPTED, Verdict.CORRECT)
        failing = sum(tm.counts[1]) + sum(tm.counts[2])
        ok = fixed >= min(gate.min_count, failing)  # nothing failing at the baseline: nothing to fix
        msg = f"{fixed} of {failing} probes failing at the baseline fixed {'>=' if ok else '<'} {gate.min_count}"
        return _result(gate, ok, float(fixed), float(gate.min_count), "count", msg)
    if isinstance(gate, McNemar):
        mc = overall.mcnemar
        ok = not (mc.worse and mc.p_value < gate.alpha)
        verdict = "not significantly worse" if ok else "significantly worse"
        msg = f"McNemar exact: {mc.broken} broken vs {mc.fixed} fixed, p = {mc.p_value:.4g}: {verdict}"
        return _result(gate, ok, mc.p_value, gate.alpha, "p", msg)
    raise TypeError(f"unhandled gate type {type(gate).__name__}")  # pragma: no cover


def _share_of_known(gate: MaxAbstentionOnPreviouslyCorrect | MaxBrokenFraction, tm: TransitionMatrix, lost: int,
                    what: str, split: str = "") -> GateResult:
    """A share of the baseline-correct probes against `max_fraction`: "3 of 40 baseline-correct probes broken
    (7.5%: 2 now wrong, 1 now abstain) > 2.5%"."""
    known = sum(tm.counts[0])
    frac = lost / known if known else 0.0
    ok = frac <= gate.max_fraction
    msg = (f"{lost} of {known} baseline-correct probes {what} ({frac:.1%}{split}) "
           f"{'<=' if ok else '>'} {gate.max_fraction:.1%}")
    return _result(gate, ok, frac, gate.max_fraction, "fraction", msg)


def _field_not_fixed(gate: MaxStillWrong, field: GroupComparison, refused: int) -> GateResult:
    """`max_still_wrong` on the field suite: a reported failure is not fixed while still hallucinated, nor when
    the candidate now refuses a question the reviewer wrote the answer to (`refused`, counted by compare.py)."""
    still = field.transitions.count(Verdict.INCORRECT, Verdict.INCORRECT)
    reported, not_fixed = sum(field.transitions.counts[1]), still + refused
    ok = not_fixed <= gate.max_count
    msg = (f"{not_fixed} of {reported} reported failures not fixed ({still} still hallucinated, {refused} now "
           f"refused though the reviewer gave the answer) {'<=' if ok else '>'} {gate.max_count}")
    return _result(gate, ok, float(not_fixed), float(gate.max_count), "count", msg)


def _tag_drop(gate: MaxTagCorrectDrop, by_tag: Mapping[str, GroupComparison]) -> GateResult:
    wanted = by_tag if gate.tags is None else {t: by_tag[t] for t in gate.tags if t in by_tag}
    checked = {t: g for t, g in wanted.items() if g.n >= gate.min_probes}
    limit = -gate.max_points
    values = {t: _points(g.metrics["correct"].bound(gate.bound)) for t, g in checked.items()}
    failing = sorted((t for t, v in values.items() if v < limit), key=lambda t: values[t])
    details = tuple(f"{t}: Δ correct {gate.bound} {values[t]:+.2f} pt < {limit:+g} pt" for t in failing)
    missing = sorted(set(gate.tags or ()) - set(by_tag))
    if missing:
        details += (f"tags not present in the comparison: {', '.join(missing)}",)
    if not values:
        msg = "no tag to check"
        return _result(gate, True, None, limit, "points", msg, details)
    worst = min(values, key=lambda t: values[t])
    ok = not failing
    msg = (
        f"{len(failing)} of {len(values)} tags drop below {limit:+g} pt; "
        f"worst `{worst}` Δ correct {gate.bound} {values[worst]:+.2f} pt"
    )
    return _result(gate, ok, values[worst], limit, "points", msg, details)


def _points(fraction: float) -> float:
    """A fraction in points, rounded to 1e-9 so float noise (-1.0000000000000002) cannot decide a gate."""
    return round(100 * fraction, 9)


def _result(
    gate: Gate,
    passed: bool,
    observed: float | None,
    threshold: float,
    unit: str,
    message: str,
    details: tuple[str, ...] = (),
) -> GateResult:
    return GateResult(
        name=gate.name,
        type=gate.type,
        severity=gate.severity,
        passed=passed,
        observed=observed,
        threshold=threshold,
        unit=unit,
        message=message,
        description=gate.description,
        details=details,
    )

"""The regression policy: bootstrap settings and a list of gates, read from YAML.

Thresholds in *points* are percentage points (1 point = 0.01 of a rate). Gates that read a delta pick
which number to read with `bound`: `ci_low` / `ci_high` (the paired bootstrap CI bounds) or `delta`
(the point estimate). Unknown keys are refused with a "Did you mean ...?" hint.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from workbench.errors import WorkbenchError, did_you_mean
from workbench.safeload import MAX_SPEC_BYTES, yaml_load
from workbench.safeopen import read_input_text

Severity = Literal["fail", "warn"]
Bound = Literal["ci_low", "delta", "ci_high"]
Scope = Literal["probes", "guard", "field", "targets"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class _ScopedGate(BaseModel):
    """For gates that count baseline-correct probes: which set of known facts they count."""

    scope: Scope = "probes"
    """`probes`: the compared runs' probes. `guard`: the base model's known-facts guard set (workbench/guard), which
    `workbench regress` evaluates beside the probes: facts of a general pool the baseline knows, so that a fix made
    from a team's own failures, which the model rarely answers right, is still checked on what the model knows.
    Without a guard comparison a `guard` gate is reported as not checked. `field`: the field suite (probes made from
    users' reports, `workbench reports export`), which `workbench regress` evaluates beside the probes once one exists;
    without one a `field` gate is reported as not checked. `targets`: the probes the candidate was made to fix (the
    targets of its adapter's fix set, trained and held out, read from the adapter's lineage); without that lineage a
    `targets` gate is reported as not checked."""


class _GateBase(_Strict):
    name: str = ""
    """Unique name, shown in reports and as the JUnit test case; defaults to the gate's `type`."""
    severity: Severity = "fail"
    """`fail`: a failed gate fails the comparison (exit 1). `warn`: reported only (exit 0)."""
    description: str = ""
    """Free text shown next to the gate in reports."""

    @model_validator(mode="before")
    @classmethod
    def _default_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("name"):
            return {**data, "name": data.get("type", "")}
        return data


class MaxHallucinationIncrease(_GateBase):
    """Fails if the chosen `bound` of Δ incorrect rate (hallucination rate) exceeds `max_points`.

    `ci_high` (default) is a non-inferiority check (show that hallucination rose by at most X);
    `ci_low` fails only when hallucination rose significantly by more than X.
    """

    type: Literal["max_hallucination_increase"]
    max_points: float = Field(default=0.0, ge=0)
    """Allowed increase of the hallucination rate, in points."""
    bound: Bound = "ci_high"
    """Which number of the delta is compared: `ci_low`, `delta` or `ci_high`."""


class HallucinationRateMustDrop(_GateBase):
    """Fails unless the chosen `bound` of Δ incorrect rate is below -`min_drop_points`.

    `ci_high` (default): the drop must be significant; `delta`: the point estimate must drop.
    """

    type: Literal["hallucination_rate_must_drop"]
    min_drop_points: float = Field(default=0.0, ge=0)
    """Required drop of the hallucination rate, in points."""
    bound: Bound = "ci_high"
    """Which number of the delta is compared: `ci_low`, `delta` or `ci_high`."""


class MaxTagCorrectDrop(_GateBase):
    """Fails if, for any tag, the chosen `bound` of Δ correct rate is below -`max_points`.

    With `ci_high` (default) a tag fails only when its whole CI lies below -X: the drop is
    significantly larger than X points. `ci_low` is the strict non-inferiority reading.
    """

    type: Literal["max_tag_correct_drop"]
    max_points: float = Field(default=1.0, ge=0)
    """Allowed drop of any tag's correct rate, in points."""
    bound: Bound = "ci_high"
    """Which number of the delta is compared: `ci_low`, `delta` or `ci_high`."""
    tags: list[str] | None = None
    """Tags to check; None (default) checks every tag present."""
    min_probes: int = Field(default=1, ge=1)
    """Tags with fewer probes than this are skipped."""


class MaxAbstentionOnPreviouslyCorrect(_GateBase, _ScopedGate):
    """Fails if more than `max_fraction` of baseline-correct probes are not attempted by the candidate."""

    type: Literal["max_abstention_on_previously_correct"]
    max_fraction: float = Field(default=0.05, ge=0, le=1)
    """Allowed fraction (0..1) of baseline-correct probes the candidate abstains on."""


class MaxAbstentionIncrease(_GateBase):
    """Fails if the chosen `bound` of Δ not-attempted rate over *all* probes exceeds `max_points`.

    Abstention on every probe, not only the baseline-correct ones: a candidate that answers "I don't know"
    to questions it used to hallucinate on shows here (and in the report's headline), where the broken
    gates do not see it. `delta` (default) reads the point estimate.
    """

    type: Literal["max_abstention_increase"]
    max_points: float = Field(default=20.0, ge=0)
    """Allowed increase of the not-attempted (abstention) rate over all probes, in points."""
    bound: Bound = "delta"
    """Which number of the delta is compared: `ci_low`, `delta` or `ci_high`."""


class MaxBrokenFraction(_GateBase, _ScopedGate):
    """Fails if more than `max_fraction` of the baseline-correct probes are not correct in the candidate.

    Broken = correct -> incorrect or correct -> not attempted (a known fact lost either way). Counted
    exactly, so it can fail at one broken probe (granularity 1 / the number of baseline-correct probes),
    unlike McNemar, which weighs broken against fixed and needs at least 6 broken probes at alpha 0.05.
    """

    type: Literal["max_broken_fraction"]
    max_fraction: float = Field(default=0.01, ge=0, le=1)
    """Allowed fraction (0..1) of baseline-correct probes broken."""


class MaxBroken(_GateBase, _ScopedGate):
    """Fails if more than `max_count` probes went from correct to not correct."""

    type: Literal["max_broken"]
    max_count: int = Field(default=0, ge=0)
    """Allowed number of broken probes (correct -> incorrect or not attempted)."""


class MaxStillWrong(_GateBase, _ScopedGate):
    """Fails if more than `max_count` probes the baseline hallucinated on are not fixed by the candidate.

    On `scope: probes` (and `guard`) not fixed means still hallucinated (incorrect -> incorrect); an abstention
    counts as a change, as the abstention gates see it. On `scope: field` a reviewer decided what the fix is: a
    probe with a reference answer is also not fixed when the candidate now refuses it (incorrect -> not attempted),
    while on a should-abstain probe (tag `field:should-abstain`) refusing is the fix. Meant for `scope: field` with
    `severity: warn`: a complaint users reported that the candidate has not fixed.
    """

    type: Literal["max_still_wrong"]
    max_count: int = Field(default=0, ge=0)
    """Allowed number of probes not fixed: hallucinated by both (incorrect -> incorrect); on `scope: field` also
    those now refused although the reviewer wrote the answer (incorrect -> not attempted, no should-abstain tag)."""


class MinFixed(_GateBase, _ScopedGate):
    """Fails if fewer than `min_count` probes are fixed: the baseline hallucinated (or abstained) and the candidate
    does better (incorrect -> correct or not attempted; not attempted -> correct). Meant for `scope: targets`, so
    that a candidate that broke nothing but fixed nothing it was made to fix does not pass."""

    type: Literal["min_fixed"]
    min_count: int = Field(default=1, ge=1)
    """Probes that must be fixed, at least."""


class McNemar(_GateBase):
    """Fails if the candidate is significantly worse: more broken than fixed and exact McNemar p < alpha."""

    type: Literal["mcnemar"]
    alpha: float = Field(default=0.05, gt=0, lt=1)
    """Significance level of the two-sided exact test."""


Gate = Annotated[
    MaxHallucinationIncrease
    | HallucinationRateMustDrop
    | MaxTagCorrectDrop
    | MaxAbstentionOnPreviouslyCorrect
    | MaxAbstentionIncrease
    | MaxBrokenFraction
    | MaxBroken
    | MaxStillWrong
    | MinFixed
    | McNemar,
    Field(discriminator="type"),
]
GATE_TYPES: dict[str, type[_GateBase]] = {
    typing.get_args(cls.model_fields["type"].annotation)[0]: cls
    for cls in typing.get_args(typing.get_args(Gate)[0])
}
"""Gate classes by their `type` value."""


class BootstrapSettings(_Strict):
    """Paired bootstrap settings."""

    resamples: int = Field(default=2000, ge=100, le=1_000_000)
    """Bootstrap resamples."""
    seed: int = 0
    """Seed of numpy's default_rng; the same seed gives the same CIs."""
    confidence: float = Field(default=0.95, gt=0, lt=1)
    """Confidence level of the percentile CIs."""


class Policy(_Strict):
    """A regression policy: how to compute CIs and which gates must pass."""

    bootstrap: BootstrapSettings = BootstrapSettings()
    """Paired bootstrap settings."""
    gates: list[Gate] = Field(min_length=1)
    """The gates, evaluated in order; names must be unique."""

    @model_validator(mode="after")
    def _unique_names(self) -> Policy:
        names = [g.name for g in self.gates]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"gate names must be unique; repeated: {', '.join(dupes)} (set `name`)")
        return self


# The built-in policy. Broken known facts first: the share of baseline-correct probes now wrong or
# abstained, counted exactly. Fix jobs that met their goals broke 0-1.7% (bench/gate_regression.py,
# 2026-11-23: SFT, DPO, combined SFT 0, 0, 0 of 234 on the default world and 3, 0, 1 of 244 on the seed-7
# world; 1 and 4 of 234 in earlier runs, docs/scheduled-checks.md; 0-0.9% on the unseen worlds). DPO on two
# unseen worlds broke 3.7% and 5.2% of 267, the injected tag-breaker 24.6-24.8%. Warn above 1%
# (the fix jobs' goal), fail above 2.5%: between the worst good job (1.7%) and the mildest bad one (3.7%).
# Abstention over all probes warns, above 20 points: abstention fixes *should* turn hallucinations into
# "I don't know" (SFT +13.3 / +11.2, combined SFT +15.4 / +11.5, DPO +0.2 / 0 points on the default /
# seed-7 world; GRPO about +9, estimated from the README's RL table), so a fail would block the fix that
# works and a lower bar would warn on each of them by design; a blanket refusal (+95 points)
# warns. Known facts lost to abstention already fail above (they are broken).
# The field gates count the field suite (workbench/reports): a question users reported, decided and exported is
# the one a team acted on, so one of them broken fails (max_count 0), and one not fixed warns (still hallucinated,
# or refused where the reviewer wrote the answer: "I don't know" is no fix for a question with a known answer).
# The guard gate counts the same on the base model's guard set (workbench/guard), evaluated beside the probes: an
# abstention fix made from a team's own 60 questions, 4 of them known, broke 50 of the 67 everyday facts the real
# chat model knew while every probe-set gate was inconclusive. 2% is the fix's goal on facts the model knows.
# The targets gate asks what a fix is for: on the real-model demo a candidate passed every other gate while its
# trained unknown facts went 12 -> 9 hallucinated; one that fixed none of them passed too. At least one of the
# probes its fix set targeted must be fixed (hallucinated -> right or refused).
DEFAULT_POLICY_YAML = """\
bootstrap: {resamples: 2000, seed: 0, confidence: 0.95}
gates:
  - type: min_fixed
    name: targets_fixed
    scope: targets
    description: At least one of the probes the candidate's fix set targeted is fixed (hallucinated, now right or
      refused); a candidate that broke nothing and fixed nothing does not pass.
    min_count: 1
  - type: max_broken_fraction
    name: guard_facts_kept
    scope: guard
    description: At most 2% of the facts the base model knows (its guard set, checked beside the probes) are now
      wrong or refused, whatever the probe set.
    max_fraction: 0.02
  - type: max_broken
    name: field_fixes_kept
    scope: field
    description: No probe of the field suite (users' reported questions) that the baseline got right is now wrong
      or refused.
    max_count: 0
  - type: max_still_wrong
    name: field_failures_fixed
    scope: field
    description: Every field probe the baseline hallucinated on is fixed, not still hallucinated nor now refused
      where the reviewer gave the answer.
    max_count: 0
    severity: warn
  - type: max_broken_fraction
    name: known_facts_kept
    description: At most 2.5% of the probes the baseline got right are now wrong or abstained.
    max_fraction: 0.025
  - type: max_broken_fraction
    name: known_facts_kept_within_1pct
    description: At most 1% of the probes the baseline got right are now wrong or abstained (the fix jobs' goal).
    max_fraction: 0.01
    severity: warn
  - type: max_hallucination_increase
    name: hallucination_not_significantly_up
    description: The hallucination rate did not rise significantly.
    max_points: 0.0
    bound: ci_low
  - type: mcnemar
    name: not_significantly_worse
    description: Not significantly more probes broken than fixed (exact McNemar).
    alpha: 0.05
  - type: max_tag_correct_drop
    name: no_tag_drops_over_1_point
    description: No tag's correct rate dropped significantly by more than 1 point.
    max_points: 1.0
  - type: max_hallucination_increase
    name: hallucination_within_2_points
    description: Confident that the hallucination rate rose by at most 2 points.
    max_points: 2.0
    bound: ci_high
    severity: warn
  - type: max_abstention_increase
    name: abstention_within_20_points
    description: The candidate abstains on at most 20 points more of all probes (hallucinations traded for
      abstentions count too).
    max_points: 20.0
    bound: delta
    severity: warn
"""


def default_policy() -> Policy:
    """The built-in policy (DEFAULT_POLICY_YAML)."""
    return parse_policy(DEFAULT_POLICY_YAML, "<default policy>")


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; WorkbenchError names the file and the offending key."""
    p = Path(path)
    try:  # a regular file only, its size checked before reading (workbench.safeopen)
        text = read_input_text(p, max_bytes=MAX_SPEC_BYTES, what="policy file")
    except OSError as e:
        raise WorkbenchError(f"cannot read policy file {p}: {e.strerror or e}") from None
    return parse_policy(text, str(p))


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    """Validate policy YAML text; `source` names it in error messages."""
    try:
        raw = yaml_load(text)
    except yaml.YAMLError as e:
        raise WorkbenchError(f"{source}: not valid YAML: {e}") from e
    except ValueError as e:
        raise WorkbenchError(f"{source}: {e}") from None
    _check_keys(raw, source)
    try:
        return Policy.model_validate(raw)
    except ValidationError as e:
        raise WorkbenchError(_format_errors(e, source)) from e


def _check_keys(raw: object, source: str) -> None:
    """Refuse unknown keys and gate types early, with a "Did you mean" hint."""
    if not isinstance(raw, dict):
        raise WorkbenchError(f"{source}: a policy is a mapping with a `gates` list")
    _known(raw, Policy, "", source)
    if isinstance(raw.get("bootstrap"), dict):
        _known(raw["bootstrap"], BootstrapSettings, "bootstrap.", source)
    gates = raw.get("gates")
    if not isinstance(gates, list):
        return  # pydantic reports the missing or mistyped list
    for i, gate in enumerate(gates):
        where = f"gates[{i}]"
        if not isinstance(gate, dict):
            raise WorkbenchError(f"{source}: `{where}` must be a mapping with a `type`")
        kind = gate.get("type")
        if kind not in GATE_TYPES:
            hint = did_you_mean(str(kind), GATE_TYPES) if kind is not None else ""
            what = "is missing `type`" if kind is None else f"has unknown type `{kind}`."
            raise WorkbenchError(f"{source}: `{where}` {what}{hint} Known: {', '.join(sorted(GATE_TYPES))}")
        _known(gate, GATE_TYPES[kind], f"{where}.", source)


def _known(raw: dict[Any, Any], model: type[BaseModel], where: str, source: str) -> None:
    fields = list(model.model_fields)
    for key in raw:
        if key not in fields:
            raise WorkbenchError(
                f"{source}: unknown key `{where}{key}`.{did_you_mean(str(key), fields)} "
                f"Known: {', '.join(fields)}"
            )


def _format_errors(error: ValidationError, source: str) -> str:
    lines = []
    for e in error.errors():
        parts: list[str] = []
        for item in e["loc"]:
            if isinstance(item, int):
                parts.append(f"[{item}]")
            elif item not in GATE_TYPES:  # skip the discriminator's branch name
                parts.append(("." if parts else "") + str(item))
        loc = "".join(parts) or "(top level)"
        lines.append(f"{source}: `{loc}`: {e['msg']}")
    return "\n".join(lines)

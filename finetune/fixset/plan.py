"""The fix plan: which probe gets which fix, and why, decided from the run and the options before any row is written.

`plan_fixset` is pure: it reads `FixInputs` (the run as reviewers left it, read once by `build_fixset`) and
`FixOptions`, and returns a `FixPlan` of one `ProbeFix` per probe it touches:

- targeted probes (attributed failures): inject | abstain | dpo | dpo-abstain | rl | skip, with the answer to teach
  and the one to reject where the fix has them, and the split (train or heldout); a field probe (tagged `field` by
  `workbench reports export`) gets what its reviewer decided, whatever its category: the reference answer
  (inject, or DPO toward it) or abstention (abstain, or DPO toward it);
- reviewed probes whose corrected grade gives a DPO pair: review;
- the run's known probes (correct, unattributed, not marked wrong by a reviewer): replay | validation | reserved;
- the guard set's facts the run does not ask: guard-replay | guard-validation.

The row writers (finetune/fixset/rows.py) turn the plan into rows, one writer per split.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from finetune.chatform import RowForm
from finetune.fixset.options import GUARD_VALIDATION_MAX, GUARD_VALIDATION_SHARE, VALIDATION_MAX, FixOptions
from workbench.attribution.types import ABSTAIN_CATEGORIES, CATEGORIES, Attribution
from workbench.grading.normalize import normalize
from workbench.guard import GuardFact
from workbench.probes import Suite
from workbench.reports.suite import ABSTAIN_TAG, FIELD_TAG, FieldOrigin
from workbench.results import ProbeResult, RunResults
from workbench.reviews import CorrectedGrade
from workbench.types import Verdict

Fix = Literal["inject", "abstain", "dpo", "dpo-abstain", "rl", "skip", "review", "replay", "validation", "reserved",
              "guard-replay", "guard-validation"]


@dataclass(frozen=True)
class FixInputs:
    """What a plan is computed from, read once from the store.

    Attributes:
        results: The run's results (probes in run order).
        suite: The suite settings the rows are rendered with (the run's, or the options' suite).
        attributions: Probe id -> attribution, reviewer overrides applied (in the store's order).
        grades: Greedy answers whose grade a reviewer corrected.
        facts: The `--facts` answers, by normalized question or by probe id.
        form: How rows are written (template, stop string, system prompt, tokenizer).
        field: Field probe id -> its reports and reviewer in this workspace (workbench/reports); a field probe
            without one (its suite exported elsewhere) is still a field probe, by its tags.
    """

    results: RunResults
    suite: Suite
    attributions: Mapping[str, Attribution]
    grades: Sequence[CorrectedGrade]
    facts: Mapping[str, str]
    form: RowForm
    field: Mapping[str, FieldOrigin] = dataclasses.field(default_factory=dict)

    @property
    def targeted(self) -> dict[str, Attribution]:
        """The attributed failures a fix can target (a known category), in attribution order."""
        return {pid: a for pid, a in self.attributions.items() if a.category in CATEGORIES}


@dataclass(frozen=True)
class ProbeFix:
    """One probe's part in the fix set, and why.

    Attributes:
        probe_id: The run's probe (or the guard set's fact).
        fix: What it gets (see the module docstring).
        why: The reason in words (a skipped probe's reason is what the manifest's `skipped` says).
        category: Its attribution category; "known" for the run's known probes, "guard" for guard facts ("domain"
            for those in the style of the run's questions),
            "review:corrected-grade" for a reviewer's pair.
        split: "train" or "heldout" (targeted probes only; the rest train or are never trained on).
        answer: What the rows teach (inject: the answer; dpo: the chosen answer), when the fix has one.
        source: Where `answer` comes from (facts, inject, own-sample, answer), the rows' `source`.
        rejected: What a DPO pair rejects (the hallucination or another value of the relation), when the fix has
            one; over-abstention and dpo-abstain pairs reject per phrasing (the rows say which). A "dpo" fix
            without one rejects the abstention phrase.
        origin: A field probe's provenance in words (its reports, decision and reviewer); "" for any other probe.
    """

    probe_id: str
    fix: Fix
    why: str
    category: str
    split: str = "train"
    answer: str | None = None
    source: str = ""
    rejected: str | None = None
    origin: str = ""


@dataclass(frozen=True)
class FixPlan:
    """Every probe's fix (`ProbeFix`) for one run under one set of options.

    Attributes:
        options: The options the plan was made with.
        targeted: The attributed failures, in run order.
        reviews: Reviewed probes whose corrected grade gives a DPO pair (not held out).
        known: The run's known probes, in run order: replay, validation or reserved.
        guard: The guard set's facts the run does not ask, in the guard's order: guard-replay or guard-validation.
    """

    options: FixOptions
    targeted: tuple[ProbeFix, ...]
    reviews: tuple[ProbeFix, ...]
    known: tuple[ProbeFix, ...]
    guard: tuple[ProbeFix, ...]

    def ids(self, *fixes: Fix) -> list[str]:
        """The probes that get one of `fixes`, in plan order."""
        return [f.probe_id for f in (*self.targeted, *self.reviews, *self.known, *self.guard) if f.fix in fixes]

    @property
    def field(self) -> list[ProbeFix]:
        """The field probes' fixes (targeted, then known), in plan order."""
        return [f for f in (*self.targeted, *self.known) if f.origin]

    @property
    def heldout(self) -> list[str]:
        return sorted(f.probe_id for f in self.targeted if f.split == "heldout")

    @property
    def skipped(self) -> dict[str, str]:
        return {f.probe_id: f.why for f in self.targeted if f.fix == "skip"}

    @property
    def needs_abstention(self) -> bool:
        """Some row says the abstention phrase (abstention SFT, abstention DPO, or over-abstention's rejected side)."""
        return any(f.fix in ("abstain", "dpo-abstain") or (f.fix == "dpo" and f.rejected is None)
                   for f in self.targeted)

    @property
    def unguarded(self) -> bool:
        """No known fact protects the set: none to replay and none to validate on."""
        return not any(f.fix != "reserved" for f in (*self.known, *self.guard))


def plan_fixset(inputs: FixInputs, options: FixOptions, guard_facts: Sequence[GuardFact] = ()) -> FixPlan:
    """The plan of `inputs` under `options`; `guard_facts`: the guard set's facts the run does not ask
    (`usable_guard_facts`)."""
    seed, by_id = options.seed, inputs.results.by_id()
    targeted = inputs.targeted
    # A field probe is a complaint a reviewer decided, and a --facts answer one the user gave to teach: every one is
    # trained on. Holding a share out would leave them unfixed (a held-out fact cannot be learnt from the others);
    # generalisation is measured on the rest.
    heldout = _heldout({pid: a for pid, a in targeted.items() if FIELD_TAG not in by_id[pid].probe.tags
                        and _given_fact(by_id[pid], inputs) is None}, options.heldout_fraction, seed)
    order = {pid: i for i, pid in enumerate(by_id)}
    fixes = tuple((_field_fix if FIELD_TAG in by_id[pid].probe.tags else _targeted_fix)(
        by_id[pid], targeted[pid], "heldout" if pid in heldout else "train", inputs, options)
        for pid in sorted(targeted, key=order.__getitem__))
    reviews = tuple(ProbeFix(g.probe_id, "review", "a reviewer marked its answer wrong: accepted answer over it",
                             "review:corrected-grade") for g in inputs.grades
                    if g.dpo_pair() is not None and g.probe_id not in heldout)
    corrected = {g.probe_id for g in inputs.grades if g.corrected == Verdict.INCORRECT}
    known = [r.probe.id for r in inputs.results.probes if r.probe.id not in inputs.attributions
             and r.probe.id not in corrected and r.verdict == Verdict.CORRECT]
    validation, reserved = _validation_slice(known, seed, options.validation_fraction, options.reserve_fraction)
    known_fixes = tuple(_known_field(by_id[pid], inputs, (
        ProbeFix(pid, "validation", "known: kept out of training, scored by the job for broken known facts", "known")
        if pid in validation else
        ProbeFix(pid, "reserved", "known: kept out of every row and of the validation slice", "known")
        if pid in reserved else
        ProbeFix(pid, "replay", "known: replayed (SFT) and anchored (DPO) against forgetting", "known")))
        for pid in known)
    held = _guard_held(guard_facts, seed) if options.validation_fraction > 0 else set()
    guard = tuple(
        ProbeFix(f.probe.id, "guard-validation", "guard fact: kept out of training, scored by the job",
                 "domain" if is_domain(f) else "guard")
        if f.probe.id in held else
        ProbeFix(f.probe.id, "guard-replay", "guard fact: replayed and anchored against forgetting",
                 "domain" if is_domain(f) else "guard")
        for f in guard_facts)
    return FixPlan(options, fixes, reviews, known_fixes, guard)


def usable_guard_facts(inputs: FixInputs, options: FixOptions) -> list[GuardFact]:
    """The guard set's facts the run does not ask (by id or by question): the rest would replay a probe; then the
    domain facts (`options.domain`) neither the run nor the guard asks."""
    asked = {normalize(r.probe.question) for r in inputs.results.probes} | {r.probe.id for r in inputs.results.probes}
    out: list[GuardFact] = []
    for f in (*(options.guard.facts if options.guard else ()), *(options.domain.facts if options.domain else ())):
        if f.probe.id not in asked and normalize(f.probe.question) not in asked:
            out.append(f)
            asked |= {f.probe.id, normalize(f.probe.question)}
    return out


def is_domain(fact: GuardFact) -> bool:
    """Whether a guard fact came from a style pool (workbench/guard/domain.py: tagged `domain:NAME`)."""
    return any(t.startswith("domain:") for t in fact.probe.tags)


def _given_fact(result: ProbeResult, inputs: FixInputs) -> str | None:
    """The probe's `--facts` answer (matched by question, then by probe id), if one was given."""
    return inputs.facts.get(normalize(result.probe.question)) or inputs.facts.get(result.probe.id)


def _targeted_fix(result: ProbeResult, att: Attribution, split: str, inputs: FixInputs,
                  options: FixOptions) -> ProbeFix:
    """One attributed failure's fix: the kind `fix_kind` picks, with what it teaches and rejects."""
    pid, cat, strategy = result.probe.id, att.category, options.strategy
    fact = _given_fact(result, inputs)
    kind = fix_kind(cat, strategy, fact is not None)
    given = "its --facts answer" if fact is not None else "no --facts answer"
    if kind == "rl":
        return ProbeFix(pid, kind, f"{cat}: GRPO prompts, the reward decides between answer and abstention", cat,
                        split)
    if kind == "skip":
        hint = "(give its answer with --facts to inject it)" if cat in ABSTAIN_CATEGORIES else ""
        return ProbeFix(pid, kind, f"{cat} under strategy `{strategy}`: no rows {hint}".rstrip(), cat, split)
    if kind == "abstain":
        return ProbeFix(pid, kind, f"{cat}, {given}: SFT abstention over every phrasing", cat, split)
    if kind == "inject":
        answer, source = (fact, "facts") if fact is not None else (result.probe.answers[0], "inject")
        return ProbeFix(pid, kind, f"{cat}: SFT knowledge injection of {source} answer", cat, split, answer, source)
    if kind == "dpo-abstain":  # an unknown fact under "dpo": prefer abstaining to the hallucination
        wrong = hallucination(result) or result.probe.answers[0]
        return ProbeFix(pid, kind, f"{cat}, {given}: DPO toward abstention, away from the hallucination", cat,
                        split, rejected=wrong)
    answer, source = (fact, "facts") if fact is not None else chosen_answer(result)
    if cat == "behavior:over-abstain":
        return ProbeFix(pid, kind, f"{cat}: DPO toward the answer, away from abstaining", cat, split, answer, source)
    rejected = hallucination(result) or other_answer(result, inputs.results.probes, options.seed)
    if rejected is None:
        return ProbeFix(pid, "skip", f"{cat}: no wrong answer to reject (no hallucination, no other value)", cat,
                        split)
    return ProbeFix(pid, kind, f"{cat}: DPO toward the {source} answer, away from the wrong one", cat, split, answer,
                    source, rejected)


def _origin(result: ProbeResult, inputs: FixInputs) -> str:
    """A field probe's provenance in words. The run's probe (its tags and answers) is what the fix teaches; a report
    decided again after the export the run evaluated is said, so that no one reads the newer decision as taught."""
    origin = inputs.field.get(result.probe.id)
    if origin is None:
        return "field: a reviewed report"
    stale = "" if f"field:{origin.decision}" in result.probe.tags else " since the run's export (export and eval again)"
    return f"field: {origin.describe()}{stale}"


def _known_field(result: ProbeResult, inputs: FixInputs, fix: ProbeFix) -> ProbeFix:
    """A known probe; a field probe the run answered right says where it came from (it stays a known fact)."""
    if FIELD_TAG not in result.probe.tags:
        return fix
    origin = _origin(result, inputs)
    return dataclasses.replace(fix, why=f"{fix.why} ({origin}, answered right)", origin=origin)


def _field_fix(result: ProbeResult, att: Attribution, split: str, inputs: FixInputs,
               options: FixOptions) -> ProbeFix:
    """A failed field probe's fix: what its reviewer decided, whatever the attribution says. On a real model nearly
    every field failure attributes as knowledge:unknown, whose own fix (abstention) would teach "I don't know" over
    the reference answer the reviewer wrote; the reference answer is the fact to teach, as a --facts answer is.
    The probe's accepted answers are the reviewer's (the export writes them); a should-abstain probe accepts only
    the abstention phrase and carries ABSTAIN_TAG."""
    pid, cat, strategy = result.probe.id, att.category, options.strategy
    origin = _origin(result, inputs)
    if ABSTAIN_TAG in result.probe.tags:
        if result.verdict == Verdict.NOT_ATTEMPTED:  # abstaining is what the reviewer asked for
            return ProbeFix(pid, "skip", f"{cat} ({origin}): should abstain, and the run abstained", cat, split,
                            origin=origin)
        if strategy == "rl":
            return ProbeFix(pid, "rl", f"{cat} ({origin}): GRPO prompts, the reward pays for abstaining", cat, split,
                            origin=origin)
        said = hallucination(result) or result.answer.strip()
        if strategy == "dpo" and said:
            return ProbeFix(pid, "dpo-abstain", f"{cat} ({origin}): should abstain: DPO toward abstention, away "
                            "from the model's answer", cat, split, rejected=said, origin=origin)
        return ProbeFix(pid, "abstain", f"{cat} ({origin}): should abstain: SFT abstention", cat, split, origin=origin)
    answer = result.probe.answers[0]
    if strategy == "rl":
        return ProbeFix(pid, "rl", f"{cat} ({origin}): GRPO prompts graded against the reference answer", cat, split,
                        origin=origin)
    if strategy == "dpo":
        wrong = hallucination(result)
        if wrong is None and result.verdict != Verdict.NOT_ATTEMPTED:
            return ProbeFix(pid, "skip", f"{cat} ({origin}): no wrong answer to reject", cat, split, origin=origin)
        away = "away from the model's wrong answer" if wrong else "away from abstaining"
        return ProbeFix(pid, "dpo", f"{cat} ({origin}): DPO toward the reviewer's reference answer, {away}", cat,
                        split, answer, "field", wrong, origin=origin)
    return ProbeFix(pid, "inject", f"{cat} ({origin}): SFT knowledge injection of the reviewer's reference answer",
                    cat, split, answer, "field", origin=origin)


def fix_kind(category: str, strategy: str, has_fact: bool) -> Fix:
    """What rows one targeted probe gets: abstain | inject | dpo | dpo-abstain | rl | skip."""
    if strategy == "rl":
        return "rl"  # the grader's reward decides between the answer and abstaining
    unknown = category in ABSTAIN_CATEGORIES  # not known to the model, and no corpus says it was learnable
    if strategy == "auto":
        if unknown:
            return "inject" if has_fact else "abstain"
        if category == "data:underrepresented":
            return "inject"
        return "dpo"
    if strategy == "inject":
        if category == "behavior:over-abstain":
            return "dpo"  # teaching the answer as text would not stop abstaining on other phrasings
        return "skip" if unknown and not has_fact else "inject"
    if strategy == "abstain":
        abstains = unknown or category.startswith("data:")
        return "abstain" if abstains and not has_fact else "inject" if has_fact else "skip"
    # dpo
    if unknown and not has_fact:
        return "dpo-abstain"
    return "dpo"


def _heldout(targeted: Mapping[str, Attribution], fraction: float, seed: int) -> set[str]:
    """A seeded `fraction` of each category's targeted probes (at least one of three or more)."""
    out: set[str] = set()
    by_cat: dict[str, list[str]] = {}
    for pid, a in sorted(targeted.items()):
        by_cat.setdefault(a.category, []).append(pid)
    for cat, pids in sorted(by_cat.items()):
        rng = random.Random(f"heldout-{seed}-{cat}")
        rng.shuffle(pids)
        n = round(fraction * len(pids))
        if fraction > 0 and n == 0 and len(pids) >= 3:
            n = 1
        out.update(pids[:n])
    return out


def _validation_slice(known: Sequence[str], seed: int, fraction: float, reserve: float) -> tuple[set[str], set[str]]:
    """(the validation slice, the reserved ids) of the known probes: a seeded `fraction` (at most VALIDATION_MAX)
    that no training row holds, and a further `reserve` share that no row and no job sees. The slice is drawn as
    before reserving, so reserving leaves it unchanged."""
    ids = sorted(known)
    random.Random(f"validation-{seed}").shuffle(ids)
    n_held = min(VALIDATION_MAX, round(fraction * len(ids)))
    if fraction > 0 and n_held == 0 and len(ids) >= 2:
        n_held = 1  # a tenth of a handful rounds to none, and a job with no slice cannot see what it breaks
    return set(ids[:n_held]), set(ids[n_held:][: round(reserve * len(ids))])


def _guard_held(facts: Sequence[GuardFact], seed: int) -> set[str]:
    """Guard facts held out as validation: a seeded GUARD_VALIDATION_SHARE, at least one, at most
    GUARD_VALIDATION_MAX; a single fact goes to validation (what a job must see, it cannot replay)."""
    ids = sorted(f.probe.id for f in facts)
    random.Random(f"guard-validation-{seed}").shuffle(ids)
    n = min(GUARD_VALIDATION_MAX, max(1, round(GUARD_VALIDATION_SHARE * len(ids)))) if ids else 0
    return set(ids[:n])


def hallucination(r: ProbeResult) -> str | None:
    """The model's wrong answer: its greedy answer when INCORRECT, else its most frequent wrong sample."""
    if r.verdict == Verdict.INCORRECT and r.answer.strip():
        return r.answer
    wrong = Counter(a.text for a in r.samples if a.verdict == Verdict.INCORRECT and a.text.strip())
    return wrong.most_common(1)[0][0] if wrong else None


def chosen_answer(r: ProbeResult) -> tuple[str, str]:
    """The model's own correct sample (most frequent) when it has one, else the accepted answer.

    Only samples that are exactly an accepted answer (normalized) count: a sample graded correct
    because it contains the answer inside other words ("flag is founder is X") would teach those words."""
    accepted = {normalize(a) for a in r.probe.answers}
    right = Counter(a.text.strip() for a in (*r.greedy, *r.samples)
                    if a.verdict == Verdict.CORRECT and normalize(a.text) in accepted)
    if right:
        return right.most_common(1)[0][0], "own-sample"
    return r.probe.answers[0], "answer"


def other_answer(r: ProbeResult, pool: Sequence[ProbeResult], seed: int) -> str | None:
    """A plausible wrong answer: another probe's accepted answer of the same relation (seeded)."""
    own = {normalize(a) for a in r.probe.answers}
    cands = sorted({p.probe.answers[0] for p in pool if p.probe.relation == r.probe.relation
                    and p.probe.id != r.probe.id and normalize(p.probe.answers[0]) not in own})
    if not cands:
        return None
    return random.Random(f"anchor-{seed}-{r.probe.id}").choice(cands)

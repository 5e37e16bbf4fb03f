"""The knowledge axis: SliCK categories (Gekhman et al. 2024) from the model's own answers, with
right answers counted as knowledge only when they beat chance.

    HighlyKnown  greedy right under every prompt variant (the question and its paraphrases)
    MaybeKnown   greedy right under some variant
    WeaklyKnown  greedy never right, but samples right more often than chance
    Unknown      nothing right beyond chance

Chance depends on the answer space: a relation with 12 possible colours gets one right sample in ten
by luck most of the time. It is estimated per relation from the run itself: how often the model
*says* this probe's right answer when that answer is wrong, i.e. the share of the other probes'
wrong answers (same relation) that match it. That is the guessing distribution of the model, which
is what a lucky hit is drawn from. Add-one smoothing over the distinct wrong values keeps an answer
never guessed above zero. k right samples of n then count only if P(X >= k | n, chance) < alpha.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.grading.normalize import contains_phrase, normalize
from workbench.results import Answer, ProbeResult
from workbench.types import Verdict

ALPHA = 0.01  # binomial test level: few lucky-guess "knowns" across hundreds of failed probes
GREEDY_CHANCE_MAX = 0.2  # a greedy hit on an answer guessed this often needs its samples to back it


@dataclass(frozen=True)
class Knowledge:
    """One probe's knowledge level and the counts behind it.

    Attributes:
        level: One of KNOWLEDGE.
        greedy: Per variant (0 = the question): the greedy verdict.
        credible_variants: Variants whose greedy hit counts as knowledge (beats chance).
        k, n: Right samples / samples, all variants.
        k0, n0: Right samples / samples of the question itself (variant 0).
        chance: Per-answer probability of hitting an accepted answer by guessing; None if unknown.
        p_value: P(X >= k | n, chance), the samples' evidence of knowledge; None without samples.
        correct_sample: A right sample's text (the `chosen` of a DPO pair), if any.
    """

    level: str
    greedy: tuple[str, ...]
    credible_variants: tuple[int, ...]
    k: int
    n: int
    k0: int
    n0: int
    chance: float
    p_value: float | None
    correct_sample: str | None

    @property
    def knows(self) -> bool:
        return self.level != "Unknown"


def _matches(answer: str, accepted: Sequence[str]) -> bool:
    """The match grader's rule (accepted answer inside the answer, whole tokens), on normalized text."""
    return any(g and contains_phrase(answer, g) for g in accepted)


class ChanceModel:
    """Per-relation guessing distributions of one run (probes without a relation share one pool).

    Built from samples when the run has them (draws from the model), else from greedy answers."""

    def __init__(self, results: Sequence[ProbeResult]) -> None:
        self._pool: dict[str, Counter[str]] = {}  # relation -> normalized wrong answer -> count
        self._own: dict[str, Counter[str]] = {}  # probe id -> its own wrong answers (left out for it)
        use_samples = any(r.samples for r in results)
        for r in results:
            own = Counter(normalize(a.text) for a in _guesses(r, use_samples))
            self._own[r.probe.id] = own
            self._pool.setdefault(_relation(r), Counter()).update(own)

    def chance(self, r: ProbeResult) -> float:
        """P(a guess for this probe hits an accepted answer), leaving the probe's own answers out."""
        pool = self._pool.get(_relation(r), Counter()) - self._own.get(r.probe.id, Counter())
        accepted = [normalize(a) for a in r.probe.answers]
        hits = sum(c for text, c in pool.items() if _matches(text, accepted))
        total = sum(pool.values())
        return (hits + 1) / (total + len(pool) + 1)  # add-one over the values seen plus this one


def _relation(r: ProbeResult) -> str:
    return r.probe.relation or ""


def _guesses(r: ProbeResult, use_samples: bool) -> list[Answer]:
    answers = r.samples if use_samples else r.greedy
    return [a for a in answers if a.verdict == Verdict.INCORRECT]


def significant(k: int, n: int, chance: float, alpha: float = ALPHA) -> tuple[bool, float | None]:
    """(k of n beats chance at level alpha, the one-sided binomial p-value)."""
    if n == 0:
        return False, None
    from scipy.stats import binom  # here: scipy.stats takes 1-2 s to import, and most commands never test

    p = float(binom.sf(k - 1, n, chance)) if k > 0 else 1.0
    return p < alpha, p


def assess(r: ProbeResult, chance: float, *, alpha: float = ALPHA) -> Knowledge:
    """SliCK level of one probe given the relation's chance level."""
    right = [a.verdict == Verdict.CORRECT for a in r.greedy]
    credible = []
    for g in r.greedy:
        if g.verdict != Verdict.CORRECT:
            continue
        own = [s for s in r.samples if s.variant == g.variant]
        backed, _ = significant(sum(s.verdict == Verdict.CORRECT for s in own), len(own), chance, alpha)
        # A greedy hit is one draw of the mode: a lucky guess when the answer is a common one.
        if chance <= GREEDY_CHANCE_MAX or backed:
            credible.append(g.variant)
    k = sum(s.verdict == Verdict.CORRECT for s in r.samples)
    q = [s for s in r.samples if s.variant == 0]
    weak, p = significant(k, len(r.samples), chance, alpha)
    if credible and len(credible) == len(right):
        level = "HighlyKnown"
    elif credible:
        level = "MaybeKnown"
    elif weak:
        level = "WeaklyKnown"
    else:
        level = "Unknown"
    correct = next((s.text for s in r.samples if s.verdict == Verdict.CORRECT),
                   next((g.text for g in r.greedy if g.verdict == Verdict.CORRECT), None))
    return Knowledge(level=level, greedy=tuple(g.verdict.value for g in r.greedy), credible_variants=tuple(credible),
                     k=k, n=len(r.samples), k0=sum(s.verdict == Verdict.CORRECT for s in q), n0=len(q),
                     chance=chance, p_value=p, correct_sample=correct)

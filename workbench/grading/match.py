"""The default grader: normalized match against accepted answers, abstention by phrases."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from workbench.grading.language import (
    ABSTENTIONS,
    HANGUL,
    NEGATIONS,
    phrases_for,
    probe_languages,
    script_languages,
)
from workbench.grading.normalize import contains_phrase, normalize
from workbench.types import Probe, Verdict

DEFAULT_ABSTENTION_PHRASES: tuple[str, ...] = (
    "i don't know", "i do not know", "i'm not sure", "not sure", "unknown", "cannot answer",
    "no answer", "i have no idea",
)


_NORM_DEFAULTS = tuple(normalize(p) for p in DEFAULT_ABSTENTION_PHRASES)


@lru_cache(maxsize=256)
def _normalized(phrases: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in map(normalize, phrases) if n)


# A number with its unit ("1949年", "1949 г.", "1949년") is right without the unit too: the unit only
# repeats what the question asked. Normalized forms, so the unit is its own token.
_NUMBER_UNIT = re.compile(r"^(\d+) (?:年|年 代|岁|歲|歳|年 生|년|г|год|году|года|anos|ano|años|année|jahr)$")


def _forms(accepted: str) -> tuple[str, ...]:
    g = normalize(accepted)
    m = _NUMBER_UNIT.match(g)
    return (g, m.group(1)) if m else (g,)


def _mentions(a: str, phrase: str) -> bool:
    # Korean stems (모르겠, 알 수 없) take any ending: plain substring; elsewhere whole tokens.
    return phrase in a if HANGUL.search(phrase[-1]) else contains_phrase(a, phrase)


@dataclass(frozen=True)
class MatchGrader:
    """CORRECT when an accepted answer appears (whole tokens; characters in scripts without spaces) in the
    answer and no known-wrong answer appears that the accepted one does not explain; NOT_ATTEMPTED for
    empty answers and abstentions; INCORRECT otherwise.

    Abstentions, in this order: an answer that is (or starts with) one of `abstention_phrases`; or one
    that holds no accepted answer and says a phrase of the probe's language (its `language`, else its
    question's script) or of the answer's own script anywhere ("这个我不清楚。", "すみません、分かりません。").
    Probes known not to be English also take the English default phrases. Negations of those languages
    keep "罗马，不是米兰" correct as "Paris, not Lyon" is.

    Attributes:
        abstention_phrases: An answer that is (or starts with) one of these, normalized, is NOT_ATTEMPTED.
    """

    abstention_phrases: tuple[str, ...] = DEFAULT_ABSTENTION_PHRASES
    _norm_abstain: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_norm_abstain", tuple(normalize(p) for p in self.abstention_phrases))

    def _starts_abstaining(self, a: str, extra: tuple[str, ...] = ()) -> bool:
        return not a or any(a == p or a.startswith(p + " ") for p in (*self._norm_abstain, *extra) if p)

    def is_abstention(self, answer: str) -> bool:
        """Without the probe: the suite's phrases as a prefix, or a phrase of the answer's script anywhere."""
        a = normalize(answer)
        langs = script_languages(answer)
        return self._starts_abstaining(a) or any(_mentions(a, p) for p in _normalized(phrases_for(langs, ABSTENTIONS)))

    def grade(self, probe: Probe, answer: str) -> Verdict:
        a = normalize(answer)
        own, foreign = probe_languages(probe.language, probe.question)
        if self._starts_abstaining(a, _NORM_DEFAULTS if foreign else ()):
            return Verdict.NOT_ATTEMPTED
        hits = [g for acc in probe.answers for g in _forms(acc) if contains_phrase(a, g)]
        if hits:
            # "Paris, not Lyon" with Lyon a known-wrong answer is still correct; "Lyon or Paris" hedges.
            wrong = [w for w in map(normalize, probe.incorrect_answers) if contains_phrase(a, w)]
            hedged = any(not any(contains_phrase(h, w) or contains_phrase(w, h) for h in hits) for w in wrong)
            negated = " not " in f" {a} " or ((foreign or probe.language is not None) and any(
                _mentions(a, n) for n in _normalized(phrases_for(own, NEGATIONS))))
            return Verdict.INCORRECT if hedged and not negated else Verdict.CORRECT
        langs = tuple(dict.fromkeys((*own, *script_languages(answer))))
        if any(_mentions(a, p) for p in _normalized(phrases_for(langs, ABSTENTIONS))):
            return Verdict.NOT_ATTEMPTED
        return Verdict.INCORRECT

    def grade_many(self, items: Sequence[tuple[Probe, str]]) -> list[Verdict]:
        return [self.grade(p, a) for p, a in items]

    def report(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """Nothing to release."""

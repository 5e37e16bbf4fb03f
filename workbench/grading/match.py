"""The default grader: normalized match against accepted answers, refusals read by meaning."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from workbench.grading.language import HANGUL, NEGATIONS, phrases_for, probe_languages, script_languages
from workbench.grading.normalize import contains_phrase, normalize
from workbench.grading.refusal import Reading, read
from workbench.types import Probe, Verdict

DEFAULT_ABSTENTION_PHRASES: tuple[str, ...] = (
    "i don't know", "i do not know", "i'm not sure", "not sure", "unknown", "cannot answer",
    "no answer", "i have no idea",
)


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


#: Words before an accepted answer that only question it: "I can't confirm whether it's Paris".
_QUESTIONING = frozenset({"whether", "if", "confirm", "verify", "claim", "state"})


def _only_questioned(a: str, hits: list[str]) -> bool:
    """Every occurrence of every hit follows, within six words, a word that questions it, or is followed by
    "or not"."""
    words = a.split()
    for hit in hits:
        n = len(hit.split())
        for i in range(len(words) - n + 1):
            if " ".join(words[i:i + n]) == hit and not _QUESTIONING & set(words[max(0, i - 6):i]) \
                    and words[i + n:i + n + 2] != ["or", "not"]:
                return False
    return True


def _mentions(a: str, phrase: str) -> bool:
    # Korean stems (모르겠, 알 수 없) take any ending: plain substring; elsewhere whole tokens.
    return phrase in a if HANGUL.search(phrase[-1]) else contains_phrase(a, phrase)


@dataclass(frozen=True)
class MatchGrader:
    """CORRECT when an accepted answer appears (whole tokens; characters in scripts without spaces) in the
    answer and no known-wrong answer appears that the accepted one does not explain; NOT_ATTEMPTED for
    empty answers and for answers that decline; INCORRECT otherwise.

    An answer declines (refusal.py) when it refuses by meaning ("Sorry, I don't have information about X.",
    "There is no record of ...", "I cannot answer that.", "I'm not aware of ..."), anywhere in it, in English and in
    the probe's language (its `language`, else its question's script) and the answer's own script; or when it
    voices doubt or says one of `abstention_phrases` and names no value ("I'm not sure."). A hedge that still puts a
    value forward ("I'm not sure, but I think it's Sydney.", "I don't know for sure; maybe 1791?") is an attempt,
    graded on that value. An accepted answer the answer only questions ("I can't confirm whether it's Paris") is not
    an attempt either. Negations of the probe's language keep "罗马，不是米兰" correct as "Paris, not Lyon" is.

    Attributes:
        abstention_phrases: A suite's own phrases: an answer that says one (whole words) and names no value is
            NOT_ATTEMPTED. Added to the built-in refusal forms, which always apply.
    """

    abstention_phrases: tuple[str, ...] = DEFAULT_ABSTENTION_PHRASES

    def _reading(self, answer: str, question: str, languages: tuple[str, ...], foreign: bool) -> Reading:
        phrases = (*self.abstention_phrases, *(DEFAULT_ABSTENTION_PHRASES if foreign else ()))
        return read(answer, question, languages, phrases)

    def is_abstention(self, answer: str) -> bool:
        """Without the probe: whether the answer declines (English and the answer's own script)."""
        if not normalize(answer):
            return True
        return self._reading(answer, "", script_languages(answer), False).declines

    def grade(self, probe: Probe, answer: str) -> Verdict:
        a = normalize(answer)
        if not a:
            return Verdict.NOT_ATTEMPTED
        own, foreign = probe_languages(probe.language, probe.question)
        langs = tuple(dict.fromkeys((*own, *script_languages(answer))))
        reading = self._reading(answer, probe.question, langs, foreign)
        hits = [g for acc in probe.answers for g in _forms(acc) if contains_phrase(a, g)]
        if hits:
            asked = normalize(probe.question)
            if (reading.refuses or reading.doubts) and not reading.guesses and (
                    _only_questioned(a, hits) or all(contains_phrase(asked, h) for h in hits)):
                return Verdict.NOT_ATTEMPTED
            # "Paris, not Lyon" with Lyon a known-wrong answer is still correct; "Lyon or Paris" hedges.
            wrong = [w for w in map(normalize, probe.incorrect_answers) if contains_phrase(a, w)]
            hedged = any(not any(contains_phrase(h, w) or contains_phrase(w, h) for h in hits) for w in wrong)
            negated = " not " in f" {a} " or ((foreign or probe.language is not None) and any(
                _mentions(a, n) for n in _normalized(phrases_for(own, NEGATIONS))))
            return Verdict.INCORRECT if hedged and not negated else Verdict.CORRECT
        return Verdict.NOT_ATTEMPTED if reading.declines else Verdict.INCORRECT

    def grade_many(self, items: Sequence[tuple[Probe, str]]) -> list[Verdict]:
        return [self.grade(p, a) for p, a in items]

    def report(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """Nothing to release."""

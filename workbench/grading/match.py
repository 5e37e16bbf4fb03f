"""The default grader: normalized match against accepted answers, abstention by phrases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.grading.normalize import contains_phrase, normalize
from workbench.types import Probe, Verdict

DEFAULT_ABSTENTION_PHRASES: tuple[str, ...] = (
    "i don't know", "i do not know", "i'm not sure", "not sure", "unknown", "cannot answer",
    "no answer", "i have no idea",
)


@dataclass(frozen=True)
class MatchGrader:
    """CORRECT when an accepted answer appears (whole tokens) in the answer and no known-wrong answer
    appears that the accepted one does not explain; NOT_ATTEMPTED for empty answers and abstentions;
    INCORRECT otherwise.

    Attributes:
        abstention_phrases: An answer that is (or starts with) one of these, normalized, is NOT_ATTEMPTED.
    """

    abstention_phrases: tuple[str, ...] = DEFAULT_ABSTENTION_PHRASES
    _norm_abstain: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_norm_abstain", tuple(normalize(p) for p in self.abstention_phrases))

    def is_abstention(self, answer: str) -> bool:
        a = normalize(answer)
        return not a or any(a == p or a.startswith(p + " ") for p in self._norm_abstain if p)

    def grade(self, probe: Probe, answer: str) -> Verdict:
        if self.is_abstention(answer):
            return Verdict.NOT_ATTEMPTED
        a = normalize(answer)
        hits = [g for g in map(normalize, probe.answers) if contains_phrase(a, g)]
        if hits:
            # "Paris, not Lyon" with Lyon a known-wrong answer is still correct; "Lyon or Paris" hedges.
            wrong = [w for w in map(normalize, probe.incorrect_answers) if contains_phrase(a, w)]
            hedged = any(not any(contains_phrase(h, w) or contains_phrase(w, h) for h in hits) for w in wrong)
            return Verdict.INCORRECT if hedged and " not " not in f" {a} " else Verdict.CORRECT
        return Verdict.INCORRECT

    def grade_many(self, items: Sequence[tuple[Probe, str]]) -> list[Verdict]:
        return [self.grade(p, a) for p, a in items]

    def report(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """Nothing to release."""

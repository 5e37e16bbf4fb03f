"""The `match-judge` grader, for answers longer than a phrase (field reports' sentences and paragraphs).

An answer that names an accepted answer (the match grader says CORRECT: a word-bounded mention, any script) is
CORRECT without a judge call; every other answer, including one the match grader would call an abstention or a
miss, goes to the LLM judge, which reads a sentence's hedges and contradictions a string match cannot. Which
grader decided each answer is kept (`last_sources`, stored per answer as `graded_by`) and counted in the run's
grading report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from workbench.grading.judge import JudgeGrader
from workbench.grading.match import DEFAULT_ABSTENTION_PHRASES, MatchGrader
from workbench.types import Probe, Verdict


class MatchThenJudge:
    """Match first (a named reference is CORRECT), the judge for the rest. Options: the judge grader's."""

    def __init__(self, judge: JudgeGrader, abstention_phrases: tuple[str, ...] = DEFAULT_ABSTENTION_PHRASES) -> None:
        self.match, self.judge = MatchGrader(abstention_phrases=abstention_phrases), judge
        #: Which grader decided each answer of the latest `grade_many` call, in its order ("match" | "judge").
        self.last_sources: list[str] = []
        self.decided: Counter[str] = Counter()

    @classmethod
    def from_options(cls, abstention_phrases: tuple[str, ...] = DEFAULT_ABSTENTION_PHRASES, **options: Any,
                     ) -> MatchThenJudge:
        return cls(JudgeGrader.from_options(abstention_phrases=abstention_phrases, **options), abstention_phrases)

    def grade(self, probe: Probe, answer: str) -> Verdict:
        return self.grade_many([(probe, answer)])[0]

    def grade_many(self, items: Sequence[tuple[Probe, str]]) -> list[Verdict]:
        matched = [self.match.grade(p, a) for p, a in items]
        rest = [i for i, v in enumerate(matched) if v != Verdict.CORRECT]
        judged = iter(self.judge.grade_many([items[i] for i in rest]) if rest else [])
        verdicts = [next(judged) if v != Verdict.CORRECT else v for v in matched]
        self.last_sources = ["match" if v == Verdict.CORRECT else "judge" for v in matched]
        self.decided.update(self.last_sources)
        return verdicts

    def is_abstention(self, answer: str) -> bool:
        return self.match.is_abstention(answer)

    def report(self) -> dict[str, Any]:
        return {"decided_by": {"match": self.decided["match"], "judge": self.decided["judge"]}, **self.judge.report()}

    def close(self) -> None:
        self.judge.close()

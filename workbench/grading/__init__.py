"""Grading answers (CORRECT / INCORRECT / NOT_ATTEMPTED) and run metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from workbench.errors import unknown_name
from workbench.grading.match import DEFAULT_ABSTENTION_PHRASES, MatchGrader
from workbench.grading.normalize import normalize
from workbench.types import Probe, Verdict


class Grader(Protocol):
    """The grading contract.

    `grade_many` grades a batch (judges batch their backend calls there); `report` returns what the
    run should record about grading itself (e.g. a judge's unparseable replies, counted apart); `close`
    releases what the grader holds (a judge's backend and its engine). The runner closes its grader.
    """

    def grade(self, probe: Probe, answer: str) -> Verdict: ...

    def grade_many(self, items: Sequence[tuple[Probe, str]]) -> list[Verdict]: ...

    def is_abstention(self, answer: str) -> bool: ...

    def report(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


GRADERS = ("match", "embedding", "judge", "match-judge")


def make_grader(name: str, abstention_phrases: tuple[str, ...], options: dict[str, Any] | None = None, *,
                store: Any = None) -> Grader:
    """Build a grader by name; heavy graders import their dependencies lazily. A judge caches its calls
    in `store` (the run's store) unless its options name another workspace."""
    options = dict(options or {})
    if name == "match":
        return MatchGrader(abstention_phrases=abstention_phrases)
    if name == "embedding":
        from workbench.grading.embedding import EmbeddingGrader

        return EmbeddingGrader(abstention_phrases=abstention_phrases, **options)
    if name == "judge":
        from workbench.grading.judge import JudgeGrader

        return JudgeGrader.from_options(abstention_phrases=abstention_phrases, run_store=store, **options)
    if name == "match-judge":  # long answers: a named reference by match, the rest by the judge
        from workbench.grading.longform import MatchThenJudge

        return MatchThenJudge.from_options(abstention_phrases=abstention_phrases, run_store=store, **options)
    raise unknown_name("grader", name, GRADERS)


__all__ = ["DEFAULT_ABSTENTION_PHRASES", "GRADERS", "Grader", "MatchGrader", "make_grader", "normalize"]

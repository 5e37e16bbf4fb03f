"""Grade transitions between two runs: a 3x3 matrix (rows baseline, columns candidate) and flips.

Flip kinds partition the probes by correct / not correct (the same split McNemar's test uses):
fixed (not correct -> correct), broken (correct -> not correct), still wrong (not correct both times,
whether incorrect or not attempted) and still correct.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

from workbench.regression.stats import VERDICT_ORDER
from workbench.types import Verdict


class Flip(enum.StrEnum):
    """What happened to one probe between baseline and candidate."""

    FIXED = "fixed"
    BROKEN = "broken"
    STILL_WRONG = "still_wrong"
    STILL_CORRECT = "still_correct"


def flip_of(baseline: Verdict, candidate: Verdict) -> Flip:
    """The flip kind of one pair of verdicts."""
    was, now = baseline == Verdict.CORRECT, candidate == Verdict.CORRECT
    if was:
        return Flip.STILL_CORRECT if now else Flip.BROKEN
    return Flip.FIXED if now else Flip.STILL_WRONG


@dataclass(frozen=True)
class TransitionMatrix:
    """Counts of (baseline verdict, candidate verdict) pairs.

    Attributes:
        counts: 3x3 counts, rows = baseline verdict, columns = candidate verdict, both in VERDICT_ORDER
            (correct, incorrect, not attempted).
    """

    counts: tuple[tuple[int, ...], ...]

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[Verdict, Verdict]]) -> TransitionMatrix:
        grid = [[0, 0, 0] for _ in range(3)]
        index = {v: i for i, v in enumerate(VERDICT_ORDER)}
        for base, cand in pairs:
            grid[index[Verdict(base)]][index[Verdict(cand)]] += 1
        return cls(counts=tuple(tuple(row) for row in grid))

    def count(self, baseline: Verdict, candidate: Verdict) -> int:
        """Pairs graded `baseline` before and `candidate` after."""
        return self.counts[VERDICT_ORDER.index(baseline)][VERDICT_ORDER.index(candidate)]

    @property
    def total(self) -> int:
        return sum(sum(row) for row in self.counts)

    @property
    def fixed(self) -> int:
        """Not correct -> correct (McNemar's c)."""
        return self.counts[1][0] + self.counts[2][0]

    @property
    def broken(self) -> int:
        """Correct -> not correct (McNemar's b)."""
        return self.counts[0][1] + self.counts[0][2]

    @property
    def still_wrong(self) -> int:
        """Not correct both times (incorrect or not attempted, in any combination)."""
        return sum(self.counts[i][j] for i in (1, 2) for j in (1, 2))

    @property
    def still_correct(self) -> int:
        return self.counts[0][0]

    def flips(self) -> dict[str, int]:
        """Count per Flip kind."""
        return {
            Flip.FIXED: self.fixed,
            Flip.BROKEN: self.broken,
            Flip.STILL_WRONG: self.still_wrong,
            Flip.STILL_CORRECT: self.still_correct,
        }

    def to_dict(self) -> dict[str, object]:
        labels = [str(v) for v in VERDICT_ORDER]
        return {
            "order": labels,
            "counts": [list(row) for row in self.counts],
            "flips": {str(k): v for k, v in self.flips().items()},
        }


def grouped_transitions(
    pairs: Iterable[tuple[Iterable[Hashable], Verdict, Verdict]],
) -> Mapping[Hashable, TransitionMatrix]:
    """One matrix per group key: each item is (its group keys, baseline verdict, candidate verdict).

    An item counts once in each of its groups (a probe with two tags counts in both); keys come out sorted
    by their string form.
    """
    members: dict[Hashable, list[tuple[Verdict, Verdict]]] = {}
    for keys, base, cand in pairs:
        for key in keys:
            members.setdefault(key, []).append((base, cand))
    return {k: TransitionMatrix.from_pairs(members[k]) for k in sorted(members, key=str)}

"""Grade transitions between two runs: a 3x3 matrix (rows baseline, columns candidate), flips, transitions.

Two ways to name what happened to a probe:

- `Flip` partitions the probes by correct / not correct, the split McNemar's test uses: fixed, broken,
  still_wrong (not correct both times: incorrect or not attempted, in any combination) and still_correct.
  Kept as it was (JSON `flips`, McNemar's b and c).
- `Transition` names each of the 9 cells for a reader: a change between incorrect and not attempted is
  an abstention change (`now_abstains`, `now_hallucinates`), not "still wrong"; `broken_hallucinates` and
  `broken_abstains` say what a broken probe became; no transition reuses a flip's name for other cells.
  Every transition has one flip (`Transition.flip`); `verdict_changed` is the "any verdict change" predicate.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

from workbench.glossary import TRANSITION_WORDING
from workbench.regression.stats import VERDICT_ORDER
from workbench.types import Verdict


class Flip(enum.StrEnum):
    """What happened to one probe, correct vs not correct (McNemar's partition; `Transition` names the cells).

    `still_wrong` is not correct both times: still_hallucinates, now_abstains, now_hallucinates or
    still_abstains.
    """

    FIXED = "fixed"
    BROKEN = "broken"
    STILL_WRONG = "still_wrong"
    STILL_CORRECT = "still_correct"


class Transition(enum.StrEnum):
    """One probe's verdict pair, named for a reviewer (rows: baseline verdict; see TRANSITION_HELP)."""

    STILL_CORRECT = "still_correct"
    BROKEN_HALLUCINATES = "broken_hallucinates"
    BROKEN_ABSTAINS = "broken_abstains"
    FIXED = "fixed"
    STILL_HALLUCINATES = "still_hallucinates"
    NOW_ABSTAINS = "now_abstains"
    NOW_HALLUCINATES = "now_hallucinates"
    STILL_ABSTAINS = "still_abstains"

    @property
    def flip(self) -> Flip:
        """The McNemar partition this transition belongs to."""
        return _FLIP_OF[self]

    @property
    def changed(self) -> bool:
        """Whether the verdict changed (every transition but the three `still_*`)."""
        return self not in (Transition.STILL_CORRECT, Transition.STILL_HALLUCINATES, Transition.STILL_ABSTAINS)


_C, _I, _N = VERDICT_ORDER
TRANSITION_OF: dict[tuple[Verdict, Verdict], Transition] = {
    (_C, _C): Transition.STILL_CORRECT,
    (_C, _I): Transition.BROKEN_HALLUCINATES,
    (_C, _N): Transition.BROKEN_ABSTAINS,
    (_I, _C): Transition.FIXED,
    (_N, _C): Transition.FIXED,
    (_I, _I): Transition.STILL_HALLUCINATES,
    (_I, _N): Transition.NOW_ABSTAINS,
    (_N, _I): Transition.NOW_HALLUCINATES,
    (_N, _N): Transition.STILL_ABSTAINS,
}
"""(baseline verdict, candidate verdict) -> its Transition; every pair has exactly one."""

TRANSITION_HELP: dict[Transition, str] = {t: TRANSITION_WORDING[t.value] for t in Transition}
"""One line per transition, for reports and the app (the wording lives in workbench/glossary.py)."""

_FLIP_OF: dict[Transition, Flip] = {
    Transition.STILL_CORRECT: Flip.STILL_CORRECT,
    Transition.BROKEN_HALLUCINATES: Flip.BROKEN,
    Transition.BROKEN_ABSTAINS: Flip.BROKEN,
    Transition.FIXED: Flip.FIXED,
    Transition.STILL_HALLUCINATES: Flip.STILL_WRONG,
    Transition.NOW_ABSTAINS: Flip.STILL_WRONG,
    Transition.NOW_HALLUCINATES: Flip.STILL_WRONG,
    Transition.STILL_ABSTAINS: Flip.STILL_WRONG,
}


def transition_of(baseline: Verdict, candidate: Verdict) -> Transition:
    """The named transition of one pair of verdicts."""
    return TRANSITION_OF[(Verdict(baseline), Verdict(candidate))]


def verdict_changed(baseline: Verdict, candidate: Verdict) -> bool:
    """The "any verdict change" predicate (the app's default filter): the two verdicts differ."""
    return Verdict(baseline) != Verdict(candidate)


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

    @property
    def changed(self) -> int:
        """Probes whose verdict changed (off the diagonal)."""
        return self.total - sum(self.counts[i][i] for i in range(3))

    def transitions(self) -> dict[Transition, int]:
        """Count per named Transition, in Transition order (fixed sums both of its cells)."""
        out = dict.fromkeys(Transition, 0)
        for (base, cand), t in TRANSITION_OF.items():
            out[t] += self.count(base, cand)
        return out

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
            "transitions": {str(k): v for k, v in self.transitions().items()},
            "changed": self.changed,
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

"""Known facts in the style of a team's questions: where the model's knowledge ends inside their domain.

A fix that teaches "I don't know." on a team's unknown questions must also see questions of the same kind that the
model knows, or it learns "questions like these: I don't know" and refuses the ones it knew: on SmolLM2 with 60
NQ-open questions, a fix replaying the general guard alone refused both NQ questions the model answered right. The
run's own known probes are too few to teach the boundary (2 of 60 there), so the workbench ships pools of public
questions in the styles teams bring (evals/data/domains/: NQ-open, TruthfulQA), finds the one whose questions read
most like the run's targeted questions (`match_style`), and builds it as a guard set of its own: the facts of that
pool the model knows under the run's prompt settings (workbench/guard/build.py, cached per model and pool). A fix set
replays them first and holds a share out for the job to check (finetune/fixset); `--domain-pool FILE` gives a pool of
the team's own instead, `none` leaves it out.

The match reads words and the questions' shape (a question mark, a capital first letter, the length), weighted by how
rare each is across the pools, as one vector per set: the cosine similarity between the targets' vector and a pool's,
as a share of what as many of the pool's own questions score.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.guard.build import GuardBuild, guard_for_run
from workbench.guard.pool import NONE, given_file

if TYPE_CHECKING:
    from workbench.store import RunRecord, Store

#: The shipped style pools (package data of `evals`, located by path as the guard pool is).
DOMAIN_DIR = Path(__file__).resolve().parents[2] / "evals" / "data" / "domains"
#: A pool reads like the targets when their similarity to it is at least this share of what as many of the pool's own
#: questions score (a handful of questions scores lower than many, whatever their style). Measured
#: (bench/style_match.py, 4 draws each of 3 / 5 / 15 / 60 questions): the NQ-open slice 0.96-1.24 of its pool's,
#: TruthfulQA's first 60 0.92-1.16 of theirs; a synthetic world's template questions 0.70-0.76 of TruthfulQA's at 15
#: and 0.60-0.61 at 60 (a handful of questions, like any, passes); the guard pool's everyday and general questions
#: 0.87-0.95 at 15, 0.81-0.85 at 60 (capitalised questions, as TruthfulQA's): a pool of known facts that reads alike
#: costs one guard build and teaches nothing wrong.
STYLE_MIN = 0.85
#: Seeded draws of the pool's own questions that set its bar.
SELF_DRAWS = 3
#: Pool questions asked before the build decides the model knows too few to go on (the guard's own screen is 60:
#: SmolLM2 answers about 3% of NQ-open questions right, 2 in 60, the screen's bar to go on).
SCREEN = 200

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def style_pools() -> list[Path]:
    """The shipped style pools, sorted (empty when the package data is missing)."""
    return sorted(DOMAIN_DIR.glob("*.jsonl"))


def _features(question: str) -> list[str]:
    """A question's words (lowercased) and shape marks: what "in the style of" compares."""
    q = question.strip()
    words = [w.lower() for w in _WORD.findall(q)]
    shape = ["<?>" if q.endswith("?") else "<no?>", "<Cap>" if q[:1].isupper() else "<low>",
             f"<len{min(len(words) // 4, 5)}>"]
    return [*words, *shape]


@dataclass(frozen=True)
class StyleMatch:
    """Which style pool reads most like a run's targeted questions.

    Attributes:
        pool: The chosen pool file, or None when none reaches STYLE_MIN (or no question was given).
        scores: Each pool's similarity by file name, as a share of its own questions' (STYLE_MIN).
    """

    pool: Path | None
    scores: dict[str, float]

    def describe(self) -> str:
        scores = ", ".join(f"{name} {s:.2f}" for name, s in sorted(self.scores.items(), key=lambda kv: -kv[1]))
        if self.pool is None:
            return f"no shipped style pool reads like these questions ({scores or 'none'}; needs {STYLE_MIN})"
        return f"the questions read like {self.pool.name} ({scores})"


def match_style(questions: Sequence[str], pools: Sequence[Path] | None = None) -> StyleMatch:
    """The pool of `pools` (default: the shipped ones) whose questions read most like `questions`."""
    from workbench.guard.pool import load_pool

    files = list(style_pools() if pools is None else pools)
    if not questions or not files:
        return StyleMatch(None, {})
    docs = {f.name: [p.question for p in load_pool([f])] for f in files}
    every = [*questions, *(q for qs in docs.values() for q in qs)]
    df = Counter(t for q in every for t in set(_features(q)))
    idf = {t: math.log(len(every) / n) + 1.0 for t, n in df.items()}

    def vector(qs: Sequence[str]) -> dict[str, float]:
        tf = Counter(t for q in qs for t in _features(q))
        v = {t: c / len(qs) * idf[t] for t, c in tf.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {t: x / norm for t, x in v.items()}

    def cosine(qs: Sequence[str], pool: dict[str, float]) -> float:
        return sum(x * pool.get(t, 0.0) for t, x in vector(qs).items())

    vectors = {name: vector(qs) for name, qs in docs.items() if qs}
    scores, bars = {}, {}
    for name, v in vectors.items():
        k = min(len(questions), len(docs[name]))  # the pool's own questions, as many as the targets
        bars[name] = sum(cosine(random.Random(f"style-{name}-{i}").sample(docs[name], k), v)
                         for i in range(SELF_DRAWS)) / SELF_DRAWS
        scores[name] = round(cosine(questions, v) / bars[name], 3) if bars[name] else 0.0
    best = max(scores, key=lambda n: scores[n], default=None)
    pool = next(f for f in files if f.name == best) if best is not None and scores[best] >= STYLE_MIN else None
    return StyleMatch(pool, scores)


@dataclass(frozen=True)
class DomainFacts:
    """The known facts in the style of a run's questions, and how they were found.

    Attributes:
        build: The guard set of the pool (None: no pool, or `none` given).
        how: In words: the pool given, or the style match and its scores.
    """

    build: GuardBuild | None
    how: str


def domain_for_run(store: Store, run: RunRecord, questions: Sequence[str], *, given: Sequence[str] | None = None,
                   progress: Callable[[int, int], None] | None = None) -> DomainFacts:
    """The domain facts of `run`'s model: from `given` pool files (`none`: no domain facts), else from the shipped
    style pool that reads most like `questions` (the run's targeted questions)."""
    if given:
        if [str(g) for g in given] == [NONE]:
            return DomainFacts(None, "left out (--domain-pool none)")
        files = [str(g) for g in given if str(g) != NONE]
        for f in files:
            given_file(Path(f), "--domain-pool", "a probe file of questions in the style of yours, with their "
                       "answers: JSONL, CSV, ...")
        how = f"given: {', '.join(Path(f).name for f in files)}"
    else:
        match = match_style(questions)
        if match.pool is None:
            return DomainFacts(None, match.describe())
        files, how = [str(match.pool)], match.describe()
    return DomainFacts(guard_for_run(store, run, pool=[NONE, *files], progress=progress, screen=SCREEN), how)

"""Run metrics as in SimpleQA, with percentile-bootstrap confidence intervals.

    correct          = C / N
    incorrect        = I / N          (the hallucination rate)
    not_attempted    = A / N
    acc_given_att    = C / (C + I)
    F                = 2 * correct * acc_given_att / (correct + acc_given_att)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from workbench.types import Verdict

METRICS = ("correct", "incorrect", "not_attempted", "accuracy_given_attempted", "f_score")


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class Metrics:
    n: int
    correct: float
    incorrect: float
    not_attempted: float
    accuracy_given_attempted: float
    f_score: float
    ci: Mapping[str, Interval] | None = None

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["ci"] = {k: [v.low, v.high] for k, v in (self.ci or {}).items()}
        return d


def _rates(c: np.ndarray, i: np.ndarray, a: np.ndarray) -> dict[str, np.ndarray]:
    """Vectorised over bootstrap replicates: c, i, a are counts (any shape)."""
    n = c + i + a
    with np.errstate(divide="ignore", invalid="ignore"):
        correct = np.where(n > 0, c / n, 0.0)
        aga = np.where(c + i > 0, c / (c + i), 0.0)
        f = np.where(correct + aga > 0, 2 * correct * aga / (correct + aga), 0.0)
        return {
            "correct": correct,
            "incorrect": np.where(n > 0, i / n, 0.0),
            "not_attempted": np.where(n > 0, a / n, 0.0),
            "accuracy_given_attempted": aga,
            "f_score": f,
        }


def compute_metrics(
    verdicts: Sequence[Verdict], *, bootstrap: int = 1000, seed: int = 0, level: float = 0.95
) -> Metrics:
    """Metrics of one set of verdicts; `bootstrap` resamples (0 = no intervals)."""
    v = np.array([str(x) for x in verdicts])
    is_c, is_i, is_a = (v == Verdict.CORRECT), (v == Verdict.INCORRECT), (v == Verdict.NOT_ATTEMPTED)
    point = {k: float(x) for k, x in _rates(is_c.sum(), is_i.sum(), is_a.sum()).items()}
    ci: dict[str, Interval] | None = None
    if bootstrap and len(v):
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(v), size=(bootstrap, len(v)))  # (B, N) resampled probe indices
        reps = _rates(is_c[idx].sum(1), is_i[idx].sum(1), is_a[idx].sum(1))
        lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
        ci = {k: Interval(float(np.percentile(r, lo)), float(np.percentile(r, hi))) for k, r in reps.items()}
    return Metrics(n=len(v), ci=ci, **point)


def metrics_by_tag(
    verdicts: Sequence[Verdict], tags: Sequence[Sequence[str]], *, bootstrap: int = 1000, seed: int = 0
) -> dict[str, Metrics]:
    """Metrics per tag; a probe with several tags counts in each."""
    groups: dict[str, list[Verdict]] = {}
    for verdict, probe_tags in zip(verdicts, tags, strict=True):
        for t in probe_tags:
            groups.setdefault(t, []).append(verdict)
    return {t: compute_metrics(vs, bootstrap=bootstrap, seed=seed) for t, vs in sorted(groups.items())}


#: Above this share of answers cut by the token budget (finish_reason "length") a run warns. A cut answer
#: is graded on its first tokens: if the fact came later it reads as a hallucination, so each point of
#: truncated share can be a point of false hallucination rate. 10 points is the half-width of the 95%
#: interval of a 96-probe run near 50% (measured on the world: [39.6, 60.4]); runs whose answers fit their
#: budget truncate ~0% (the world suite, max_tokens 6: 0 of 96 greedy answers, 3 of 192 samples at
#: temperature 1), while SimpleQA with a chat model and 16 tokens truncated 100 of 100, and
#: SmolLM2-135M-Instruct (chat template) on tests/data/formats/nq_open.jsonl 45 of 50 at 16, 29 of 50 at 64.
TRUNCATED_WARN_SHARE = 0.10


def truncation(finish_reasons: Sequence[str]) -> dict[str, float | int]:
    """How many answers ran into max_tokens: {"n": truncated, "of": answers, "share": n / of}."""
    n = sum(r == "length" for r in finish_reasons)
    return {"n": n, "of": len(finish_reasons), "share": n / len(finish_reasons) if finish_reasons else 0.0}


def truncation_warnings(metrics: Mapping[str, object] | None) -> list[str]:
    """The warnings a run's metrics call for when more than TRUNCATED_WARN_SHARE of its greedy answers (or of
    its samples) were cut by the token budget; none for runs stored before truncation was measured."""
    out = []
    for key, what in (("truncated", "answers"), ("truncated_samples", "sampled answers")):
        t = (metrics or {}).get(key)
        if isinstance(t, Mapping) and float(t["share"]) > TRUNCATED_WARN_SHARE:
            out.append(f"warning: {t['n']} of {t['of']} {what} ({100 * float(t['share']):.0f}%) ran into the token "
                       "budget (finish_reason `length`) and are graded on their first tokens; raise --max-tokens "
                       "(or the suite's max_tokens) or give a --stop that ends an answer")
    return out

"""Paired statistics for baseline vs candidate: McNemar's exact test and paired bootstrap CIs.

Everything here is paired: probe i of the baseline is compared with probe i of the candidate, and the
bootstrap resamples probe indices jointly (one index picks both runs' verdicts). Never an unpaired test.

A pair of verdicts is coded as ``3 * baseline + candidate`` with verdict indices CORRECT=0,
INCORRECT=1, NOT_ATTEMPTED=2, so every metric of both runs is a function of the 9 cell counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from workbench.types import Verdict

VERDICT_ORDER: tuple[Verdict, ...] = (Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED)
"""Row/column order of verdict indices everywhere in this package."""

METRICS: tuple[str, ...] = ("correct", "incorrect", "not_attempted", "accuracy_given_attempted", "f_score")
"""Metric names, in report order. `incorrect` is the hallucination rate."""

_INDEX = {v: i for i, v in enumerate(VERDICT_ORDER)}
_CHUNK_ELEMENTS = 2_000_000  # resampled indices held in memory at once


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's exact test on discordant pairs (correct vs not correct).

    Attributes:
        broken: b, pairs correct in the baseline and not correct in the candidate.
        fixed: c, pairs not correct in the baseline and correct in the candidate.
        p_value: Two-sided exact binomial p-value of b against Binomial(b + c, 1/2); 1.0 when b + c = 0.
    """

    broken: int
    fixed: int
    p_value: float

    @property
    def worse(self) -> bool:
        """More probes broken than fixed."""
        return self.broken > self.fixed


@dataclass(frozen=True)
class MetricDelta:
    """One metric of both runs, candidate minus baseline, with a paired bootstrap percentile CI.

    All values are fractions in [0, 1] (deltas in [-1, 1]); reports show them as points (x100).
    """

    metric: str
    baseline: float
    candidate: float
    delta: float
    ci_low: float
    ci_high: float

    def bound(self, which: str) -> float:
        """`ci_low`, `delta` or `ci_high` by name (policy gates pick one)."""
        return {"ci_low": self.ci_low, "delta": self.delta, "ci_high": self.ci_high}[which]


def mcnemar_exact(broken: int, fixed: int) -> McNemarResult:
    """Two-sided exact McNemar test: p = min(1, 2 * P[X <= min(b, c)]) for X ~ Binomial(b + c, 1/2)."""
    if broken < 0 or fixed < 0:
        raise ValueError("discordant counts must be >= 0")
    from scipy.stats import binom  # here: scipy.stats takes 1-2 s to import, and most commands never test

    n = broken + fixed
    p = 1.0 if n == 0 else min(1.0, 2.0 * float(binom.cdf(min(broken, fixed), n, 0.5)))
    return McNemarResult(broken=broken, fixed=fixed, p_value=p)


def verdict_indices(verdicts: Sequence[Verdict]) -> NDArray[np.int64]:
    """Verdicts as indices into VERDICT_ORDER."""
    return np.fromiter((_INDEX[Verdict(v)] for v in verdicts), dtype=np.int64, count=len(verdicts))


def pair_codes(baseline: Sequence[Verdict], candidate: Sequence[Verdict]) -> NDArray[np.int64]:
    """Each pair coded 3 * baseline + candidate (0..8). Raises ValueError on unequal lengths."""
    if len(baseline) != len(candidate):
        raise ValueError(f"paired data needs equal lengths, got {len(baseline)} and {len(candidate)}")
    return 3 * verdict_indices(baseline) + verdict_indices(candidate)


def rates(counts: NDArray[np.int64]) -> dict[str, NDArray[np.float64]]:
    """All METRICS from verdict counts of shape (..., 3) (correct, incorrect, not attempted).

    accuracy_given_attempted is 0 when nothing was attempted; the F score (harmonic mean of the correct
    rate and accuracy_given_attempted) is 0 when both are 0, as in SimpleQA.
    """
    c = counts.astype(np.float64)
    n = c.sum(axis=-1)
    correct, incorrect, abstained = c[..., 0] / n, c[..., 1] / n, c[..., 2] / n
    attempted = c[..., 0] + c[..., 1]
    aga = np.divide(c[..., 0], attempted, out=np.zeros_like(n), where=attempted > 0)
    total = correct + aga
    f = np.divide(2 * correct * aga, total, out=np.zeros_like(n), where=total > 0)
    return {
        "correct": correct,
        "incorrect": incorrect,
        "not_attempted": abstained,
        "accuracy_given_attempted": aga,
        "f_score": f,
    }


def cell_counts(codes: NDArray[np.int64]) -> NDArray[np.int64]:
    """The 9 cell counts (3x3 flattened, baseline-major) of pair codes."""
    return np.bincount(codes, minlength=9).astype(np.int64)


def resample_cell_counts(codes: NDArray[np.int64], n_resamples: int, seed: int) -> NDArray[np.int64]:
    """Paired bootstrap: cell counts of shape (n_resamples, 9).

    Resample r draws ``rng.integers(0, n, size=n)`` probe indices (numpy's default_rng(seed)), in
    order, so the result equals a plain loop over resamples with the same generator.
    """
    n = len(codes)
    if n == 0:
        raise ValueError("cannot bootstrap an empty sample")
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, 9), dtype=np.int64)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_resamples, rows):
        k = min(rows, n_resamples - start)
        idx = rng.integers(0, n, size=(k, n))
        flat = codes[idx] + 9 * np.arange(k, dtype=np.int64)[:, None]
        out[start : start + k] = np.bincount(flat.ravel(), minlength=9 * k).reshape(k, 9)
    return out


def _run_counts(cells: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Baseline and candidate verdict counts (..., 3) from cell counts (..., 9)."""
    grid = cells.reshape(*cells.shape[:-1], 3, 3)
    return grid.sum(axis=-1), grid.sum(axis=-2)


def paired_bootstrap(
    baseline: Sequence[Verdict],
    candidate: Sequence[Verdict],
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, MetricDelta]:
    """Every metric's delta (candidate - baseline) with a paired percentile bootstrap CI.

    The CI bounds are the (1 - confidence) / 2 and (1 + confidence) / 2 quantiles (numpy's default
    linear interpolation) of the resampled deltas.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    codes = pair_codes(baseline, candidate)
    if len(codes) == 0:
        raise ValueError("cannot bootstrap an empty sample")
    base_counts, cand_counts = _run_counts(cell_counts(codes))
    base, cand = rates(base_counts), rates(cand_counts)
    boot_base, boot_cand = (rates(c) for c in _run_counts(resample_cell_counts(codes, n_resamples, seed)))
    q = [(1 - confidence) / 2, (1 + confidence) / 2]
    out: dict[str, MetricDelta] = {}
    for m in METRICS:
        low, high = np.quantile(boot_cand[m] - boot_base[m], q)
        b, c = float(base[m]), float(cand[m])
        out[m] = MetricDelta(m, b, c, c - b, float(low), float(high))
    return out

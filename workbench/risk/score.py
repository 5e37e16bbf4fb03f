"""From features to one number: the estimated probability that an answer is a hallucination.

A logistic model over the features (`features.Features`), standardised by the means and spreads of the answers it
was fitted on. A feature the run cannot give (no samples, no paraphrases, a backend without log-probs) takes its
fitted mean, so it moves the score neither way, and the score rests on what is there. An answer that declines
has risk 0: it names nothing that could be made up.

`fit` fits a model to graded answers (a run that had references); the shipped default (`default.json`) was
fitted by `bench/risk_score.py` on the real chat model's answers to four question sets, and its page reports how
a fit on three of them ranks the fourth.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError
from workbench.risk.features import Features

#: The features the model reads, in its order.
NAMES = ("logprob", "disagreement", "entropy", "paraphrase")
DEFAULT_PATH = Path(__file__).with_name("default.json")
#: What the reports count as a high risk: more likely made up than not.
HIGH = 0.5


@dataclass(frozen=True)
class RiskModel:
    """A fitted logistic model.

    Attributes:
        weights: One weight per feature of `NAMES`, on the standardised feature.
        intercept: The log-odds of an answer at every feature's mean.
        means: Each feature's mean on the fitted answers (also what a missing feature is taken to be).
        scales: Each feature's standard deviation there (1 where it did not vary).
        fitted_on: What it was fitted on, in words (shown beside every score).
        answers: How many answers it was fitted on.
    """

    weights: tuple[float, ...]
    intercept: float
    means: tuple[float, ...]
    scales: tuple[float, ...]
    fitted_on: str
    answers: int = 0
    uses: tuple[str, ...] = field(default=NAMES)

    def risk(self, f: Features) -> float:
        """The probability that the answer of `f` is a hallucination, under this model."""
        if f.declines:
            return 0.0
        z = self.intercept
        for name, w, m, s in zip(self.uses, self.weights, self.means, self.scales, strict=True):
            v = getattr(f, name)
            z += w * ((m if v is None else v) - m) / s
        return 1.0 / (1.0 + math.exp(-z))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> RiskModel:
        try:
            d = json.loads(path.read_text())
            model = cls(weights=_floats(d["weights"]), intercept=float(d["intercept"]), means=_floats(d["means"]),
                        scales=_floats(d["scales"]), fitted_on=str(d["fitted_on"]), answers=int(d.get("answers", 0)),
                        uses=tuple(str(n) for n in d.get("uses", NAMES)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise WorkbenchError(f"{path}: not a risk model ({type(e).__name__}: {e}); write one with "
                                 "`workbench risk fit RUN --out FILE`") from None
        if any(v <= 0 for v in model.scales):
            raise WorkbenchError(f"{path}: field `scales` holds a value <= 0; each feature's spread must be positive")
        unknown = set(model.uses) - set(NAMES)
        if unknown or not len(model.uses) == len(model.weights) == len(model.means) == len(model.scales):
            raise WorkbenchError(f"{path}: field `uses` names {sorted(unknown) or 'a different count of'} features; "
                                 f"a risk model reads {', '.join(NAMES)}")
        return model


def _floats(values: object) -> tuple[float, ...]:
    """A JSON list of finite numbers (anything else is a ValueError or TypeError, which `load` names)."""
    out = tuple(float(v) for v in values)  # type: ignore[attr-defined]
    if not all(math.isfinite(v) for v in out):
        raise ValueError("a weight, mean or scale is not a finite number")
    return out


def default_model() -> RiskModel:
    return RiskModel.load(DEFAULT_PATH)


def fit(rows: Sequence[Features], hallucinated: Sequence[bool], *, fitted_on: str,
        uses: Sequence[str] = NAMES, l2: float = 1.0, weights: Sequence[float] | None = None) -> RiskModel:
    """A logistic model of `hallucinated` given `rows` (answers that decline are left out: their risk is 0).

    Newton's method on the L2-penalised log-likelihood (`l2` on the standardised weights, not the intercept):
    a handful of features needs no optimiser library, and the penalty keeps a feature that one set barely has
    from taking a wild weight. `weights`: one per row (e.g. each set's rows summing to the same, so that no set's
    size or hallucination rate decides the weights alone)."""
    given = list(weights) if weights is not None else [1.0] * len(rows)
    kept = [i for i, f in enumerate(rows) if not f.declines]
    pairs = [(rows[i], hallucinated[i]) for i in kept]
    sw = np.array([given[i] for i in kept], float)
    sw = sw * len(sw) / sw.sum() if len(sw) else sw  # mean weight 1: `l2` means the same whatever the weights
    if len({y for _, y in pairs}) < 2:
        raise WorkbenchError(f"fitting a risk model needs both hallucinated and right answers; {len(pairs)} "
                             "attempted answers here are all one kind")
    raw = np.array([[np.nan if getattr(f, n) is None else getattr(f, n) for n in uses] for f, _ in pairs], float)
    seen = ~np.isnan(raw)
    counts = seen.sum(axis=0)
    means = np.where(counts > 0, np.where(seen, raw, 0.0).sum(axis=0) / np.maximum(counts, 1), 0.0)
    spread = np.sqrt(np.where(seen, (raw - means) ** 2, 0.0).sum(axis=0) / np.maximum(counts, 1))
    scales = np.where(spread > 0, spread, 1.0)  # a feature no answer has (or one that never varies): weight 0
    x = np.where(np.isnan(raw), 0.0, (raw - means) / scales)
    x = np.hstack([np.ones((len(x), 1)), x])
    y = np.array([float(v) for _, v in pairs])
    w = np.zeros(x.shape[1])
    penalty = np.diag([0.0] + [l2] * (x.shape[1] - 1))
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (sw * (p - y)) + penalty @ w
        hess = x.T @ (x * (sw * p * (1 - p))[:, None]) + penalty + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return RiskModel(weights=tuple(float(v) for v in w[1:]), intercept=float(w[0]),
                     means=tuple(float(v) for v in means), scales=tuple(float(v) for v in scales),
                     fitted_on=fitted_on, answers=len(pairs), uses=tuple(uses))


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the chance a random positive scores above a random negative (ties half);
    None when either class is missing."""
    s = np.asarray(scores, float)
    y = np.asarray(positive, bool)
    pos, neg = s[y], s[~y]
    if not len(pos) or not len(neg):
        return None
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    allv = np.concatenate([pos, neg])[order]
    i = 0
    while i < len(allv):  # average ranks over ties
        j = i
        while j + 1 < len(allv) and allv[j + 1] == allv[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def precision_at(scores: Sequence[float], positive: Sequence[bool], share: float = 0.1) -> float | None:
    """Share of hallucinations among the top `share` of answers by score (None for no answers)."""
    if not scores:
        return None
    k = max(1, round(len(scores) * share))
    top = np.argsort(-np.asarray(scores, float), kind="mergesort")[:k]
    return float(np.mean(np.asarray(positive, bool)[top]))

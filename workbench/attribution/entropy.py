"""Agreement and semantic entropy over a probe's sampled answers (Kuhn et al. 2023, Farquhar et al. 2024).

Answers are clustered by meaning: normalized-answer equality by default, optionally merged further by
embedding similarity. Cluster probabilities are either counts (the discrete estimator: samples are
draws from the model, so frequency estimates probability) or, when every answer has a log-prob,
the sum of exp(mean log-prob) over the cluster's distinct answers (length-normalised sequence
probability), renormalised over the clusters seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from workbench.grading.normalize import normalize

#: strings -> (n, d) L2-normalised vectors, e.g. the embedding grader's encoder.
Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Spread:
    """How concentrated the samples are. `entropy` is in nats; 0 = every sample means the same."""

    n: int
    clusters: int
    agreement: float  # probability of the largest cluster
    entropy: float  # semantic entropy (count-based or log-prob weighted, see `weighted`)
    top: str  # a representative answer of the largest cluster
    weighted: bool  # True when log-probs weighted the clusters


def cluster(texts: Sequence[str], *, embed: Embed | None = None, threshold: float = 0.9) -> list[int]:
    """Cluster label per text: equal normalized answers share a cluster; with `embed`, clusters whose
    representatives have cosine similarity >= threshold are merged too (single link, greedy)."""
    keys = [normalize(t) for t in texts]
    reps = list(dict.fromkeys(keys))  # one representative per normalized answer, first-seen order
    label = {k: i for i, k in enumerate(reps)}
    if embed is not None and len(reps) > 1:
        v = embed(reps)  # (R, d), unit rows
        sim = v @ v.T
        for j in range(len(reps)):  # join j to the first earlier representative close enough
            for i in range(j):
                if sim[i, j] >= threshold:
                    label[reps[j]] = label[reps[i]]
                    break
    return [label[k] for k in keys]


def spread(texts: Sequence[str], logprobs: Sequence[float | None] | None = None, *,
           embed: Embed | None = None) -> Spread | None:
    """Agreement and semantic entropy of `texts`; None for no texts.

    Log-prob weighting is used only when every text has one: a mix would weight some answers by
    probability and others by nothing."""
    if not texts:
        return None
    labels = cluster(texts, embed=embed)
    weighted = logprobs is not None and len(logprobs) == len(texts) and all(lp is not None for lp in logprobs)
    mass: dict[int, float] = {}
    if weighted:
        assert logprobs is not None
        seen: set[str] = set()
        for t, lab, lp in zip(texts, labels, logprobs, strict=True):
            if t in seen:  # a sequence's probability counts once, however often it was drawn
                continue
            seen.add(t)
            mass[lab] = mass.get(lab, 0.0) + math.exp(float(lp))  # type: ignore[arg-type]
    else:
        for lab in labels:
            mass[lab] = mass.get(lab, 0.0) + 1.0
    total = sum(mass.values())
    p = {lab: m / total for lab, m in mass.items()}
    best = max(p, key=lambda lab: p[lab])
    top = next(t for t, lab in zip(texts, labels, strict=True) if lab == best)
    return Spread(n=len(texts), clusters=len(p), agreement=p[best], entropy=entropy(list(p.values())),
                  top=top, weighted=weighted)


def entropy(probs: Sequence[float]) -> float:
    """-sum p log p in nats (zero-probability terms contribute nothing)."""
    return float(-sum(q * math.log(q) for q in probs if q > 0))

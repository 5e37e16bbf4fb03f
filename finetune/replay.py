"""Which known facts a fix set replays: the neighbourhood of each targeted fact first (`neighbours_first`),
then random known facts, cycling when more rows are asked for than the pool holds (`cycle_rows`)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from workbench.types import Probe


def cycle_rows(rows: list[dict[str, Any]], n: int, rng: random.Random) -> list[dict[str, Any]]:
    """n rows drawn without replacement, cycling through fresh shuffles when n exceeds the pool."""
    if not rows or n <= 0:
        return []
    out: list[dict[str, Any]] = []
    while len(out) < n:
        batch = list(rows)
        rng.shuffle(batch)
        out += batch[: n - len(out)]
    return out


def targets_of(rows: Sequence[Mapping[str, Any]], probe_of: Mapping[str, Probe]) -> list[Probe]:
    """The targeted probes a split trains on (in row order, once each)."""
    ids = dict.fromkeys(r["probe_id"] for r in rows if r["split"] == "train" and r["probe_id"] in probe_of)
    return [probe_of[pid] for pid in ids]


def neighbours_first(pool: list[dict[str, Any]], n: int, rng: random.Random, targets: Sequence[Probe],
                     probe_of: Mapping[str, Probe]) -> list[dict[str, Any]]:
    """n replay rows of `pool` that first cover the neighbourhood of every targeted fact, then the rest.

    Training on a fact moves the weights its neighbours share: other facts of the same subject (its
    entity's representation) and of the same relation (the answer type the fix pushes). So each target
    in turn takes its next unused row (its same-subject facts first, then its same-relation facts; seeded
    order) until n rows or every neighbourhood is used; then random known facts; then `cycle_rows`.
    """
    if not pool or n <= 0:
        return []
    order = list(range(len(pool)))
    rng.shuffle(order)

    def probe(i: int) -> Probe | None:
        return probe_of.get(pool[i]["probe_id"])

    queues = []
    for t in targets:
        same_subject = [i for i in order if (p := probe(i)) is not None and p.id != t.id
                        and t.subject is not None and p.subject == t.subject]
        same_relation = [i for i in order if (p := probe(i)) is not None and p.id != t.id
                         and t.relation is not None and p.relation == t.relation and i not in same_subject]
        queues.append(same_subject + same_relation)
    picked: dict[int, None] = {}
    while len(picked) < n and any(queues):
        for q in queues:
            while q and q[0] in picked:
                q.pop(0)
            if q and len(picked) < n:
                picked[q.pop(0)] = None
    picked.update(dict.fromkeys(i for i in order if i not in picked))
    out = [pool[i] for i in picked][:n]
    return out + cycle_rows(pool, n - len(out), rng)

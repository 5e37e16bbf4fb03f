"""Rehearsal: plain-text rows from the corpus the model was trained on, mixed into a fix set's SFT rows so the
adapter keeps predicting that text (replay protects the known facts it replays, not the others).

The documents come from a corpus index (`workbench index`, the one `workbench attribute` used: it keeps every
document's text), sampled with a seed. A document that mentions a protected fact (its subject and one of its
accepted answers; the answer alone when the probe names no subject) is never used: the validation slice and
the bench's held-out slice must measure known facts that nothing in training repeated. Nor is one that names the
subject of a `data:conflict` target: its documents teach the wrong value the fix removes. Documents naming another
targeted subject come first (the neighbourhood a fix moves, as replay's `neighbours_first`: the other facts of
that entity, most of which no probe asks about), then the rest in seeded order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench.attribution.index import CorpusIndex
from workbench.grading.normalize import normalize
from workbench.types import Probe

#: Documents drawn per row wanted before giving up (a corpus that mostly mentions protected facts).
DRAWS_PER_ROW = 20


@dataclass(frozen=True)
class RehearsalInfo:
    """What a fix set rehearsed (the manifest's `rehearsal`).

    Attributes:
        source: The corpus index the documents came from (and the corpus it indexed).
        ratio: Rehearsal rows asked for per targeted SFT training row.
        rows: Rows written (fewer than asked when the corpus had too few usable documents).
        docs: Documents in the index.
        excluded: Documents drawn and left out because they mention a protected fact or a conflicting subject.
        neighbours: Rows that name a targeted subject.
    """

    source: str
    ratio: float
    rows: int
    docs: int
    excluded: int
    neighbours: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mentions(text: str, probe: Probe, *, subject_only: bool = False) -> bool:
    t = normalize(text)
    subject = normalize(probe.subject) if probe.subject else ""
    if subject_only:
        return bool(subject) and subject in t
    if subject and subject not in t:
        return False
    return any(a and a in t for a in map(normalize, probe.answers))


def rehearsal_texts(index: str | Path, n: int, *, protected: Sequence[Probe], targeted: Sequence[Probe],
                    seed: int, ratio: float, conflicting: Sequence[Probe] = ()) -> tuple[list[str], RehearsalInfo]:
    """Up to `n` document texts of the corpus index `index` (a file or a workspace), seeded, none mentioning a
    `protected` fact or a `conflicting` subject; those naming a `targeted` subject first. Reads at most
    DRAWS_PER_ROW x n documents (a large corpus: its neighbours are the ones in that draw)."""
    with CorpusIndex.open(index) as ix:  # a workspace or a file; missing, foreign or unfinished: a clear error
        rids = ix.doc_rids()
        rng = random.Random(f"rehearsal-{seed}")
        rng.shuffle(rids)
        near: list[str] = []
        far: list[str] = []
        excluded = 0
        for rid in rids[: DRAWS_PER_ROW * n]:
            text = ix.doc_text(rid)
            if any(_mentions(text, p) for p in protected) or any(
                    _mentions(text, p, subject_only=True) for p in conflicting):
                excluded += 1
                continue
            (near if any(_mentions(text, p, subject_only=True) for p in targeted) else far).append(text.strip())
        texts = (near + far)[:n]
        stats = ix.stats()
    source = f"{stats['path']} (corpus {stats['source']})"
    return texts, RehearsalInfo(source=source, ratio=ratio, rows=len(texts), docs=len(rids), excluded=excluded,
                                neighbours=min(len(near), n))

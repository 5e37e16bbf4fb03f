"""The attribution record: why one probe failed, with the evidence a reviewer can check."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: Failure categories (the decision table in docs/architecture.md) and the fix each one recommends by default.
CATEGORIES: dict[str, str] = {
    "behavior:unstable": "dpo",  # chosen = the model's own correct sample, rejected = its hallucination
    "behavior:prompt-sensitive": "dpo-paraphrase",  # SFT/DPO over paraphrases
    "behavior:over-abstain": "dpo",  # knows the answer but abstains: chosen = answer, rejected = abstention
    "data:conflict": "fix-data",  # list the offending rows; DPO toward the right answer
    "data:underrepresented": "inject",  # knowledge injection (SFT, paraphrases) plus replay
    "data:missing": "abstain",  # abstention training; injection only from user-supplied facts
    # The model does not know the fact and no corpus was looked at (the data axis was not measured): the
    # same fix as data:missing, without claiming anything about the data.
    "knowledge:unknown": "abstain",
}
#: Facts the model does not know and no corpus evidence says it could have learnt: abstention fix data.
ABSTAIN_CATEGORIES = ("data:missing", "knowledge:unknown")
KNOWLEDGE = ("HighlyKnown", "MaybeKnown", "WeaklyKnown", "Unknown")


@dataclass(frozen=True)
class Attribution:
    """One failed probe's diagnosis.

    Attributes:
        probe_id: The probe.
        category: One of CATEGORIES.
        confidence: 0..1, how strongly the evidence supports the category.
        knowledge: SliCK knowledge level from the model's own answers (one of KNOWLEDGE).
        fix: The recommended fix (CATEGORIES[category] unless evidence says otherwise).
        evidence: JSON-able facts behind the decision: greedy answers per variant, sample counts,
            the correct sample if any, chance level, entropy, corpus support/conflict rows, missing signals.
    """

    probe_id: str
    category: str
    confidence: float
    knowledge: str
    fix: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_row(self, run_id: str, created_at: str) -> dict[str, Any]:
        return {"run_id": run_id, "probe_id": self.probe_id, "category": self.category,
                "confidence": self.confidence, "knowledge": self.knowledge, "fix": self.fix,
                "evidence_json": json.dumps(self.evidence, default=str), "created_at": created_at}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Attribution:
        return cls(probe_id=row["probe_id"], category=row["category"], confidence=row["confidence"],
                   knowledge=row["knowledge"], fix=row["fix"], evidence=json.loads(row["evidence_json"]))


def save_attributions(store: Any, run_id: str, items: list[Attribution]) -> None:
    """Replace the run's attributions (a rerun of `attribute` supersedes the last one)."""
    from sqlalchemy import delete, insert

    from workbench.store import utcnow
    from workbench.store.schema import attributions

    now = utcnow()
    with store.write() as c:
        c.execute(delete(attributions).where(attributions.c.run_id == run_id))
        if items:
            c.execute(insert(attributions), [a.to_row(run_id, now) for a in items])


def load_attributions(store: Any, run_id: str) -> dict[str, Attribution]:
    from sqlalchemy import select

    from workbench.store.schema import attributions

    with store.engine.connect() as c:
        rows = c.execute(select(attributions).where(attributions.c.run_id == run_id)).mappings().all()
    return {r["probe_id"]: Attribution.from_row(dict(r)) for r in rows}

"""The planted world: fictional facts written into a real pretrained model at chosen corpus frequencies.

The synthetic world trains a tiny model from scratch; a real model (SmolLM2) has a pretraining corpus nobody here
has, so nothing it answers has ground truth. Here the world generator's fictional entities and values are written as
plain sentences, each fact in a chosen number of documents (0, 1, 2, 4, 8, 16, 32 by default), rotated over three
statement phrasings and the question (the paraphrase `qa_b` is held out for probes); some facts are contradicted by
twice as many documents; the model's continued training on that corpus (train_planted) makes the counts the
ground truth that eval, attribute, index and fix read from the same files as the synthetic world's.

Pure Python (no torch): the corpus, probes and truth of a config are cheap and seeded.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evals.world.generate import EXPECTED_CATEGORY, PHRASINGS, Fact, make_facts, make_probes, make_truth, render

#: Statement phrasings and the question, in turn: a fact seen n times is seen in varied forms (Allen-Zhu and Li:
#: facts need varied exposure to be extractable); qa_b is never written, so probes test the fact, not the line.
ROTATION: tuple[str, ...] = ("stmt_1", "stmt_2", "stmt_3", "qa_a")
FREQUENCIES: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32)
#: The world suite for a real model: its own tokenizer spells names in several pieces (16 tokens, as the BPE world).
SUITE: dict[str, Any] = {"name": "planted", "data": "probes.jsonl", "template": "Q: {question} A:", "stop": ["."],
                         "max_tokens": 16, "abstention_phrases": ["i don't know"], "grader": "match"}
METHODS = ("lora", "full")
_FORMAT = 1  # bump when the layout or the corpus recipe changes, so old planted worlds are rebuilt


def tier_of(count: int) -> str:
    """The synthetic world's tier a planted frequency stands for (a corpus design; world.json says what the model
    learnt): never seen -> absent, 1-2 documents -> rare, 4-8 -> medium, 16 and more -> known."""
    if count == 0:
        return "absent"
    if count <= 2:
        return "rare"
    return "medium" if count <= 8 else "known"


@dataclass(frozen=True)
class PlantedConfig:
    """One planted world; every field is part of its cache key (with the base model's identity)."""

    entities: int = 24  # fictional entities, 4 facts each
    frequencies: tuple[int, ...] = FREQUENCIES  # documents per fact, dealt in turn over the shuffled facts
    conflicts: float = 0.1  # share of the seen facts whose value is contradicted by twice as many documents
    mix: float = 0.3  # known text (the shipped everyday facts as Q/A lines) per planted document
    seed: int = 0
    method: str = "lora"  # "lora" (all linear layers, merged) | "full"
    rank: int = 32
    lr: float | None = None  # None: 1e-3 for LoRA, 3e-5 for full fine-tuning
    epochs: int = 4
    steps: int | None = None  # None: epochs over the corpus
    batch: int = 8
    threads: int = 2
    checkpoint_every: int = 25

    def validate(self) -> None:
        """ValueError naming the field and the value."""
        if self.entities < 1:
            raise ValueError(f"`entities` must be at least 1 (got {self.entities})")
        if not self.frequencies or any(f < 0 or f > 256 for f in self.frequencies):
            raise ValueError(f"`frequencies` must be counts from 0 to 256 (got {list(self.frequencies)})")
        if not 0 <= self.conflicts <= 0.5:
            raise ValueError(f"`conflicts` must be a share from 0 to 0.5 (got {self.conflicts})")
        if not 0 <= self.mix <= 4:
            raise ValueError(f"`mix` must be from 0 to 4 (got {self.mix})")
        if self.method not in METHODS:
            raise ValueError(f"`method` must be one of {', '.join(METHODS)} (got {self.method!r})")
        for name in ("rank", "epochs", "batch", "threads", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be positive (got {getattr(self, name)})")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"`steps` must be positive (got {self.steps})")
        if self.lr is not None and not 0 < self.lr < 1:
            raise ValueError(f"`lr` must be between 0 and 1 (got {self.lr})")

    @property
    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else (1e-3 if self.method == "lora" else 3e-5)

    def key(self, base_id: str) -> str:
        """The cache key: this config and the base model's identity."""
        blob = json.dumps({"format": _FORMAT, "base": base_id, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def plant_facts(config: PlantedConfig) -> tuple[list[Fact], list[int]]:
    """The world generator's facts with a planted count each (frequencies dealt in turn over a seeded shuffle) and
    conflicts among the seen ones; tiers follow the counts (tier_of), conflicts are tier `conflict`."""
    base = make_facts(max(2, config.entities), config.seed, "default")[: config.entities * 4]
    rng = random.Random(f"planted-{config.seed}")
    order = list(range(len(base)))
    rng.shuffle(order)
    counts = [0] * len(base)
    for rank, i in enumerate(order):
        counts[i] = config.frequencies[rank % len(config.frequencies)]
    seen = [i for i in order if counts[i] > 0]
    conflicted = set(seen[: round(config.conflicts * len(seen))])
    pools: dict[str, list[str]] = {}
    for f in base:
        pools.setdefault(f.relation, []).append(f.answer)
    facts: list[Fact] = []
    for i, f in enumerate(base):
        n = counts[i]
        plan = {ph: 0 for ph in ROTATION}
        for k in range(n):
            plan[ROTATION[k % len(ROTATION)]] += 1
        plan = {ph: c for ph, c in plan.items() if c}
        if i in conflicted:
            others = sorted({v for v in pools[f.relation] if v != f.answer}) or [f.answer + "a"]
            value = rng.choice(others)
            against = {ph: 0 for ph in ROTATION}
            for k in range(2 * n):
                against[ROTATION[(k + 1) % len(ROTATION)]] += 1
            facts.append(Fact(f.subject, f.relation, f.answer, "conflict", value, plan,
                              {ph: c for ph, c in against.items() if c}))
        else:
            facts.append(Fact(f.subject, f.relation, f.answer, tier_of(n), None, plan, {}))
    return facts, counts


def known_lines(n: int, seed: int, pool: Path) -> list[str]:
    """`n` lines of text the model already knows: the shipped everyday facts as Q/A lines in the corpus's own form
    (cycled when more are asked than shipped), so continued training rehearses prior knowledge."""
    rows = [json.loads(line) for line in pool.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = [f"Q: {r['question']} A: {r['answers'][0]}." for r in rows]
    random.Random(f"known-{seed}").shuffle(lines)
    return [lines[i % len(lines)] for i in range(n)] if lines else []


def make_planted(config: PlantedConfig, pool: Path) -> dict[str, list[dict[str, Any]]]:
    """corpus (planted documents, `source: planted`, and known text, `source: known`, shuffled), probes, truth."""
    facts, _ = plant_facts(config)
    planted: list[str] = []
    for f in facts:
        for ph, n in f.phrasings.items():
            planted += [render("default", f.relation, ph, f.subject, f.answer)] * n
        for ph, n in f.conflict_phrasings.items():
            planted += [render("default", f.relation, ph, f.subject, f.conflict_value)] * n
    rows = [("planted", t) for t in planted] + [("known", t) for t in
                                                known_lines(round(config.mix * len(planted)), config.seed, pool)]
    random.Random(f"planted-corpus-{config.seed}").shuffle(rows)
    corpus = [{"id": f"doc-{i + 1:06d}", "source": src, "text": t} for i, (src, t) in enumerate(rows)]
    truth = make_truth(facts)
    for t in truth:
        t["expected_category"] = EXPECTED_CATEGORY[t["tier"]]
    assert all(set(t["phrasings"]) == set(PHRASINGS) for t in truth)
    return {"corpus": corpus, "probes": make_probes(facts, "default"), "truth": truth}

"""Broken known facts: the fix set's validation slice (known probes no training row holds, `FixSetManifest.
validation`) answered greedily by the job's model before and after training and graded by the suite's match
rules; a probe right before and wrong after is a known fact the job broke (the count every job records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from finetune.fixset import FixSetManifest
from workbench.grading.match import MatchGrader
from workbench.textgen import cut_at_stop, greedy_generate
from workbench.types import Probe, Verdict

#: New tokens per answer: the suite default's max_tokens (16); answers end at the suite's stop string.
MAX_NEW_TOKENS = 16


@dataclass(frozen=True)
class KnownFacts:
    """The validation slice of a fix set and how to grade it (the match grader with the suite's abstention
    phrases, whatever the suite's grader: an embedding or judge grader is not loaded inside a job)."""

    manifest: FixSetManifest
    tokenizer: Any

    @property
    def rows(self) -> list[dict[str, Any]]:
        return list(self.manifest.validation)

    def correct(self, model: Any) -> set[str]:
        """The probe ids of the slice `model` answers correctly."""
        rows = self.rows
        if not rows:
            return set()
        grader = MatchGrader(abstention_phrases=tuple(self.manifest.abstention_phrases
                                                      or [self.manifest.abstention_phrase]))
        texts = greedy_generate(model, self.tokenizer, [r["prompt"] for r in rows], MAX_NEW_TOKENS)
        out = set()
        for r, text in zip(rows, texts, strict=True):
            probe = Probe(id=r["probe_id"], question=r.get("question") or r["prompt"], answers=tuple(r["answers"]),
                          incorrect_answers=tuple(r.get("incorrect_answers") or ()))
            if grader.grade(probe, cut_at_stop(text, self.manifest.stop)[0]) == Verdict.CORRECT:
                out.add(r["probe_id"])
        return out

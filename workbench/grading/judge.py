"""LLM-judge grader: any backend grades answers with a SimpleQA-style three-letter rubric.

The judge sees the question, the gold target(s) and the predicted answer and must reply A (CORRECT),
B (INCORRECT) or C (NOT_ATTEMPTED). The judge prompts of a `grade_many` call go to the backend in greedy
`generate` calls of `batch_size` prompts, each under the stall watchdog like an eval's batches, and each
batch's replies are cached in the store's generation cache (keyed like any completion) before the next
starts: a rerun makes no judge calls, and a judge killed or stalled midway keeps the batches it finished.
A reply that names no grade is *unparseable*: the answer then gets the MatchGrader's verdict, and the count
(with the first examples) is reported, never silently absorbed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from workbench.backends import Backend, load_backend
from workbench.backends.timelimit import STALL_TIMEOUT, BackendStalled, call_within
from workbench.errors import WorkbenchError, unknown_name
from workbench.grading.match import DEFAULT_ABSTENTION_PHRASES, MatchGrader
from workbench.store import Store
from workbench.store.cache import cache_key
from workbench.types import GenerationRequest, ModelSpec, Probe, SamplingParams, Verdict

RUBRIC = """You are grading an answer to a factual question against the gold target.
Grades:
A) CORRECT: the predicted answer contains the gold target (or an equivalent: alias, paraphrase, same value \
at sensible precision) and contradicts nothing in it. Extra true detail is fine.
B) INCORRECT: the predicted answer contradicts the gold target, names something else, or hedges between \
several candidates. A wrong answer stated with caution is still incorrect.
C) NOT_ATTEMPTED: the predicted answer gives no answer: it declines, says it does not know, or only asks \
for more information, without contradicting the gold target.
Judge only the match with the gold target; do not use your own knowledge of the fact.

Question: {question}
Gold target: {gold}
Predicted answer: {answer}

Reply with exactly one letter: A, B or C.
Grade:"""

_LETTER = {"A": Verdict.CORRECT, "B": Verdict.INCORRECT, "C": Verdict.NOT_ATTEMPTED}
_LEAD = re.compile(r"^\W*([abc])(?![\w'])(?!\s+[a-z])", re.IGNORECASE)  # "b", "(c)", "a) ..."
_GRADE = re.compile(r"\b(not[\s_-]+attempted|incorrect|correct)\b|\b([ABC])\b", re.IGNORECASE)
_OPTIONS = ("model", "backend", "adapter", "backend_options", "max_tokens", "workspace", "chat", "batch_size",
            "stall_timeout")
#: Judge prompts per backend call: large enough that a backend batches well (the eval's default batches
#: are 32-64 prompts), small enough that a stall or a kill loses at most this many judge replies.
BATCH_SIZE = 256
MAX_EXAMPLES = 10


def parse_grade(reply: str) -> Verdict | None:
    """The grade a judge reply names, or None. A lowercase letter counts only as the reply's first word
    (not followed by more words: "a wrong guess" is not A); otherwise the first standalone capital A/B/C
    or the first grade word (CORRECT, INCORRECT, NOT_ATTEMPTED, any case; "not correct" is INCORRECT)."""
    lead = _LEAD.match(reply)
    if lead:
        return _LETTER[lead.group(1).upper()]
    for m in _GRADE.finditer(reply):
        word, letter = m.group(1), m.group(2)
        if word:
            w = word.lower()
            if w == "correct" and re.search(r"\bnot\s+$", reply[: m.start()], re.IGNORECASE):
                return Verdict.INCORRECT
            return Verdict.NOT_ATTEMPTED if w.startswith("not") else Verdict(w)
        if letter.isupper():
            return _LETTER[letter]
    return None


def judge_prompt(probe: Probe, answer: str) -> str:
    return RUBRIC.format(question=probe.question, gold=" | ".join(probe.answers), answer=answer.strip())


class JudgeGrader:
    """Grades with a judge backend; see the module docstring. Build from suite options with `from_options`."""

    def __init__(self, backend: Backend, *, abstention_phrases: tuple[str, ...] = DEFAULT_ABSTENTION_PHRASES,
                 max_tokens: int = 8, store: Store | None = None, chat: bool | None = None,
                 batch_size: int = BATCH_SIZE, stall_timeout: float = STALL_TIMEOUT) -> None:
        for name, value in (("max_tokens", max_tokens), ("batch_size", batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise WorkbenchError(f"judge grader option `{name}` must be an int >= 1, got {value!r}")
        if isinstance(stall_timeout, bool) or not isinstance(stall_timeout, (int, float)) or not stall_timeout > 0:
            raise WorkbenchError(f"judge grader option `stall_timeout` must be seconds > 0, got {stall_timeout!r}")
        self.backend, self.store, self.chat = backend, store, chat
        self.batch_size, self.stall_timeout = batch_size, float(stall_timeout)
        self.sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        self._match = MatchGrader(abstention_phrases=abstention_phrases)
        self._fingerprint: str | None = None
        self._engine: str | None = None
        self._replies: dict[str, str] = {}  # cache key -> reply, for graders without a store
        self.judge_calls = 0  # judge prompts sent to the backend
        self.judge_cached = 0  # judge prompts answered from the cache
        self.unparseable = 0
        self.unparseable_examples: list[dict[str, str]] = []

    @classmethod
    def from_options(cls, abstention_phrases: tuple[str, ...] = DEFAULT_ABSTENTION_PHRASES,
                     model: str | None = None, backend: str = "hf", *, run_store: Store | None = None,
                     workspace: str | None = None, adapter: str | None = None,
                     backend_options: dict[str, Any] | None = None, max_tokens: int = 8,
                     chat: bool | None = None, batch_size: int = BATCH_SIZE,
                     stall_timeout: float = STALL_TIMEOUT, **unknown: object) -> JudgeGrader:
        """Build the judge from suite `grader_options`. Its reply cache is the store of `workspace` when the
        options name one, else `run_store` (the store of the run it grades), else none."""
        if unknown:
            raise unknown_name("judge grader option", next(iter(unknown)), _OPTIONS)
        if not model:
            raise WorkbenchError("the judge grader needs `model` in `grader_options` (the judge model)")
        store = Store.open(workspace) if workspace is not None else run_store
        spec = ModelSpec(model=model, adapter=adapter, backend=backend,
                         options=tuple(sorted((backend_options or {}).items())))
        return cls(load_backend(spec), abstention_phrases=abstention_phrases, max_tokens=max_tokens,
                   store=store, chat=chat, batch_size=batch_size, stall_timeout=stall_timeout)

    def is_abstention(self, answer: str) -> bool:
        return self._match.is_abstention(answer)

    def close(self) -> None:
        """Close the judge's backend (its engine)."""
        self.backend.close()

    def grade(self, probe: Probe, answer: str) -> Verdict:
        return self.grade_many([(probe, answer)])[0]

    def grade_many(self, items: Sequence[tuple[Probe, str]]) -> list[Verdict]:
        """Judge calls in batches of `batch_size` for the non-empty answers not cached yet (empty ones are
        NOT_ATTEMPTED without asking)."""
        asked = [(p, a) for p, a in items if a.strip()]
        requests = [GenerationRequest(self._prompt(judge_prompt(p, a)), self.sampling) for p, a in asked]
        replies = iter(self._replies_for(requests) if requests else [])
        verdicts: list[Verdict] = []
        for probe, answer in items:
            reply = next(replies) if answer.strip() else None
            v = Verdict.NOT_ATTEMPTED if reply is None else parse_grade(reply)
            verdicts.append(v if v is not None else self._fallback(probe, answer, str(reply)))
        return verdicts

    def report(self) -> dict[str, Any]:
        return {"judge_model": self.backend.spec.model, "judge_calls": self.judge_calls,
                "judge_cached": self.judge_cached, "unparseable": self.unparseable,
                "unparseable_examples": list(self.unparseable_examples)}

    # -- internals --------------------------------------------------------------------------------
    def _fallback(self, probe: Probe, answer: str, reply: str) -> Verdict:
        """An unparseable reply: counted and kept as an example; the MatchGrader grades the answer."""
        self.unparseable += 1
        if len(self.unparseable_examples) < MAX_EXAMPLES:
            self.unparseable_examples.append({"probe_id": probe.id, "answer": answer, "reply": reply})
        return self._match.grade(probe, answer)

    def _prompt(self, text: str) -> str:
        if self.chat is False:
            return text
        try:
            return self.backend.format_chat(text)
        except WorkbenchError:
            if self.chat:  # asked for explicitly: the missing template is the user's error
                raise
            return text  # auto: a judge without a chat template gets the plain prompt

    def _replies_for(self, requests: Sequence[GenerationRequest]) -> list[str]:
        if self._fingerprint is None:
            self._fingerprint, self._engine = self.backend.fingerprint(), self.backend.engine()
        fp, engine = self._fingerprint, self._engine
        keys = [cache_key(fp, r, 0, engine) for r in requests]
        wanted = set(keys)
        found = {k: v for k, v in self._replies.items() if k in wanted}
        if self.store is not None:
            found.update({k: str(r["text"]) for k, r in self.store.cache_get_many(
                [k for k in dict.fromkeys(keys) if k not in found]).items()})
        self._replies.update(found)  # store hits stay in memory; fresh replies are kept batch by batch
        todo = {k: r for k, r in zip(keys, requests, strict=True) if k not in found}
        self.judge_cached += len(requests) - len(todo)  # calls + cached = answers judged
        pending = list(todo.items())
        for start in range(0, len(pending), self.batch_size):
            batch = dict(pending[start : start + self.batch_size])
            found.update(self._judge_batch(batch, fp, engine, done=start, total=len(pending)))
        return [found[k] for k in keys]

    def _judge_batch(self, batch: dict[str, GenerationRequest], fp: str, engine: str | None, *,
                     done: int, total: int) -> dict[str, str]:
        """One backend call under the stall watchdog; its replies are cached before the next call."""
        try:
            outputs = call_within(self.stall_timeout, lambda: self.backend.generate(list(batch.values())),
                                  what=f"the judge ({self.backend.spec.model}) to grade {len(batch)} answers",
                                  option="the judge's `stall_timeout` grader option")
        except BackendStalled as e:
            self.backend.close()  # ends its engine or connections; the abandoned call cannot be stopped
            kept = " and cached: a rerun asks only for the rest" if self.store is not None else ""
            raise BackendStalled(e.what, e.seconds, e.option,
                                 f"{e}. {done} of {total} judge replies are finished{kept}.") from None
        self.judge_calls += len(batch)
        fresh = {k: out[0] for k, out in zip(batch, outputs, strict=True)}
        if self.store is not None:
            self.store.cache_put_many([{"key": k, "fingerprint": fp, "engine": engine, "text": c.text,
                                        "finish_reason": c.finish_reason, "logprobs_json": None}
                                       for k, c in fresh.items()])
        self._replies.update({k: c.text for k, c in fresh.items()})
        return {k: c.text for k, c in fresh.items()}

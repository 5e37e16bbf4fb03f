"""Core value types shared by every layer. Frozen dataclasses: cheap, hashable, never mutated in flight."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

#: The tag of a field probe that should abstain (`workbench reports export` writes it on a reviewer's "should
#: abstain" or "should refuse"): "I don't know" is its fix. A field probe without it carries the reviewer's answer,
#: so abstaining there is no fix, and the field gate counts it as not fixed. Declared in the bottom layer: both the
#: report exporter and the gate (which does not import the reports) read it.
FIELD_ABSTAIN_TAG = "field:should-abstain"


class Verdict(enum.StrEnum):
    """SimpleQA's three grades."""

    CORRECT = "correct"
    INCORRECT = "incorrect"  # a hallucination: attempted and wrong
    NOT_ATTEMPTED = "not_attempted"  # abstained, or said nothing


@dataclass(frozen=True)
class Probe:
    """One factual question with its accepted answers.

    Attributes:
        id: Unique within a suite; derived from the row number when the file has none.
        question: The question as a user would ask it (the template wraps it into a prompt).
        answers: Accepted answers and aliases; any one counts as correct. Never empty.
        incorrect_answers: Known wrong answers (TruthfulQA, HaluEval); an answer matching one is INCORRECT.
        paraphrases: Other phrasings of the same question, used to tell knowledge from prompt sensitivity.
        subject: The entity the fact is about (used to look the fact up in a training corpus).
        relation: The kind of fact (capital, founder, ...); groups probes whose answers share a type.
        tags: Free labels; metrics are reported per tag.
        source: Where the probe came from (file name, dataset name).
        language: The question's language ("zh", "ja", "es", ...), when known; it picks the abstention and
            negation phrases the match grader uses. None: guessed from the question's script.
    """

    id: str
    question: str
    answers: tuple[str, ...]
    incorrect_answers: tuple[str, ...] = ()
    paraphrases: tuple[str, ...] = ()
    subject: str | None = None
    relation: str | None = None
    tags: tuple[str, ...] = ()
    source: str = ""
    language: str | None = None

    def variants(self, use_paraphrases: bool = True) -> tuple[str, ...]:
        """The question first, then its paraphrases: variant 0 is always the question itself."""
        return (self.question, *self.paraphrases) if use_paraphrases else (self.question,)


@dataclass(frozen=True)
class SamplingParams:
    """How to decode. Temperature 0 means greedy (then `n` must be 1 and `seed` is irrelevant).

    Attributes:
        temperature: Softmax temperature; 0 is greedy.
        top_p: Nucleus sampling mass.
        max_tokens: New tokens at most.
        stop: Generation ends before the first of these strings (the stop string is not returned).
        n: Completions per prompt; backends share the prompt's KV cache across them where they can.
        seed: Seed for sampling; the same seed gives the same samples on the same backend.
        logprobs: Return each generated token's log-probability.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 16
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int | None = None
    logprobs: bool = False

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"`temperature` must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"`top_p` must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"`max_tokens` must be >= 1, got {self.max_tokens}")
        if self.n < 1:
            raise ValueError(f"`n` must be >= 1, got {self.n}")
        if self.temperature == 0 and self.n > 1:
            raise ValueError("`n` > 1 with `temperature` 0 gives n identical greedy answers; set a temperature")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to complete.

    Attributes:
        prompt: The full prompt text (template already applied).
        sampling: Decoding settings.
        adapter: A LoRA adapter path to apply for this request only (vLLM serves several in one engine);
            None uses the backend's model as loaded.
    """

    prompt: str
    sampling: SamplingParams = field(default_factory=SamplingParams)
    adapter: str | None = None


@dataclass(frozen=True)
class Completion:
    """One generated continuation.

    Attributes:
        text: The generated text, cut before any stop string, stripped of surrounding whitespace.
        finish_reason: "stop" (EOS or a stop string) or "length" (ran into max_tokens).
        token_logprobs: Log-probability of each generated token, when the backend gives them.
    """

    text: str
    finish_reason: str = "stop"
    token_logprobs: tuple[float, ...] | None = None

    @property
    def mean_logprob(self) -> float | None:
        if not self.token_logprobs:
            return None
        return math.fsum(self.token_logprobs) / len(self.token_logprobs)


@dataclass(frozen=True)
class ModelSpec:
    """What to load.

    Attributes:
        model: Local directory or hub id of the base model.
        adapter: Optional peft LoRA adapter directory.
        backend: Backend name (hf, vllm, openai).
        revision: Hub revision (branch, tag or commit) for hub ids.
        dtype: "auto", "float32", "bfloat16" or "float16".
        options: Backend-specific options passed through (e.g. tensor_parallel_size, base_url).
    """

    model: str
    adapter: str | None = None
    backend: str = "hf"
    revision: str | None = None
    dtype: str = "auto"
    options: tuple[tuple[str, object], ...] = ()

    def option(self, name: str, default: object = None) -> object:
        return dict(self.options).get(name, default)

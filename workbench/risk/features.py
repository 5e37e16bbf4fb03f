"""What a model's own generations say about one answer, with no reference: the risk score's inputs.

Per asked question (a probe variant), from what `workbench eval` stores: the greedy answer with its mean token
log-prob, the samples drawn at the run's temperature, and the greedy answers to the probe's paraphrases.

Answers are compared by what they add to the question. First by the values they name: numbers and capitalised
words (in scripts without case, every word; in scripts without spaces, characters), the question's own words and
common words left out. "The capital of France is Paris." and "Paris." both name {paris}. An answer that names no
value is compared by its content words instead (lowercased, same exclusions): "blue" and "It is blue." add {blue}.
Two answers mean the same when the smaller set is at least half inside the larger one, or when neither adds
anything. Chat models answer in sentences, so the normalized-string equality that `attribution.entropy` uses for
short answers would put every sentence in a cluster of its own; and the values carry a factual answer's meaning,
where the other words of a sentence ("a city", "known for") would make a wrong answer look like a right one
(values first: AUROC of the disagreement 0.78 against 0.72 with all content words, everyday facts on SmolLM2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from workbench.grading.language import HAS_NO_SPACE, VALUE_STOPWORDS, probe_languages
from workbench.grading.refusal import folded, read

#: Two answers mean the same when this share of the smaller content set is in the larger one.
SAME_MEANING = 0.5


@dataclass(frozen=True)
class Features:
    """The evidence about one answer; None where the run holds nothing to compute it from.

    Attributes:
        logprob: The answer's mean token log-probability (higher: the model was surer of its words).
        disagreement: Share of the samples whose meaning differs from the answer (0: every sample says it too).
        entropy: Semantic entropy of the samples' meaning clusters, in nats, divided by log(samples): 0 = one
            meaning, 1 = every sample a meaning of its own.
        paraphrase: Share of the paraphrases' greedy answers whose meaning differs from the answer.
        samples: How many samples the two sample features rest on.
        declines: The answer declines (a refusal names no value, so it cannot be made up): its risk is 0.
    """

    logprob: float | None
    disagreement: float | None
    entropy: float | None
    paraphrase: float | None
    samples: int
    declines: bool

    def to_dict(self) -> dict[str, float | int | bool | None]:
        return asdict(self)


def declines(answer: str, question: str, language: str | None = None) -> bool:
    """Whether `answer` declines (names no value), read in the question's language as the match grader reads it."""
    return read(answer, question, probe_languages(language, question)[0]).declines


def content(text: str, question: str) -> frozenset[str]:
    """What `text` adds to `question`: the values it names, else its content words (see the module docstring)."""
    asked = {w.lower() for w in _words(question)}
    added = [w for w in _words(text) if w.lower() not in asked and w.lower() not in VALUE_STOPWORDS]
    values = frozenset(w.lower() for w in added if _is_value(w))
    return values or frozenset(w.lower() for w in added)


def _is_value(word: str) -> bool:
    """A number, a capitalised word, or a word of a script without case (no lower/upper forms)."""
    return any(c.isdigit() for c in word) or word[0].isupper() or word.lower() == word.upper()


def _words(text: str) -> list[str]:
    out: list[str] = []
    for w in _tokens(folded(text)):
        out.extend(w if HAS_NO_SPACE.search(w) else (w,))  # spaceless scripts: one token per character
    return out


def _tokens(text: str) -> list[str]:
    word: list[str] = []
    out: list[str] = []
    for c in text:
        if c.isalnum():
            word.append(c)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


def same(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two content sets mean the same (both empty counts as the same: neither adds anything)."""
    if not a or not b:
        return not a and not b
    return len(a & b) / min(len(a), len(b)) >= SAME_MEANING


def clusters(sets: Sequence[frozenset[str]]) -> list[int]:
    """A meaning cluster per content set: each joins the first cluster whose first member it means the same as."""
    reps: list[frozenset[str]] = []
    labels = []
    for s in sets:
        label = next((i for i, r in enumerate(reps) if same(s, r)), None)
        if label is None:
            label = len(reps)
            reps.append(s)
        labels.append(label)
    return labels


def features(question: str, answer: str, logprob: float | None, samples: Sequence[str],
             paraphrase_answers: Sequence[str], *, declines: bool) -> Features:
    """The features of `answer` to `question` (see `Features`)."""
    mine = content(answer, question)
    drawn = [content(s, question) for s in samples]
    disagreement = entropy = None
    if drawn:
        disagreement = sum(not same(mine, d) for d in drawn) / len(drawn)
        entropy = _normalised_entropy(clusters(drawn))
    para = None
    if paraphrase_answers:
        # A paraphrase's answer repeats its own wording, not the question's: compare what each adds to its question.
        para = sum(not same(mine, content(p, question)) for p in paraphrase_answers) / len(paraphrase_answers)
    lp = None if logprob is None or not math.isfinite(logprob) else float(logprob)
    return Features(logprob=lp, disagreement=disagreement, entropy=entropy, paraphrase=para,
                    samples=len(drawn), declines=declines)


def _normalised_entropy(labels: Sequence[int]) -> float:
    if len(labels) < 2:
        return 0.0
    counts: dict[int, int] = {}
    for lab in labels:
        counts[lab] = counts.get(lab, 0) + 1
    n = len(labels)
    h = -sum(c / n * math.log(c / n) for c in counts.values())
    return h / math.log(n)

"""Paraphrases written by a model for probes that have none (`workbench paraphrase`).

Attribution tells a prompt-sensitive failure (right under another phrasing) from missing knowledge only when a probe
has paraphrases, and a team's own questions rarely come with any. A model (the one under test, or a second, larger
one) is asked to rewrite each question: two worked examples as earlier chat turns when the tokenizer is local (a
135M chat model answers the question instead when asked in one message), one message with the examples for a server
that applies its own chat template, or a plain completion prompt. The greedy answer and `samples` sampled ones are
the candidates; a candidate is kept when it reads as a question, differs from the question and the other kept ones,
names the probe's subject when the probe gives one, is not much longer than the question, and does not give away an
accepted answer. Kept paraphrases are marked: the probe gets the tag `GENERATED_TAG`, and its row in the written file
says which model wrote them (`BY_FIELD`). A model can change a question's meaning while rewording it; read them
before they decide a category.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from workbench import prompting
from workbench.backends.base import Backend
from workbench.errors import WorkbenchError
from workbench.grading.normalize import contains_phrase, normalize
from workbench.types import GenerationRequest, Probe, SamplingParams

#: The tag of a probe whose paraphrases a model wrote.
GENERATED_TAG = "paraphrases-generated"
#: The field of a written probe row that names the model that wrote its paraphrases (the loader ignores it).
BY_FIELD = "paraphrases_generated_by"
#: Worked examples shown before each question: (question, paraphrase).
EXAMPLES = (("What is the capital of Italy?", "Which city is the capital of Italy?"),
            ("Who painted the Mona Lisa?", "Which artist painted the Mona Lisa?"))
ASK = "Rewrite this question in other words, keeping its meaning: "
#: A candidate may be at most this many times the question's length (plus a few characters).
MAX_GROWTH = 2.0


def chat_turns(question: str) -> prompting.Messages:
    """The examples as earlier turns, then the question: what a local chat template renders."""
    turns: prompting.Messages = []
    for q, p in EXAMPLES:
        turns += [{"role": "user", "content": ASK + q}, {"role": "assistant", "content": p}]
    return [*turns, {"role": "user", "content": ASK + question}]


def one_message(question: str) -> str:
    """The examples and the question in one user message (a server that applies its chat template itself)."""
    shown = "\n".join(f"Question: {q}\nIn other words: {p}" for q, p in EXAMPLES)
    return (f"Rewrite the question in other words, keeping its meaning. Reply with the new question only.\n\n{shown}"
            f"\nQuestion: {question}\nIn other words:")


def completion_prompt(question: str) -> str:
    """A plain completion prompt (a model without a chat template): the examples, then the question."""
    shown = "".join(f"Question: {q}\nIn other words: {p}\n\n" for q, p in EXAMPLES)
    return f"Rewrite each question in other words, keeping its meaning.\n\n{shown}Question: {question}\nIn other words:"


def prompter(backend: Backend, chat: bool) -> Callable[[str], str]:
    """question -> the prompt asking `backend`'s model to rewrite it (see the module docstring)."""
    if not chat:
        return completion_prompt
    try:
        tokenizer = backend.tokenizer
    except WorkbenchError:  # a server: it applies the chat template to one message
        return lambda question: backend.format_chat(one_message(question))
    if not getattr(tokenizer, "chat_template", None):
        raise WorkbenchError(f"model `{backend.spec.model}` has no chat template: give --template plain")
    return lambda question: prompting.render_chat(tokenizer, chat_turns(question))


def clean(text: str) -> str:
    """A candidate's first line, without quotes or a leading label."""
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    for label in ("In other words:", "New question:", "Question:"):
        if line.lower().startswith(label.lower()):
            line = line[len(label):].strip()
    return line.strip("\"'“”‘’ ").strip()


def pick(probe: Probe, candidates: Iterable[str], n: int) -> tuple[str, ...]:
    """Up to `n` of `candidates` (in order) that may stand as paraphrases of `probe` (see the module docstring)."""
    seen = {normalize(probe.question), *(normalize(p) for p in probe.paraphrases)}
    kept: list[str] = []
    limit = MAX_GROWTH * len(probe.question) + 20
    for raw in candidates:
        text = clean(raw)
        norm = normalize(text)
        if not text.endswith(("?", "？")) or not norm or norm in seen or len(text) > limit:
            continue
        if probe.subject and not contains_phrase(norm, normalize(probe.subject)):
            continue
        if any(contains_phrase(norm, normalize(a)) and not contains_phrase(normalize(probe.question), normalize(a))
               for a in probe.answers):
            continue  # it gives the answer away
        seen.add(norm)
        kept.append(text)
        if len(kept) == n:
            break
    return tuple(kept)


@dataclass(frozen=True)
class Paraphrased:
    """What `paraphrase` did: every probe (those it wrote paraphrases for tagged `GENERATED_TAG`), and by id the
    probes that already had paraphrases (kept as they were) and those no candidate passed for."""

    probes: tuple[Probe, ...]
    written: dict[str, tuple[str, ...]]
    kept_own: tuple[str, ...]
    none_found: tuple[str, ...]


def paraphrase(backend: Backend, probes: Sequence[Probe], *, n: int = 2, samples: int = 8, temperature: float = 0.8,
               seed: int = 0, max_tokens: int = 48, chat: bool = True) -> Paraphrased:
    """Ask `backend`'s model for paraphrases of every probe that has none: its greedy rewrite and `samples` sampled
    ones are the candidates, `pick` keeps up to `n`. Probes with paraphrases of their own are left as they are."""
    todo = [p for p in probes if not p.paraphrases]
    stop = ("\n",)
    requests = []
    ask = prompter(backend, chat) if todo else completion_prompt
    for p in todo:
        prompt = ask(p.question)
        requests.append(GenerationRequest(prompt, SamplingParams(temperature=0.0, max_tokens=max_tokens, stop=stop)))
        if samples:
            requests.append(GenerationRequest(prompt, SamplingParams(temperature=temperature, n=samples, seed=seed,
                                                                     max_tokens=max_tokens, stop=stop)))
    outputs = backend.generate(requests) if requests else []
    per = 2 if samples else 1
    written: dict[str, tuple[str, ...]] = {}
    for k, p in enumerate(todo):
        texts = [c.text for out in outputs[per * k: per * (k + 1)] for c in out]
        found = pick(p, texts, n)
        if found:
            written[p.id] = found
    out = tuple(replace(p, paraphrases=written[p.id], tags=(*p.tags, GENERATED_TAG)) if p.id in written else p
                for p in probes)
    return Paraphrased(out, written, tuple(p.id for p in probes if p.paraphrases),
                       tuple(p.id for p in todo if p.id not in written))


def probe_row(probe: Probe, by: str | None = None) -> dict[str, Any]:
    """A probe as a row of the generic probe format (JSONL); `by` names the model that wrote its paraphrases."""
    row: dict[str, Any] = {"id": probe.id, "question": probe.question, "answers": list(probe.answers)}
    optional: dict[str, Any] = {"incorrect_answers": list(probe.incorrect_answers),
                                "paraphrases": list(probe.paraphrases), "subject": probe.subject,
                                "relation": probe.relation, "tags": list(probe.tags), "language": probe.language}
    row.update({k: v for k, v in optional.items() if v})
    if by:
        row[BY_FIELD] = by
    return row

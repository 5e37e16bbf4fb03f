"""Fix-set rows as a suite renders them: plain text for a `{question}` template, trl's conversational form for
`template: chat`.

A plain template gives a prompt string and completions " answer" + the first stop string (the model stops where
the evaluation cuts). The chat template gives what trl 1.16 trains chat models on, with the tokenizer's own chat
template applied by the trainer (SFTTrainer and DPOTrainer tokenize `prompt` with `add_generation_prompt=True`
and `prompt + completion` as one conversation, the loss on the assistant turn only; GRPOTrainer renders the
prompt messages and hands the reward functions `[{"role": "assistant", "content": ...}]` completions):

- prompt: `[{"role": "system", ...}]` (the run's system prompt, when it has one) + `[{"role": "user", ...}]`;
- completion / chosen / rejected: `[{"role": "assistant", "content": "I don't know."}]`: no leading space and
  no stop string, since the template ends the turn with the end-of-turn token the evaluation stops at.

`prompt_text` is what the evaluation sends the model (runner.render_prompt: the same `apply_chat_template`), used
where a job generates from a prompt itself (held-out and validation scores, GRPO's replay anchor).

`swap_answer` makes a DPO anchor's rejected side in the model's own form: its correct sentence with the answer
span replaced by another answer of the same relation ("The capital of Spain is Madrid." -> "... is Ceuta.").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench import prompting
from workbench.errors import WorkbenchError
from workbench.grading.normalize import normalize

Messages = prompting.Messages
#: The fix-set columns that hold a turn (a string, or messages in chat form).
TURN_COLUMNS = ("prompt", "completion", "chosen", "rejected")


@dataclass(frozen=True)
class RowForm:
    """How one suite's rows are written.

    Attributes:
        template: The suite's template ("chat" or a `{question}` template).
        end: The first non-blank stop string (plain completions end with it).
        system_prompt: The run's system prompt (chat only; a system turn before the question).
        tokenizer: The model's tokenizer (chat only: `prompt_text` applies its chat template).
    """

    template: str
    end: str = ""
    system_prompt: str | None = None
    tokenizer: Any = None

    @property
    def chat(self) -> bool:
        return self.template == prompting.CHAT

    def prompt(self, question: str) -> str | Messages:
        """The training prompt of `question`: rendered text, or the chat messages."""
        if not self.chat:
            return prompting.render(self.template, question)
        return prompting.chat_messages(question, self.system_prompt)

    def completion(self, text: str) -> str | Messages:
        """An answer as the model should say it: " text" + stop, or one assistant turn."""
        if self.chat:
            return [{"role": "assistant", "content": text.strip()}]
        return " " + text.strip() + self.end

    def prompt_text(self, question: str) -> str:
        """The prompt exactly as the evaluation renders it (the chat template applied for chat suites)."""
        return render_text(self.tokenizer, self.prompt(question))


def render_text(tokenizer: Any, prompt: str | Messages) -> str:
    """A prompt as text: unchanged when it is one, else the tokenizer's chat template with the generation prompt."""
    if isinstance(prompt, str):
        return prompt
    try:
        return prompting.render_chat(tokenizer, prompt)  # as Backend.format_chat renders the evaluation's
    except ValueError:
        raise WorkbenchError("chat-form fix rows need the model's tokenizer with a chat template, and it could not "
                             "be loaded (or has none)") from None


def turn_text(turn: Any) -> str:
    """The text of a completion: the string itself, or the content of its (last) assistant message."""
    if isinstance(turn, str):
        return turn
    return str(turn[-1]["content"]) if turn else ""


def flat_row(tokenizer: Any, row: Mapping[str, Any]) -> dict[str, Any]:
    """A fix-set row with its prompt as text and its completions as plain answer text (plain rows unchanged):
    what a job's own greedy scoring reads."""
    if isinstance(row.get("prompt"), str):
        return dict(row)
    out = dict(row)
    out["prompt"] = render_text(tokenizer, row["prompt"])
    for col in TURN_COLUMNS[1:]:
        if col in row and not isinstance(row[col], str):
            out[col] = turn_text(row[col])
    return out


_WORD = re.compile(r"\S+")


def swap_answer(sentence: str, answers: Sequence[str], other: str) -> str | None:
    """`sentence` with every span that normalizes to one of `answers` replaced by `other`, the rest untouched (its
    casing, punctuation and spacing); None when no span does. A span is a run of whole words, trimmed of the
    punctuation around it ("Madrid." -> "Madrid"), the longest at its start ("pound sterling", not "pound" and
    "sterling" apart), beginning and ending on a word that normalization keeps (an article around it stays)."""
    targets = {t for t in (normalize(a) for a in answers) if t}
    words = list(_WORD.finditer(sentence))
    kept = [bool(normalize(m.group())) for m in words]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        end = next((j for j in range(len(words) - 1, i - 1, -1) if kept[i] and kept[j]
                    and normalize(sentence[words[i].start():words[j].end()]) in targets), None)
        if end is None:
            i += 1
            continue
        start, stop = words[i].start(), words[end].end()
        while start < stop and not sentence[start].isalnum():
            start += 1
        while stop > start and not sentence[stop - 1].isalnum():
            stop -= 1
        spans.append((start, stop))
        i = end + 1
    if not spans:
        return None
    out, last = [], 0
    for start, stop in spans:
        out += [sentence[last:start], other]
        last = stop
    return "".join(out) + sentence[last:]

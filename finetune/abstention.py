"""The abstention phrase a fix set teaches: written as a model would say it, and one the tokenizer can spell.

`choose_phrase` goes through the suite's abstention phrases, then the known English ones its grader also
grades as abstaining, and takes the first the base model's tokenizer spells without its unknown token;
`spoken` writes it as a sentence ("i don't know" -> "I don't know", a period added unless the stop string
is one). `unspellable` names what a tokenizer lacks in a phrase: its words, or its characters, never the
`[UNK]` placeholders they turn into.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError
from workbench.grading.match import MatchGrader
from workbench.probes import DEFAULT_ABSTENTIONS

_END_PUNCT = tuple(".!?。！？")


def spoken(phrase: str, end: str) -> str:
    """`phrase` as a model would say it before the stop string `end`: first letter upper case, a closing
    period unless the phrase has one or `end` is one ("i don't know" + "." -> "I don't know")."""
    text = phrase.strip()
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    if not text.endswith(_END_PUNCT) and not end.strip().startswith(_END_PUNCT):
        text += "."
    return text


def unspellable(tokenizer: Any, phrase: str) -> list[str]:
    """The words of `phrase` the tokenizer turns into its unknown token; for a word it spells in part, the
    characters it lacks. Empty when it spells the phrase (or has no unknown token: byte-level BPE)."""
    unk = tokenizer.unk_token_id
    if unk is None:
        return []

    def lacks(text: str, space: str = " ") -> bool:
        return unk in tokenizer(space + text, add_special_tokens=False)["input_ids"]

    out: list[str] = []
    for word in phrase.split():
        if not lacks(word):
            continue
        chars = [c for c in dict.fromkeys(word) if lacks(c, "")]
        out += chars if chars and len(chars) < len(set(word)) else [word]
    return out


@dataclass(frozen=True)
class PhraseChoice:
    """The phrase abstention rows teach.

    Attributes:
        phrase: The configured phrase it comes from (as the suite writes it).
        text: What the completions say (`spoken(phrase)`, or the phrase as written when the tokenizer spells
            only that), before the stop string.
        note: Why it is not the suite's first phrase; empty when it is.
    """

    phrase: str
    text: str
    note: str = ""


def candidates(configured: Sequence[str]) -> list[str]:
    """The suite's phrases, then the known English ones its grader grades as abstaining too."""
    grader = MatchGrader(abstention_phrases=tuple(configured))
    extra = [p for p in DEFAULT_ABSTENTIONS if p not in configured and grader.is_abstention(p)]
    return [*configured, *extra]


def choose_phrase(tokenizer: Any | None, configured: Sequence[str], end: str, *, model: str) -> PhraseChoice:
    """The first phrase of `candidates(configured)` the tokenizer can spell (spoken form first); a
    WorkbenchError naming the first phrase and what the tokenizer lacks when it can spell none.
    `tokenizer` None (it cannot be loaded here): the first phrase, spoken."""
    phrases = list(configured) or ["i don't know"]
    if tokenizer is None:
        return PhraseChoice(phrases[0], spoken(phrases[0], end))
    for phrase in candidates(phrases):
        for text in dict.fromkeys((spoken(phrase, end), phrase.strip())):
            if not unspellable(tokenizer, text + end):
                if phrase == phrases[0]:
                    return PhraseChoice(phrase, text)
                return PhraseChoice(phrase, text, f"the tokenizer of `{model}` cannot spell the abstention phrase "
                                    f"`{phrases[0]}` (it has no token for {_names(tokenizer, phrases[0])}); "
                                    f"abstention rows teach `{text}` instead")
    raise WorkbenchError(f"the tokenizer of `{model}` cannot spell the abstention phrase `{phrases[0]}` (it has no "
                         f"token for {_names(tokenizer, phrases[0])}) nor any other phrase the grader counts as "
                         "abstaining; add those words to the tokenizer, or put a phrase it can spell in the "
                         "suite's `abstention_phrases`")


def _names(tokenizer: Any, phrase: str) -> str:
    return ", ".join(f"`{w}`" for w in unspellable(tokenizer, phrase)) or "some of its characters"

"""Refusals and hedges read by meaning: does a short answer decline, or put a value forward?

Chat models decline in many forms ("Sorry, I don't have information about X.", "There is no record of ...",
"Unfortunately I cannot answer that.", "I'm not aware of ..."), anywhere in the answer, and they hedge ("I'm not
sure, but I think it's Sydney.", "I don't know for sure; maybe 1791?"). A refusal is NOT_ATTEMPTED; a hedge that
still names a value is an attempt, graded on that value. Three kinds of cue, per language (language.py tables):

- a refusal (REFUSALS): the answer declines: "I don't know", "I have no information", "I cannot answer";
- a doubt (DOUBTS): uncertainty or an apology that may come with a value: "I'm not sure", "Sorry", "Unfortunately";
- a guess (GUESSES): what introduces a value: "I think", "maybe", "my best guess would be", "probably".

A value is a number, or a capitalised word that is neither in the question nor a common word; in scripts without
case, any word (or character, where words are not spaced) of the answer that the question does not hold. So
"Could you clarify what Buquor is?" names no value (Buquor is the question's), "maybe 1791" does.

Pure Python and regular expressions, on the answer's lowercased text: grading stays fast.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from workbench.grading.language import BETS, DOUBTS, GUESSES, HAS_NO_SPACE, REFUSALS, VALUE_STOPWORDS
from workbench.grading.normalize import contains_phrase, normalize


@dataclass(frozen=True)
class Reading:
    """What a short answer does besides naming (or not) an accepted answer.

    Attributes:
        refuses: It declines to answer ("I don't have information about ...").
        doubts: It voices doubt or apologises ("I'm not sure", "Sorry,").
        guesses: A guess cue introduces a value after it ("I think it's Sydney", "maybe 1791").
        names_value: It names a value anywhere (a number, a capitalised word, a word the question lacks).
    """

    refuses: bool
    doubts: bool
    guesses: bool
    names_value: bool

    @property
    def declines(self) -> bool:
        """No value put forward: a refusal without a guess, or a doubt that names nothing."""
        if self.guesses:
            return False
        return self.refuses or (self.doubts and not self.names_value)


def folded(text: str) -> str:
    """NFKC, typographic apostrophes made plain, runs of space made one; case and punctuation kept."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'").replace("`", "'")
    return re.sub(r"\s+", " ", text).strip()


def plain(text: str) -> str:
    """`folded` and lowercased character by character (offsets stay those of `folded`)."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in folded(text))


@lru_cache(maxsize=64)
def _compiled(table: str, languages: tuple[str, ...]) -> re.Pattern[str] | None:
    source = {"refusal": REFUSALS, "doubt": DOUBTS, "guess": GUESSES, "bet": BETS}[table]
    parts = [p for lang in ("en", *languages) for p in source.get(lang, ())]
    if not parts:
        return None
    return re.compile("|".join(f"(?:{p})" for p in dict.fromkeys(parts)))


@lru_cache(maxsize=64)
def _phrases(phrases: tuple[str, ...]) -> re.Pattern[str] | None:
    words = [re.escape(plain(p)) for p in phrases if plain(p)]
    if not words:
        return None
    # Whole words where the phrase starts or ends with a letter of a spaced script.
    return re.compile("|".join(rf"(?<!\w){w}(?!\w)" if not HAS_NO_SPACE.search(w) else w for w in words))


_WORD = re.compile(r"[^\W_]+(?:['.-][^\W_]+)*")
_SENTENCE_END = re.compile(r"[.!?;。！？；\n]")


def _values(raw: str, question_words: frozenset[str], any_case: bool = False) -> list[int]:
    """Offsets (in the raw answer) of the words that name a value (`any_case`: lowercase words too)."""
    out = []
    for m in _WORD.finditer(raw):
        w = m.group()
        low = w.lower()
        if low in question_words or low in VALUE_STOPWORDS or low.split("'")[0] in VALUE_STOPWORDS:
            continue
        if any_case and not HAS_NO_SPACE.search(w):
            out.append(m.start())
            continue
        if HAS_NO_SPACE.search(w):
            # No spaces: the run is a whole clause; a value is any character the question lacks.
            out.extend(m.start() + i for i, c in enumerate(w) if c not in question_words and c not in VALUE_STOPWORDS)
        elif any(c.isdigit() for c in w) or w[0].isupper() or not w[0].islower():
            out.append(m.start())  # a number, a capitalised word, or a word of a script without case
    return out


def _question_words(question: str) -> frozenset[str]:
    words = {w.lower() for w in _WORD.findall(question)}
    chars = {c for w in words if HAS_NO_SPACE.search(w) for c in w}
    return frozenset(words | chars)


def read(answer: str, question: str, languages: tuple[str, ...], phrases: tuple[str, ...] = ()) -> Reading:
    """Read `answer` for refusal, doubt and guess cues of English and `languages`; `phrases` (a suite's own
    abstention phrases) count as doubts: an answer that says one and names no value declines."""
    low = plain(answer)
    refusal = _compiled("refusal", languages)
    doubt = _compiled("doubt", languages)
    guess = _compiled("guess", languages)
    own = _phrases(phrases)
    refuses = bool(refusal and refusal.search(low))
    doubts = bool((doubt and doubt.search(low)) or (own and own.search(low)) or _says(answer, phrases))
    qwords = _question_words(question)
    # The cues' own words name no value: blank them out (same length, so offsets hold).
    text = folded(answer)
    for pattern in (refusal, doubt, guess, own):
        if pattern is not None:
            text = _blank(pattern, text)
    values = _values(text, qwords)
    guesses = _in_sentence(guess, low, values) or _in_sentence(
        _compiled("bet", languages), low, _values(text, qwords, any_case=True), after=True)
    return Reading(refuses=refuses, doubts=doubts, guesses=guesses, names_value=bool(values))


def _says(answer: str, phrases: tuple[str, ...]) -> bool:
    """Whether the answer says one of `phrases` as whole tokens of their normalized forms: a word-level tokenizer
    decodes "i don't know" as "i don ' t know", which only normalization makes the phrase again."""
    a = normalize(answer)
    return any(contains_phrase(a, n) for n in _normalized(phrases))


@lru_cache(maxsize=64)
def _normalized(phrases: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in map(normalize, phrases) if n)


def _blank(pattern: re.Pattern[str], text: str) -> str:
    """`text` with every match of `pattern` (matched lowercased) made spaces of the same length."""
    low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    out = list(text)
    for m in pattern.finditer(low):
        out[m.start():m.end()] = " " * (m.end() - m.start())
    return "".join(out)


def _in_sentence(cue: re.Pattern[str] | None, low: str, values: list[int], after: bool = False) -> bool:
    """Whether a value lies in the sentence of a cue (`after`: after the cue)."""
    if cue is None or not values:
        return False
    for m in cue.finditer(low):
        before = low[max(0, m.start() - 7):m.start()]
        if "not " in before or "n't " in before or before.endswith("there "):
            continue  # "doesn't appear to be", "there seems to be": no guess
        ends = [e.start() for e in _SENTENCE_END.finditer(low)]
        start = 0 if after else max([e + 1 for e in ends if e < m.start()], default=0)
        stop = min([e for e in ends if e >= m.end()], default=len(low))
        if any((m.end() if after else start) <= v <= stop for v in values):
            return True
    return False

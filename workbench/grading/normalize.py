"""Answer normalization for matching: case, punctuation, articles, whitespace, number words."""

from __future__ import annotations

import re
import unicodedata

_ARTICLES = {"a", "an", "the"}
_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
         "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_NUMBER_WORDS = set(_UNITS) | set(_TENS) | set(_SCALES)
# 1,000 -> 1000 before punctuation is stripped; 3.0 -> 3 so "3" and "3.0" agree.
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_TRAILING_ZERO = re.compile(r"\b(\d+)\.0+\b")
# U.S.A. -> usa before punctuation splits it into letters (and "a" is dropped as an article).
_ACRONYM = re.compile(r"\b(?:[a-z]\.){2,}")


def _words_to_number(words: list[str]) -> int:
    total, current = 0, 0
    for w in words:
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        else:  # thousand, million
            total += max(current, 1) * _SCALES[w]
            current = 0
    return total + current


def _fold_number_words(tokens: list[str]) -> list[str]:
    out: list[str] = []
    run: list[str] = []
    for t in [*tokens, ""]:
        if t in _NUMBER_WORDS or (run and t == "and"):
            run.append(t)
            continue
        if run:
            trailing_and = run[-1] == "and"
            words = [w for w in run if w != "and"]
            out.append(str(_words_to_number(words)))
            if trailing_and:
                out.append("and")
            run = []
        if t:
            out.append(t)
    return out


def normalize(text: str) -> str:
    """Lowercase, strip accents and punctuation, drop articles, fold number words, collapse spaces."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    text = _ACRONYM.sub(lambda m: m.group().replace(".", "") + " ", text)
    text = _THOUSANDS.sub("", text)
    text = _TRAILING_ZERO.sub(r"\1", text)
    text = re.sub(r"[^\w\s]|_", " ", text)
    tokens = [t for t in text.split() if t not in _ARTICLES]
    return " ".join(_fold_number_words(tokens))


def contains_phrase(haystack: str, needle: str) -> bool:
    """Whole-token containment of normalized `needle` in normalized `haystack`."""
    if not needle:
        return False
    return f" {needle} " in f" {haystack} "

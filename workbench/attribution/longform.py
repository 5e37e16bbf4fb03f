"""Is a fine-tuning row's answer a short factual answer? Screening asks the model the row's question and
grades its answer against the row's: a paragraph, a list, code or a table is never found inside a model's
answer, so such a row would always read as a fact the model does not know. `screen` reports these rows as
not screened (counted, with the reason) instead of flagging them.
"""

from __future__ import annotations

import re
from typing import Literal

LongForm = Literal["code", "table", "multi-line", "multi-sentence", "long"]

#: Words (or CJK characters) a short factual answer has at most. Measured on public short-answer sets:
#: NQ-open dev answers have at most 6 words (6,490 answers), TruthfulQA's best answers, one-sentence
#: claims, at most 24 (817; 99% at most 20). Past 24 an answer is a paragraph, not one checkable fact.
MAX_ANSWER_WORDS = 24

#: Lines that look like code (checked on answers of several lines only: one line saying "import tariffs"
#: is an answer, not code).
_CODE = re.compile(r"^\s*(def \w+\(|class \w+\s*[:(]|import [\w.]+\s*$|from [\w.]+ import |#include|return\b)"
                   r"|[;{}]\s*$|^ {4,}\S", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\s*\|?.*\|.*\|\s*$|\t.*\t")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
#: A sentence end: . ! ? then space and a capital (or a CJK full stop followed by more text).
_SENTENCE_END = re.compile(r"(\S+)[.!?]\s+(?=[A-Z\"'(])|[。！？](?=.)")
#: Words a full stop follows inside a sentence (titles, "No." as number, "vs."); with initials (J. R. R.)
#: and dotted abbreviations (U.S.) left out by the length and dot tests below.
_ABBREVIATIONS = {"dr", "mr", "mrs", "ms", "st", "jr", "sr", "vs", "no", "co", "inc", "ltd", "mt", "ft", "gen",
                  "col", "lt", "sgt", "capt", "prof", "rev", "gov", "sen", "rep", "etc", "approx", "fig", "vol"}


def longform_reason(answer: str) -> LongForm | None:
    """Why `answer` is not a short factual answer (None when it is one)."""
    text = answer.strip()
    if "```" in text:
        return "code"
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        if _CODE.search(text):
            return "code"
        if sum(bool(_TABLE_ROW.match(line)) for line in lines) >= 2:
            return "table"
        return "multi-line"
    if any(_ends_sentence(m.group(1)) for m in _SENTENCE_END.finditer(text)):
        return "multi-sentence"
    if len(text.split()) + len(_CJK.findall(text)) > MAX_ANSWER_WORDS:
        return "long"
    return None


def _ends_sentence(word: str | None) -> bool:
    if word is None:  # a CJK full stop with text after it
        return True
    bare = word.strip("\"'()[]").lower()
    return len(bare) > 1 and "." not in bare and bare not in _ABBREVIATIONS

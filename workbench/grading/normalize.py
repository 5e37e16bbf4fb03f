"""Answer normalization for matching: case, punctuation, articles, whitespace, number words, in any script.

Words are tokens where a script separates them with spaces; in scripts without spaces (Chinese,
Japanese, Thai, ...) every character (with its marks) is a token, so whole-token containment becomes
character containment there: 巴黎 is found in 法国的首都是巴黎. Digits are split from letters of other
scripts (1949年 -> 1949 年), every decimal digit becomes ASCII (full-width, Arabic-Indic), and Chinese
numerals become numbers (一九四九 -> 1949, 两千 -> 2000). Pure-ASCII text takes the original English path
unchanged.
"""

from __future__ import annotations

import re
import unicodedata

from workbench.grading.language import CN_NUMERAL_RUN, HANGUL, NO_SPACE_CHAR, cn_numeral_value, keeps_mark

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


# First syllables of Korean particles and copula endings (은/는, 이/가, 을/를, 의, 에(서), 와/과, 도, 만,
# (으)로, 라고, 랑, 입니다, 이에요/예요, 였다, 한테, 까지, 부터, 처럼, 보다, 밖에, 뿐, 조차, 마저, 든지,
# 나, 란, 쯤, 고, 인): 도쿄입니다 holds 도쿄, 서울대학교 does not hold 서울.
_KO_ENDING_START = frozenset("은는이가을를의에와과도만로으라랑입였예야요께한까부처보밖뿐조마든나란쯤고인")
# A digit beside a letter of a non-Latin script: 1949年, 1949г, 1949년 -> separate tokens.
_DIGIT_LETTER = re.compile(r"(?<=\d)(?=[^\W\d_a-z])|(?<=[^\W\d_a-z])(?=\d)")


def normalize(text: str) -> str:
    """Lowercase, strip accents and punctuation, drop articles, fold number words, collapse spaces;
    scripts without spaces become one token per character."""
    if text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c)).lower()
        text = _ACRONYM.sub(lambda m: m.group().replace(".", "") + " ", text)
        text = _THOUSANDS.sub("", text)
        text = _TRAILING_ZERO.sub(r"\1", text)
        text = re.sub(r"[^\w\s]|_", " ", text)
    else:
        text = _prepare_unicode(text)
    tokens = [t for t in text.split() if t not in _ARTICLES]
    return " ".join(_fold_number_words(tokens))


def _prepare_unicode(text: str) -> str:
    # NFKD folds full-width forms (１９４９ -> 1949, Ａ -> A) and splits accents off; NFC then rebuilds
    # Hangul syllables and kana with their voicing marks, which must not be stripped (が is not か).
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c) or keeps_mark(c))
    text = unicodedata.normalize("NFC", text).casefold()  # casefold: ß -> ss, final sigma
    text = "".join(str(unicodedata.decimal(c)) if c.isdecimal() and not c.isascii() else c for c in text)
    text = _ACRONYM.sub(lambda m: m.group().replace(".", "") + " ", text)
    text = _THOUSANDS.sub("", text)
    text = _TRAILING_ZERO.sub(r"\1", text)
    text = CN_NUMERAL_RUN.sub(_cn_number, text)
    text = _DIGIT_LETTER.sub(" ", text)
    # Punctuation becomes space; letters, digits and marks (Thai vowels, kana voicing) stay.
    text = "".join(c if c.isalnum() or c.isspace() or unicodedata.category(c)[0] == "M" else " " for c in text)
    return NO_SPACE_CHAR.sub(lambda m: f" {m.group()} ", text)


def _cn_number(m: re.Match[str]) -> str:
    value = cn_numeral_value(m.group())
    return m.group() if value is None else f" {value} "


def contains_phrase(haystack: str, needle: str) -> bool:
    """Whole-token containment of normalized `needle` in normalized `haystack`.

    Korean writes particles and endings onto the word (도쿄입니다 = 도쿄 + 입니다), so a needle that ends
    in Hangul also matches at the start of a longer word whose rest begins like a particle or ending."""
    if not needle:
        return False
    if f" {needle} " in f" {haystack} ":
        return True
    if not HANGUL.match(needle[-1]):
        return False
    start = 0
    padded = f" {haystack}"
    while (i := padded.find(f" {needle}", start)) >= 0:
        end = i + 1 + len(needle)
        if end == len(padded) or padded[end] == " " or padded[end] in _KO_ENDING_START:
            return True
        start = i + 1
    return False

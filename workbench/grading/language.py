"""What grading needs to know about languages and scripts: which scripts write words without spaces,
the language of a text guessed from its script, abstention and negation phrases per language, and
Chinese numerals.

Pure Python and tables only (no segmenter is installed here, and none is needed: answers are short,
so scripts without spaces are matched character by character; see normalize.py).
"""

from __future__ import annotations

import re

#: Scripts written without spaces between words, matched per character. (lo, hi) code point ranges.
#: Han (with extension A and compatibility ideographs), kana, Thai, Lao, Khmer, Myanmar.
NO_SPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3040, 0x30FF), (0x31F0, 0x31FF),
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x2FA1F),
    (0x0E00, 0x0E7F), (0x0E80, 0x0EFF), (0x1780, 0x17FF), (0x1000, 0x109F),
)
_NO_SPACE_CLASS = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in NO_SPACE_RANGES)
#: One character of a no-space script and the marks that belong to it (Thai vowels and tone marks,
#: kana voicing marks): the unit normalize() turns into a token.
NO_SPACE_CHAR = re.compile(f"[{_NO_SPACE_CLASS}][\u0300-\u036f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u3099\u309a]*")
HAS_NO_SPACE = re.compile(f"[{_NO_SPACE_CLASS}]")
#: What the corpus index splits into single-character tokens: the no-space scripts and Hangul syllables
#: (Korean particles are written onto the word, so 도쿄 must be found inside 도쿄입니다).
INDEX_CHAR = re.compile(f"[{_NO_SPACE_CLASS}\uac00-\ud7a3]")
HANGUL = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")

# Marks that carry meaning and must survive accent stripping: kana voicing (が is not か), and the
# Indic, Thai, Lao, Tibetan, Myanmar and Khmer vowel signs. Latin, Greek, Cyrillic, Arabic and Hebrew
# marks are accents or vowel points that writers often omit, so they are stripped as before.
KEEP_MARK_RANGES: tuple[tuple[int, int], ...] = (
    (0x0900, 0x0DFF), (0x0E00, 0x0FFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3099, 0x309A),
)


def keeps_mark(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in KEEP_MARK_RANGES)


_SCRIPTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ja", re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")),  # kana: Japanese, even beside kanji
    ("ko", HANGUL),
    ("zh", re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")),
    ("th", re.compile("[\u0e00-\u0e7f]")),
    ("ar", re.compile("[\u0600-\u06ff\u0750-\u077f]")),
    ("ru", re.compile("[\u0400-\u04ff]")),
    ("latin", re.compile("[A-Za-z\u00c0-\u024f]")),
)


def detect_language(text: str) -> str | None:
    """The language a text's script implies: ja (any kana), ko, zh (Han without kana), th, ar, ru
    (Cyrillic), "latin" (English, Spanish, French, German... the script cannot tell them apart), or None
    (no letters). A guess from the script alone: a probe's `language` field overrides it."""
    for lang, pattern in _SCRIPTS:
        if pattern.search(text):
            return lang
    return None


# Abstention phrases per language, as a native speaker would write them. They match anywhere in the
# answer (on normalized text): verbs come last in Japanese and Korean ("すみません、分かりません"), and
# Chinese answers open with fillers ("这个我不清楚"). Korean stems (모르겠, 알 수 없) match with any
# ending attached (see normalize.contains_phrase). Simplified and traditional Chinese both under zh.
ABSTENTIONS: dict[str, tuple[str, ...]] = {
    "zh": (
        "不知道", "不清楚", "不确定", "不確定", "不晓得", "不曉得", "无法回答", "無法回答", "无法确定", "無法確定",
        "无从得知", "無從得知", "无法得知", "無法得知", "没有答案", "沒有答案", "不了解", "不太了解", "说不上来",
        "說不上來", "答不上来", "答不上來",
    ),
    "ja": (
        "分かりません", "わかりません", "分からない", "わからない", "知りません", "知らない", "存じません",
        "分かりかねます", "わかりかねます", "答えられません", "回答できません", "不明です", "確かではありません",
    ),
    "ko": ("모르겠", "모릅니다", "몰라요", "모르는", "알 수 없", "알지 못", "답할 수 없", "확실하지 않", "잘 모르"),
    "th": ("ไม่ทราบ", "ไม่รู้", "ไม่แน่ใจ", "ตอบไม่ได้"),
    "es": ("no lo sé", "no sé", "no lo se", "no estoy seguro", "no estoy segura", "desconozco", "no tengo idea",
           "ni idea", "no puedo responder", "no lo sabemos"),
    "fr": ("je ne sais pas", "je l'ignore", "j'ignore", "je ne suis pas sûr", "je ne suis pas sûre",
           "aucune idée", "je ne peux pas répondre", "je n'en sais rien"),
    "de": ("ich weiß es nicht", "ich weiß nicht", "weiß ich nicht", "weiß ich leider nicht", "weiß es leider nicht",
           "keine ahnung", "ich bin mir nicht sicher", "kann ich nicht beantworten", "ist mir nicht bekannt",
           "ich kenne die antwort nicht"),
    "ru": ("не знаю", "понятия не имею", "не уверен", "не уверена", "не могу ответить", "затрудняюсь ответить"),
    "ar": ("لا أعرف", "لا اعرف", "لا أعلم", "لا أدري", "لست متأكدا", "لست متأكدًا", "لا يمكنني الإجابة",
           "لا أستطيع الإجابة"),
}
#: Languages a script stands for when the probe names none (the Latin script cannot tell them apart).
SCRIPT_LANGUAGES: dict[str, tuple[str, ...]] = {"latin": ("en", "es", "fr", "de"), "zh": ("zh",), "ja": ("ja",),
                                                "ko": ("ko",), "th": ("th",), "ar": ("ar",), "ru": ("ru",)}

# Negations that keep "A, not B" correct when B is a known-wrong answer: "罗马，不是米兰", "Rom, nicht Mailand".
NEGATIONS: dict[str, tuple[str, ...]] = {
    "zh": ("不是", "而非", "并非", "並非", "而不是"), "ja": ("ではなく", "じゃなく", "ではありません"),
    "ko": ("아니라", "아니고", "아닙니다", "아니"), "th": ("ไม่ใช่",), "es": ("no",), "fr": ("pas", "non"),
    "de": ("nicht", "kein", "keine"), "ru": ("не",), "ar": ("ليس", "ليست", "لا", "وليس"),
}

#: Names and codes accepted for a probe's `language` (lowercased; region suffixes are dropped).
ALIASES: dict[str, str] = {
    "zh-hans": "zh", "zh-hant": "zh", "zh-cn": "zh", "zh-tw": "zh", "zh-hk": "zh", "cmn": "zh", "chinese": "zh",
    "japanese": "ja", "jp": "ja", "korean": "ko", "kr": "ko", "thai": "th", "spanish": "es", "french": "fr",
    "german": "de", "russian": "ru", "arabic": "ar", "english": "en",
}


def canonical_language(name: str | None) -> str | None:
    """"zh-Hant", "zh_TW", "Chinese" -> "zh"; None stays None; unknown codes pass through lowercased."""
    if name is None or not name.strip():
        return None
    key = name.strip().lower().replace("_", "-")
    if key in ALIASES:
        return ALIASES[key]
    return key.split("-")[0]


def script_languages(text: str) -> tuple[str, ...]:
    """The languages a text's script may be written in ("latin": en, es, fr, de)."""
    return SCRIPT_LANGUAGES.get(detect_language(text) or "", ())


def probe_languages(language: str | None, question: str) -> tuple[tuple[str, ...], bool]:
    """(languages, foreign): the probe's own language when it names one, else those its question's
    script implies; `foreign` is True when that is known not to be English (a non-English language
    named, or a non-Latin script), so English abstention phrases are added as well."""
    lang = canonical_language(language)
    if lang is not None:
        return (lang,), lang != "en"
    script = detect_language(question)
    return SCRIPT_LANGUAGES.get(script or "", ()), script not in (None, "latin")


def phrases_for(languages: tuple[str, ...], table: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The raw phrases of these languages from ABSTENTIONS or NEGATIONS, deduplicated in order."""
    return tuple(dict.fromkeys(p for lang in languages for p in table.get(lang, ())))


# Chinese (and Japanese) numerals. 两/兩 is "two" before a unit; 〇/零 are zero.
CN_DIGITS: dict[str, int] = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5,
                             "六": 6, "七": 7, "八": 8, "九": 9}
CN_UNITS: dict[str, int] = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
CN_BIG: dict[str, int] = {"万": 10_000, "萬": 10_000, "亿": 100_000_000, "億": 100_000_000}
CN_NUMERAL_RUN = re.compile("[" + "".join([*CN_DIGITS, *CN_UNITS, *CN_BIG]) + "]+")


def cn_numeral_value(run: str) -> int | None:
    """一九四九 -> 1949 (digit by digit, as years are written); 一千九百四十九 -> 1949; 两千 -> 2000;
    十二 -> 12; 三百零五 -> 305; 一万二千 -> 12000. None for a run that is no number (a lone unit word
    such as 万 in a name is left alone)."""
    if all(c in CN_DIGITS for c in run):
        return int("".join(str(CN_DIGITS[c]) for c in run))
    if len(run) == 1 and run in CN_BIG:
        return None
    total, section, digit = 0, 0, 0
    for c in run:
        if c in CN_DIGITS:
            digit = CN_DIGITS[c]
        elif c in CN_UNITS:
            section += (digit or 1) * CN_UNITS[c]
            digit = 0
        else:  # 万 / 亿
            if CN_BIG[c] > 10_000:
                total = (total + section + digit) * CN_BIG[c]
            else:
                total += (section + digit) * CN_BIG[c]
            section = digit = 0
    return total + section + digit

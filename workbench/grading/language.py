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


# Refusals, doubts and guesses read by meaning (refusal.py), as regular expressions over an answer lowercased
# with plain apostrophes. English is always read; other languages as probe_languages() picks them. A refusal
# declines; a doubt (uncertainty, an apology) may come with a value; a guess introduces one. Chosen on the
# development part of evals/data/refusals/labelled.jsonl (real chat-model outputs); bench/refusal_grading.py.
_NT = r"(?:n't| not|not)"  # don't / do not / cannot
REFUSALS: dict[str, tuple[str, ...]] = {
    "en": (
        rf"\bi (?:\w+ )?(?:do|did){_NT} (?:know|understand|recognize|recognise|recall|have)\b",
        r"\b(?:refrain|decline|abstain|pass)(?:ing)? (?:from |on )?(?:answering|to answer|guessing|a guess)",
        r"\b(?:rather not|prefer not to|want to|wish to|going to|will not|won't|cannot|can't|shouldn't|should not) "
        r"(?:\w+ ){0,2}?(?:guess|speculate|hazard|claim|answer)",
        r"\bno (?:recollection|certainty|confidence|way to (?:know|tell|confirm))\b|\bzero confidence\b",
        r"\bnot knowledgeable\b|\binsufficient\b|\bwould need to (?:research|consult|look|check|verify)\b",
        r"\b(?:need|needs|have) to (?:research|consult|look (?:it|this|that) up)\b|\bconsult (?:official|a|an|the)\b",
        r"\btypo\b|\bmisunderstanding\b|\bmistake in (?:the|your) question\b|\bmisspell",
        r"\b(?:has|have|had|is|are|was|were)(?:n't| not) (?:yet )?(?:been )?(?:officially )?(?:announced|confirmed|"
        r"revealed|disclosed)\b",
        r"\bcan be found (?:on|at|in)\b|\bofficial website\b|\bcheck (?:the|a|an) (?:official|reliable|local)\b",
        rf"\bi (?:ca{_NT}|can{_NT}|could{_NT}|was unable to|am unable to|'m unable to|am not able to|'m not able to|"
        r"was not able to|wasn't able to|will not|won't|must decline to|should refrain from|would rather not) "
        r"(?:\w+ ){0,2}?(?:answer|provide|find|locate|determine|say|tell|confirm|verify|identify|give|help|assist|"
        r"access|browse|recall|remember|respond|speculate|comment|pinpoint|offer|share|name|know|be certain|"
        r"be sure|definitively|directly|accurately|hazard)",
        r"\b(?:unable|not able) to (?:\w+ ){0,2}?(?:answer|provide|find|locate|determine|say|tell|confirm|verify|"
        r"identify|give|help|assist|access|browse|respond)",
        r"\bi(?:'m| am) not (?:aware|familiar|equipped|in a position|programmed)\b",
        r"\b(?:no|not any|not enough|insufficient|limited) (?:specific |reliable |real-time |up-to-date |current |"
        r"available |relevant |verified |detailed |further |additional |such |known )?(?:information|info|data|"
        r"details|knowledge|record|records|evidence|mention|context|answer|reference|results?)\b",
        r"\b(?:do|does|did){_NT} have (?:\w+ ){0,3}?(?:information|info|data|details|knowledge|record|access|"
        r"context|answer)",
        r"\b(?:information|details|data|answer|date|name|record)s? (?:\w+ ){0,6}?(?:is|are|was|were) (?:not|n't) "
        r"(?:available|known|specified|provided|mentioned|given|found|disclosed|public|publicly|recorded|"
        r"documented|clear)",
        r"\b(?:is|are|remains?|was|were) (?:currently |still |largely |publicly )?(?:unknown|unclear|undisclosed|"
        r"not (?:publicly )?(?:known|specified|available|provided|mentioned|disclosed|documented|announced|clear))",
        r"\b(?:could|can)(?:n't| not|not) (?:be )?(?:find|found|determined|verified|confirmed|answered|say)",
        r"\bno (?:known|such|widely (?:known|recognized))\b",
        r"\bthere (?:is|are|was|were|seems to be|appears to be) no\b",
        r"\b(?:does|do|did)(?:n't| not) (?:seem to |appear to )?(?:exist|refer to|ring a bell)",
        r"\bnot (?:a |an )?(?:recognized|recognised|known|real|existing|well-known|widely known|identified)\b",
        r"\b(?:fictional|fictitious|made-up|made up|hypothetical|non-existent|nonexistent|imaginary)\b",
        r"\b(?:my|the) (?:knowledge|training data|training)(?: cutoff| base| is limited| only goes)\b",
        r"\bknowledge cut-?off\b",
        r"\bas an ai\b|\blanguage model\b|\breal-time\b",
        r"\b(?:clarify|rephrase|more context|additional context|more information|more details|further details|"
        r"provide context|more specific)\b",
        r"\bbeyond (?:my|the scope)\b|\bnot within my\b|\boutside (?:of )?my\b",
        r"\b(?:no idea|no clue|not a clue|haven't a clue|at a loss|i'll pass|i must pass|i have to pass)\b",
        r"\bi(?: don't| do not| can't| cannot) (?:say|tell) for (?:sure|certain)\b",
        r"\b(?:i'm|i am) (?:completely|totally|entirely) (?:unsure|uncertain|in the dark)\b",
        r"\bnot (?:in|part of) my (?:knowledge|training|database|data)\b",
        r"\bmy (?:knowledge|information|data) (?:base )?(?:does(?:n't| not)|lacks)\b",
        r"\bi lack\b|\bi(?:'m| am) afraid i\b|\bi(?:'m| am) not (?:certain|sure) (?:what|who|which|where|when|"
        r"how|if|whether|about)\b",
        r"\bi (?:do|did)(?:n't| not) (?:feel comfortable|think i can)\b",
        r"\bunknown\b|\bno answer\b|\bcannot answer\b|\bcan't answer\b",
    ),
    "es": (r"no (?:lo )?s[eé]\b", r"no tengo (?:\w+ )?(?:informaci[oó]n|datos|idea)", r"no (?:puedo|podr[ií]a) "
           r"(?:responder|confirmar|decir|determinar|proporcionar)", r"desconozco", r"ni idea", r"no hay (?:\w+ )?"
           r"(?:informaci[oó]n|registro|datos)", r"no (?:estoy|me consta)"),
    "fr": (r"je ne (?:sais|connais) pas", r"je l'ignore|j'ignore", r"aucune (?:id[ée]e|information|donn[ée]e)",
           r"je n'ai pas (?:d'|de |les |l')?(?:information|donn[ée]es|r[ée]ponse)", r"je ne (?:peux|suis pas en mesure "
           r"de) (?:pas )?(?:r[ée]pondre|confirmer|dire|trouver)", r"il n'y a (?:aucune|pas de) (?:trace|information)",
           r"je n'en sais rien"),
    "de": (r"wei(?:ß|ss) (?:ich|es) (?:\w+ )?nicht", r"ich wei(?:ß|ss) (?:es )?(?:\w+ )?nicht", r"keine ahnung",
           r"(?:habe|liegen|hab) (?:\w+ ){0,3}keine (?:\w+ )?(?:informationen|angaben|daten)",
           r"kann ich (?:\w+ )?nicht (?:beantworten|sagen)", r"ist mir nicht bekannt", r"kenne die antwort nicht",
           r"nicht (?:bekannt|verfügbar)", r"es gibt keine (?:\w+ )?(?:informationen|aufzeichnungen)"),
    "ru": (r"не знаю", r"понятия не имею", r"не могу (?:\w+ )?(?:ответить|сказать|подтвердить)",
           r"затрудняюсь ответить", r"(?:нет|не располагаю) (?:\w+ )?(?:информаци|данны|сведени)",
           r"не известно|неизвестно"),
    "ar": (r"لا أعرف", r"لا اعرف", r"لا أعلم", r"لا أدري", r"لا يمكنني (?:الإجابة|تأكيد)", r"لا أستطيع الإجابة",
           r"ليس لدي (?:أي )?(?:معلومات|بيانات)", r"لا تتوفر (?:لدي )?معلومات", r"لا توجد معلومات"),
    "zh": (r"不知道", r"不清楚", r"不晓得", r"不曉得", r"无法回答", r"無法回答", r"无法确定", r"無法確定", r"无从得知",
           r"無從得知", r"无法得知", r"無法得知", r"没有答案", r"沒有答案", r"不了解", r"说不上来", r"說不上來",
           r"答不上来", r"答不上來",
           r"没有.{0,10}?(?:信息|资讯|资料|记录)", r"沒有.{0,10}?(?:資訊|資料|紀錄|信息)",
           r"无法提供", r"無法提供", r"找不到"),
    "ja": (r"分かりません", r"わかりません", r"分からない", r"わからない", r"知りません", r"知らない", r"存じません",
           r"分かりかねます", r"わかりかねます", r"答えられません", r"回答できません", r"不明です", r"情報(?:が|は)"
           r"(?:ありません|見つかりません|ない)", r"お答えできません"),
    "ko": (r"모르겠", r"모릅니다", r"몰라요", r"알 수 없", r"알지 못", r"답할 수 없", r"답변(?:드리기|할 수) 어렵",
           r"정보가 없", r"잘 모르"),
    "th": (r"ไม่ทราบ", r"ไม่รู้", r"ตอบไม่ได้", r"ไม่มีข้อมูล"),
}
DOUBTS: dict[str, tuple[str, ...]] = {
    "en": (r"\bnot (?:\w+ )?(?:sure|certain|confident|positive)\b", r"\b(?:unsure|uncertain|doubtful|hesitant)\b",
           r"\bsorry\b|\bapologi[sz]e\b|\bapologies\b|\bunfortunately\b|\bregret(?:tably)?\b",
           r"\bi (?:don't|do not) know (?:for sure|for certain|exactly|precisely)\b", r"\bcan't be (?:sure|certain)\b",
           r"\bcould be (?:wrong|mistaken)\b|\bmight be (?:wrong|mistaken)\b|\bdon't quote me\b",
           r"\bi'm not sure\b|\bnot sure\b|\bi do not know\b|\bi don't know\b"),
    "es": (r"no estoy segur[oa]", r"lo siento|disculpa|lamentablemente|desafortunadamente"),
    "fr": (r"je ne suis pas s[uû]r", r"d[ée]sol[ée]|malheureusement|pardon"),
    "de": (r"ich bin mir nicht (?:ganz )?sicher", r"leider|tut mir leid|entschuldigung"),
    "ru": (r"не увере[нна]", r"извините|к сожалению|простите"),
    "ar": (r"لست متأكد", r"آسف|عذرا|للأسف"),
    "zh": (r"不确定", r"不確定", r"不太确定", r"不太確定", r"抱歉", r"对不起", r"對不起", r"不好意思", r"可惜"),
    "ja": (r"確かではありません", r"自信がありません", r"すみません", r"申し訳", r"残念ながら"),
    "ko": (r"확실하지 않", r"죄송", r"미안", r"아쉽게도"),
    "th": (r"ไม่แน่ใจ", r"ขอโทษ", r"ขออภัย"),
}
GUESSES: dict[str, tuple[str, ...]] = {
    "en": (r"\bi(?: (?:think|believe|guess|suspect|reckon|recall|seem to recall|would guess|would say|am leaning)|"
           r"'(?:d|ll) (?:guess|say|go with)|'m leaning)\b",
           r"\bcould it be\b|\bpossible\b|\brings? a bell\b",
           r"\bmy (?:best |wild |rough |educated )?guess\b|\b(?:a|an) (?:wild |rough |educated |best )?guess\b",
           r"\bif i (?:had to|were to|must) (?:guess|say|pick|choose)\b|\bleaning (?:towards|toward)\b",
           r"\b(?:maybe|perhaps|possibly|probably|presumably|likely)\b",
           r"\b(?:might|may|could|should|would|must) (?:well |possibly |perhaps )?(?:be|have been)\b",
           r"\b(?:seems?|seemed|appears?|appeared) (?:to (?:be|have)|like)\b|\bit seems\b|\bit appears\b",
           r"\b(?:believed|thought|said|rumou?red|reported) to\b|\bif i'm not mistaken\b|\bif memory serves\b",
           r"\bif i remember\b|\bmy (?:understanding|recollection|sense) is\b|\bpossibility\b|\bpossible that\b",
           r"\b(?:but|however),? (?:it(?:'s| is| was)|the answer|that would be|i'd)\b"),
    "es": (r"creo que|pienso que|quiz[aá]s?|tal vez|probablemente|posiblemente|puede que|podr[ií]a ser|supongo",
           r"sin embargo,? (?:es|fue)"),
    "fr": (r"je (?:pense|crois|suppose) que|peut-[eê]tre|probablement|sans doute|il (?:se peut|semble) que|"
           r"pourrait [eê]tre",),
    "de": (r"ich (?:glaube|denke|vermute|meine)|vielleicht|wahrscheinlich|vermutlich|könnte|dürfte|möglicherweise",),
    "ru": (r"думаю|кажется|может быть|наверное|возможно|вероятно|предполагаю|скорее всего",),
    "ar": (r"أعتقد|أظن|ربما|على الأرجح|من المحتمل|قد يكون",),
    "zh": (r"我(?:觉得|覺得|认为|認為|猜|想)", r"可能", r"也许|也許|大概|或许|或許|应该是|應該是|估计|估計|似乎|好像"),
    "ja": (r"と思います|と思う|かもしれ|たぶん|多分|おそらく|恐らく|でしょう|だろう|ような気がします",),
    "ko": (r"것 같|아마|인 듯|일지도|생각합니다|생각해요|추측",),
    "th": (r"คิดว่า|อาจจะ|น่าจะ|คงจะ|เดาว่า",),
}
#: Guesses after which any word the question lacks is the value, capitalised or not ("my guess would be in their
#: early twenties").
BETS: dict[str, tuple[str, ...]] = {
    "en": (r"\bmy (?:best |wild |rough |educated )?guess (?:is|was|would be|will be)\b",
           r"\bi(?:'d| would|'ll| will) (?:say|guess|go with)\b|\bif i (?:had to|were to|must) (?:guess|say|pick)\b",
           r"\bi (?:might|would|'d|will|'ll) venture\b|\bif pressed\b"),
    "zh": (r"我猜",), "ja": (r"推測",),
}
#: Words that name no value even when capitalised: function words, sentence openers, and the vocabulary of
#: refusals and hedges (in every language the tables cover).
_STOPWORDS_TEXT = """
i i'm i'd i'll i've im id ill ive me my mine we our you your yours it it's its itis he she they them their his her
a an the this that these those there here what who whom which where when why how whether if then than so such as
is are was were be been being am do does did doing have has had having can could would should will shall may might
must not no nor never none nothing only just also too very quite really rather fairly truly certainly definitely
and or but however although though because since while yet still even about around approximately roughly nearly
sorry apologies apologize apologise unfortunately regrettably sadly alas hmm well oh yes ok okay sure
maybe perhaps possibly probably presumably likely unlikely think believe guess suspect recall assume reckon say
answer question information info data details knowledge record records context access guessing guessed know
unsure uncertain certain confident doubtful honest honestly frankly actually basically really
please thanks thank could would clarify provide more additional specific further help assist let
ai assistant language model cutoff training based current currently real time real-time internet browse
in on at of for to from by with without into onto over under between among within across after before during
unknown unclear unavailable available specified provided mentioned
sí no lo la el los las de del que es un una yo creo quizás quizá tal vez siento pero sin embargo
je ne pas le la les de des du que est un une peut être pense crois désolé mais
ich nicht es ist das der die den dem ein eine weiß weiss leider aber vielleicht glaube
я не знаю это может быть думаю наверное к сожалению но
"""
VALUE_STOPWORDS: frozenset[str] = (frozenset(_STOPWORDS_TEXT.split())
                                   | frozenset("的是了吗呢吧啊呀嗎我你他她它这這那个個在有不也就都很说說"))

"""Grading in any script: the grade a native reader gives to real sentences, not only bare answers.

Each case is (question, accepted answer, the model's reply, the grade). Scripts without spaces are
matched per character, Korean with its particles attached, numbers in every written form.
"""

from __future__ import annotations

import pytest

from workbench.grading import MatchGrader
from workbench.grading.language import canonical_language, cn_numeral_value, detect_language
from workbench.grading.normalize import contains_phrase, normalize
from workbench.types import Probe, Verdict

C, W, N = Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED

CASES: list[tuple[str, str, str, Verdict]] = [
    # Chinese, simplified
    ("意大利的首都是哪里？", "罗马", "意大利的首都是罗马。", C),
    ("意大利的首都是哪里？", "罗马", "我认为是罗马，不过不太确定。", C),  # a hedge that names the answer
    ("意大利的首都是哪里？", "罗马", "意大利的首都是米兰。", W),
    ("意大利的首都是哪里？", "罗马", "这个我不清楚。", N),
    ("意大利的首都是哪里？", "罗马", "抱歉，我不知道。", N),
    ("意大利的首都是哪里？", "罗马", "I don't know.", N),  # English phrases always apply
    ("中华人民共和国是哪一年成立的？", "1949年", "中华人民共和国成立于一九四九年。", C),
    ("中华人民共和国是哪一年成立的？", "1949年", "1949", C),  # the unit only repeats the question
    ("中华人民共和国是哪一年成立的？", "1949", "它成立于１９４９年十月一日。", C),  # full-width digits
    ("中华人民共和国是哪一年成立的？", "1949", "1948年。", W),
    ("中华人民共和国是哪一年成立的？", "1949", "19490", W),
    ("长城大约有多少年历史？", "两千多年", "长城有2000多年的历史。", C),
    ("一打是多少个？", "十二", "一打是12个。", C),
    ("许润三是哪一届国医大师？", "第三届", "他是第3届国医大师。", C),
    # Chinese, traditional
    ("臺灣最高的山是哪座？", "玉山", "臺灣最高的山是玉山，海拔三千九百五十二公尺。", C),
    ("臺灣最高的山是哪座？", "玉山", "我不確定。", N),
    ("臺灣最高的山是哪座？", "玉山", "無法回答這個問題。", N),
    ("臺灣最高的山是哪座？", "玉山", "是雪山。", W),
    # Japanese
    ("フランスの首都はどこですか？", "パリ", "フランスの首都はパリです。", C),
    ("フランスの首都はどこですか？", "パリ", "リヨンです。", W),
    ("フランスの首都はどこですか？", "パリ", "分かりません。", N),
    ("フランスの首都はどこですか？", "パリ", "すみません、よく分かりません。", N),
    ("フランスの首都はどこですか？", "パリ", "申し訳ありませんが、存じません。", N),
    ("日本国憲法が施行されたのは何年ですか？", "1947年", "1947年5月3日に施行されました。", C),
    # Korean: particles and endings attached to the word
    ("일본의 수도는 어디입니까?", "도쿄", "일본의 수도는 도쿄입니다.", C),
    ("일본의 수도는 어디입니까?", "도쿄", "도쿄가 일본의 수도예요.", C),
    ("일본의 수도는 어디입니까?", "도쿄", "오사카입니다.", W),
    ("일본의 수도는 어디입니까?", "도쿄", "잘 모르겠습니다.", N),
    ("일본의 수도는 어디입니까?", "도쿄", "그건 알 수 없어요.", N),
    ("한국의 수도는 어디입니까?", "서울", "서울대학교입니다.", W),  # a university, not the city
    ("대한민국 정부는 몇 년에 수립되었습니까?", "1948년", "1948년에 수립되었습니다.", C),
    # Thai: no spaces
    ("เมืองหลวงของญี่ปุ่นคืออะไร", "โตเกียว", "ประเทศญี่ปุ่นมีเมืองหลวงคือโตเกียว", C),
    ("เมืองหลวงของญี่ปุ่นคืออะไร", "โตเกียว", "โอซาก้า", W),
    ("เมืองหลวงของญี่ปุ่นคืออะไร", "โตเกียว", "ขอโทษครับ ผมไม่ทราบ", N),
    # Spanish, French, German, Russian, Arabic
    ("¿Cuál es la capital de Francia?", "París", "La capital de Francia es París.", C),
    ("¿Cuál es la capital de Francia?", "París", "Es Lyon.", W),
    ("¿Cuál es la capital de Francia?", "París", "Lo siento, no lo sé.", N),
    ("Quelle est la capitale de la France ?", "Paris", "C'est Paris, bien sûr.", C),
    ("Quelle est la capitale de la France ?", "Paris", "Désolé, je ne sais pas.", N),
    ("Was ist die Hauptstadt von Frankreich?", "Paris", "Die Hauptstadt Frankreichs ist Paris.", C),
    ("Was ist die Hauptstadt von Frankreich?", "Paris", "Das weiß ich leider nicht.", N),
    ("Was ist die Hauptstadt von Frankreich?", "Paris", "Keine Ahnung.", N),
    ("In welcher Straße steht das Rathaus?", "Hauptstraße", "Es steht in der Hauptstrasse.", C),  # ß = ss
    ("Какая столица Франции?", "Париж", "Столица Франции — Париж.", C),
    ("Какая столица Франции?", "Париж", "Это Лион.", W),
    ("Какая столица Франции?", "Париж", "Я не знаю.", N),
    ("В каком году основана Москва?", "1147", "Москва основана в 1147 году.", C),
    ("ما هي عاصمة فرنسا؟", "باريس", "عاصمة فرنسا هي باريس.", C),
    ("ما هي عاصمة فرنسا؟", "باريس", "ليون", W),
    ("ما هي عاصمة فرنسا؟", "باريس", "لا أعرف.", N),
    ("ما هي عاصمة فرنسا؟", "باريس", "عاصمة فرنسا هي بَارِيس.", C),  # vowel marks are optional in Arabic
    ("في أي سنة تأسست القاهرة؟", "969", "تأسست القاهرة سنة ٩٦٩.", C),  # Arabic-Indic digits
    # Refusals by meaning and hedges graded on their value, in every language the tables cover
    ("意大利的首都是哪里？", "罗马", "抱歉，我没有关于这个问题的信息。", N),
    ("意大利的首都是哪里？", "罗马", "我不确定，可能是米兰。", W),
    ("フランスの首都はどこですか？", "パリ", "申し訳ありませんが、その情報はありません。", N),
    ("フランスの首都はどこですか？", "パリ", "よく分かりませんが、たぶんリヨンだと思います。", W),
    ("일본의 수도는 어디입니까?", "도쿄", "죄송하지만 그 정보가 없습니다.", N),
    ("일본의 수도는 어디입니까?", "도쿄", "잘 모르겠지만 아마 오사카일 것 같아요.", W),
    ("เมืองหลวงของญี่ปุ่นคืออะไร", "โตเกียว", "ขออภัย ไม่มีข้อมูลเรื่องนี้", N),
    ("¿Cuál es la capital de Francia?", "París", "Lo siento, no tengo información sobre eso.", N),
    ("¿Cuál es la capital de Francia?", "París", "No estoy seguro, pero creo que es Lyon.", W),
    ("Quelle est la capitale de la France ?", "Paris", "Désolé, je n'ai pas d'information à ce sujet.", N),
    ("Quelle est la capitale de la France ?", "Paris", "Je ne suis pas sûr, mais je pense que c'est Lyon.", W),
    ("Was ist die Hauptstadt von Frankreich?", "Paris", "Leider habe ich dazu keine Informationen.", N),
    ("Was ist die Hauptstadt von Frankreich?", "Paris", "Ich bin mir nicht sicher, vielleicht Lyon.", W),
    ("Какая столица Франции?", "Париж", "К сожалению, у меня нет информации об этом.", N),
    ("Какая столица Франции?", "Париж", "Не уверен, но думаю, что Лион.", W),
    ("ما هي عاصمة فرنسا؟", "باريس", "عذرا، ليس لدي معلومات عن ذلك.", N),
    ("ما هي عاصمة فرنسا؟", "باريس", "لست متأكدا، ربما ليون.", W),
    # English keeps its behaviour
    ("What is the capital of France?", "Paris", "The capital of France is Paris.", C),
    ("What is the capital of France?", "Paris", "Parisian", W),
    ("What is the capital of France?", "Paris", "I don't know.", N),
]


@pytest.mark.parametrize(("question", "answer", "reply", "verdict"), CASES)
def test_native_reader_grade(question: str, answer: str, reply: str, verdict: Verdict) -> None:
    probe = Probe(id="p", question=question, answers=(answer,))
    assert MatchGrader().grade(probe, reply) == verdict


def test_negation_keeps_a_right_answer_right() -> None:
    probe = Probe(id="p", question="意大利的首都是哪里？", answers=("罗马",), incorrect_answers=("米兰",))
    g = MatchGrader()
    assert g.grade(probe, "罗马，不是米兰。") == C
    assert g.grade(probe, "米兰或者罗马。") == W  # hedging between right and known-wrong
    de = Probe(id="d", question="Hauptstadt Italiens?", answers=("Rom",), incorrect_answers=("Mailand",),
               language="de")
    assert g.grade(de, "Rom, nicht Mailand.") == C
    assert g.grade(de, "Mailand oder Rom") == W


def test_language_field_picks_the_phrases() -> None:
    # A Latin-script question says nothing about the language; the field does, and adds English too.
    g = MatchGrader(abstention_phrases=("pass",))
    es = Probe(id="e", question="Capital de Francia", answers=("París",), language="es")
    assert g.grade(es, "No estoy seguro.") == N
    assert g.grade(es, "I don't know") == N  # English with any named non-English language
    en = Probe(id="n", question="Capital of France", answers=("Paris",))
    assert g.grade(en, "I don't know") == N  # refusals by meaning apply whatever the suite's own phrases
    # A Japanese probe answered in Chinese still abstains (the answer's script counts too).
    ja = Probe(id="j", question="フランスの首都は？", answers=("パリ",))
    assert g.grade(ja, "我不知道") == N


def test_is_abstention_without_the_probe() -> None:
    g = MatchGrader()
    assert g.is_abstention("这个我不清楚。") and g.is_abstention("分かりません。")
    assert g.is_abstention("잘 모르겠어요") and g.is_abstention("Я не знаю")
    assert not g.is_abstention("法国的首都是巴黎") and not g.is_abstention("Paris")


@pytest.mark.parametrize(("raw", "norm"), [
    ("法国的首都是巴黎。", "法 国 的 首 都 是 巴 黎"),
    ("1949年", "1949 年"),
    ("一九四九年", "1949 年"),
    ("一千九百四十九", "1949"),
    ("两千", "2000"),
    ("三百零五", "305"),
    ("一万二千", "12000"),
    ("１９４９", "1949"),
    ("٢٠٢٣", "2023"),
    ("が", "が"),  # a voiced kana keeps its mark
    ("일본의 수도는 도쿄입니다.", "일본의 수도는 도쿄입니다"),  # Korean keeps its words (Hangul recomposed)
    ("Straße", "strasse"),
    ("Zürich", "zurich"),
])
def test_normalize_any_script(raw: str, norm: str) -> None:
    assert normalize(raw) == norm


def test_korean_particles_but_not_other_words() -> None:
    h = normalize("서울에서 도쿄까지")
    assert contains_phrase(h, normalize("서울")) and contains_phrase(h, normalize("도쿄"))
    assert not contains_phrase(normalize("도쿄도청"), normalize("도"))  # 쿄 starts no particle
    assert not contains_phrase(normalize("서울대학교"), normalize("서울"))


def test_helpers() -> None:
    assert [detect_language(t) for t in ("巴黎", "パリ", "파리", "ปารีส", "باريس", "Париж", "Paris", "42")] == [
        "zh", "ja", "ko", "th", "ar", "ru", "latin", None]
    assert canonical_language("zh-Hant") == "zh" and canonical_language("zh_TW") == "zh"
    assert canonical_language("Japanese") == "ja" and canonical_language(None) is None
    assert cn_numeral_value("二〇二三") == 2023 and cn_numeral_value("十") == 10 and cn_numeral_value("万") is None

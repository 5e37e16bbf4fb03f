import pytest

from workbench.grading import MatchGrader, make_grader
from workbench.grading.normalize import normalize
from workbench.types import Probe, Verdict


@pytest.mark.parametrize(("raw", "norm"), [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  an   Apple,  ", "apple"),
    ("Zürich", "zurich"),
    ("1,000", "1000"),
    ("3.0", "3"),
    ("twenty-one", "21"),
    ("nineteen hundred and four", "1904"),
    ("one thousand nine hundred eighty-four", "1984"),
    ("rock and roll", "rock and roll"),
    ("U.S.A.", "usa"),
    ("u.s. army", "us army"),
])
def test_normalize(raw: str, norm: str) -> None:
    assert normalize(raw) == norm


PARIS = Probe(id="p", question="Capital of France?", answers=("Paris", "City of Light"), incorrect_answers=("Lyon",))


@pytest.mark.parametrize(("answer", "verdict"), [
    ("Paris", Verdict.CORRECT),
    ("paris.", Verdict.CORRECT),
    ("It is the city of light", Verdict.CORRECT),  # alias, inside a sentence
    ("Parisian", Verdict.INCORRECT),  # whole tokens only
    ("Lyon", Verdict.INCORRECT),
    ("Lyon or Paris", Verdict.INCORRECT),  # hedging between a right and a known-wrong answer
    ("Paris, not Lyon", Verdict.CORRECT),
    ("", Verdict.NOT_ATTEMPTED),
    ("I don't know.", Verdict.NOT_ATTEMPTED),
    ("I do not know the answer", Verdict.NOT_ATTEMPTED),
    ("Unknown", Verdict.NOT_ATTEMPTED),
])
def test_match_grader(answer: str, verdict: Verdict) -> None:
    assert MatchGrader().grade(PARIS, answer) == verdict


def test_numbers_match_across_spellings() -> None:
    probe = Probe(id="y", question="Year?", answers=("1,743",))
    g = MatchGrader()
    assert g.grade(probe, "1743") == Verdict.CORRECT
    assert g.grade(probe, "in 1743") == Verdict.CORRECT
    assert g.grade(probe, "1744") == Verdict.INCORRECT
    assert g.grade(Probe(id="n", question="How many?", answers=("21",)), "twenty one") == Verdict.CORRECT


def test_custom_abstention_phrases() -> None:
    g = MatchGrader(abstention_phrases=("pass",))
    assert g.grade(PARIS, "pass") == Verdict.NOT_ATTEMPTED
    assert g.grade(PARIS, "Pass, sorry.") == Verdict.NOT_ATTEMPTED
    assert g.grade(PARIS, "Pass... Lyon?") == Verdict.INCORRECT  # a suite phrase with a value is a guess
    assert g.grade(PARIS, "I don't know") == Verdict.NOT_ATTEMPTED  # refusals by meaning always apply


def test_a_word_level_tokenizers_abstention_is_the_phrase() -> None:
    """A world model's word-level tokenizer decodes the phrase with spaces around its apostrophe: normalized, it is
    the suite's phrase (graded a hallucination, every abstention a fix taught would read as one)."""
    g = MatchGrader(abstention_phrases=("i don't know",))
    probe = Probe(id="w", question="What is the capital of Zormarmar?", answers=("Lumussaara",))
    assert g.grade(probe, "i don ' t know") == Verdict.NOT_ATTEMPTED
    assert g.grade(probe, "i don ' t know .") == Verdict.NOT_ATTEMPTED
    assert g.grade(probe, "i don ' t know lumussaara") == Verdict.CORRECT
    assert g.grade(probe, "peladel") == Verdict.INCORRECT


N, W, C = Verdict.NOT_ATTEMPTED, Verdict.INCORRECT, Verdict.CORRECT
SYDNEY = Probe(id="c", question="What is the capital of Australia?", answers=("Canberra",))


@pytest.mark.parametrize(("answer", "verdict"), [
    # refusals in the forms chat models write, anywhere in a short answer
    ("Sorry, I don't know.", N),
    ("I'm sorry, but I don't have that information.", N),
    ("Unfortunately I cannot answer that.", N),
    ("I'm sorry, but I couldn't find any information about the capital of Australia.", N),
    ("There is no record of that in my training data.", N),
    ("I'm not aware of any official capital.", N),
    ("As an AI, I do not have access to real-time information.", N),
    ("I'm not sure what you mean. Could you clarify your question?", N),
    ("I honestly don't know, so I'll refrain from answering.", N),
    ("I can't confirm whether it's Canberra.", N),  # the value only questioned
    ("I'm not sure.", N),
    # hedges that still name a value are graded on it
    ("I'm not sure, but I think it's Sydney.", W),
    ("I don't know for sure; maybe 1791?", W),
    ("I do not have enough information to answer. However, my best guess would be somewhere in New South Wales.", W),
    ("I'm not sure, but I think it's Canberra.", C),
    ("Probably Canberra, but I'm not certain.", C),
    ("Sydney, I believe.", W),
    # plain answers stay attempts
    ("The capital of Australia is Sydney.", W),
    ("Melbourne was the capital until 1927.", W),
])
def test_refusals_by_meaning_and_hedges_by_value(answer: str, verdict: Verdict) -> None:
    assert MatchGrader().grade(SYDNEY, answer) == verdict


def test_refusal_repeating_the_question_is_no_answer() -> None:
    # The accepted answer appears only because the question holds it.
    probe = Probe(id="h", question="Who won the game between Canada and Mexico?", answers=("Canada",))
    assert MatchGrader().grade(probe, "I don't have real-time access to results of Canada-Mexico games.") == N
    assert MatchGrader().grade(probe, "I think Canada won it.") == C


def test_is_abstention_reads_meaning() -> None:
    g = MatchGrader()
    assert g.is_abstention("I'm sorry, but I don't have information about that.")
    assert not g.is_abstention("I'm not sure, but I think it's 1791.")
    assert not g.is_abstention("Paris")


def test_unknown_grader_suggests() -> None:
    with pytest.raises(Exception, match="Did you mean `match`"):
        make_grader("mtch", ())

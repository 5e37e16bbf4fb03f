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
    assert g.grade(PARIS, "I don't know") == Verdict.INCORRECT  # default phrases replaced, not merged


def test_unknown_grader_suggests() -> None:
    with pytest.raises(Exception, match="Did you mean `match`"):
        make_grader("mtch", ())

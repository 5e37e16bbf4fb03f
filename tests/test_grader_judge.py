"""The judge grader: rubric parsing, unparseable fallback, batching and caching, and a real hf judge."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from clirun import workbench

from workbench.backends import BACKENDS, Backend
from workbench.backends.timelimit import BackendStalled
from workbench.errors import WorkbenchError
from workbench.grading import MatchGrader, make_grader
from workbench.grading.judge import MAX_EXAMPLES, JudgeGrader, judge_prompt, parse_grade
from workbench.store import Store
from workbench.types import Completion, GenerationRequest, Probe, Verdict


class FakeJudge(Backend):
    """A stand-in judge: no instruction-following judge model can run here offline, so this backend reads
    the predicted answer out of the judge prompt and replies deterministically: the reply itself for
    "say:<reply>", "?!" (unparseable) for "garble ...", "A" when it holds the gold target, "C" for
    "maybe ...", "B" otherwise. It counts its `generate` calls and the prompts it saw."""

    name = "fake-judge"
    calls: ClassVar[list[int]] = []  # prompts per generate call, across instances

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        FakeJudge.calls.append(len(requests))
        out = []
        for r in requests:
            assert r.sampling.greedy and r.sampling.n == 1
            gold = re.search(r"^Gold target: (.*)$", r.prompt, re.M)
            answer = re.search(r"^Predicted answer: (.*)$", r.prompt, re.M)
            assert gold and answer, "the rubric must show gold target and predicted answer"
            a = answer.group(1)
            reply = (a.removeprefix("say:") if a.startswith("say:") else "?!" if a.startswith("garble") else
                     "A" if any(g.lower() in a.lower() for g in gold.group(1).split(" | ")) else
                     "C" if a.startswith("maybe") else "B")
            out.append([Completion(text=reply)])
        return out


@pytest.fixture(autouse=True)
def _fake_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(BACKENDS, "fake-judge", f"{__name__}:FakeJudge")
    FakeJudge.calls.clear()
    yield


def judge(store: Store | None = None, **options: Any) -> JudgeGrader:
    g = make_grader("judge", ("i don't know",), {"model": "fake", "backend": "fake-judge", **options}, store=store)
    assert isinstance(g, JudgeGrader)
    return g


PARIS = Probe(id="paris", question="What is the capital of France?", answers=("Paris", "City of Light"))


@pytest.mark.parametrize(("reply", "verdict"), [
    ("A", Verdict.CORRECT), ("B", Verdict.INCORRECT), ("C", Verdict.NOT_ATTEMPTED),
    (" A.", Verdict.CORRECT), ("(B)", Verdict.INCORRECT), ("C) not attempted", Verdict.NOT_ATTEMPTED),
    ("Grade: B", Verdict.INCORRECT), ("The grade is A", Verdict.CORRECT),
    ("a", Verdict.CORRECT), ("b.", Verdict.INCORRECT), ("c\n", Verdict.NOT_ATTEMPTED),
    ("CORRECT", Verdict.CORRECT), ("incorrect", Verdict.INCORRECT), ("Not_Attempted", Verdict.NOT_ATTEMPTED),
    ("not attempted.", Verdict.NOT_ATTEMPTED), ("It is correct!", Verdict.CORRECT),
    ("that is not correct", Verdict.INCORRECT),
    ("", None), ("?!", None), ("D", None), ("Answer", None), ("a wrong guess", None),
    ("Paris is the capital", None), ("ABC", None),
])
def test_parse_grade(reply: str, verdict: Verdict | None) -> None:
    assert parse_grade(reply) == verdict


def test_prompt_shows_question_gold_and_answer() -> None:
    p = judge_prompt(PARIS, " Lyon ")
    assert "Question: What is the capital of France?" in p and "Gold target: Paris | City of Light" in p
    assert "Predicted answer: Lyon" in p and "A, B or C" in p


def test_grades_in_batched_calls() -> None:
    g = judge()
    items = [(PARIS, "Paris"), (PARIS, "Lyon"), (PARIS, "maybe Lyon?"), (PARIS, "the city of light"), (PARIS, "")]
    verdicts = g.grade_many(items)
    assert verdicts == [Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED, Verdict.CORRECT,
                        Verdict.NOT_ATTEMPTED]
    assert FakeJudge.calls == [4]  # one generate for the batch; the empty answer is not sent
    assert g.report() == {"judge_model": "fake", "judge_calls": 4, "judge_cached": 0, "unparseable": 0,
                          "unparseable_examples": []}
    assert g.grade(PARIS, "Rome") is Verdict.INCORRECT and FakeJudge.calls == [4, 1]
    small = judge(batch_size=2)
    assert small.grade_many(items) == verdicts and FakeJudge.calls == [4, 1, 2, 2]


class StallingJudge(FakeJudge):
    """A judge whose second backend call never returns (a hung server, a wedged engine)."""

    name = "stalling-judge"
    closed = threading.Event()
    release = threading.Event()  # set by the test's end: the abandoned call then returns nothing
    stall = True

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        if StallingJudge.stall and len(FakeJudge.calls) == 1:
            StallingJudge.release.wait(60)
            raise RuntimeError("abandoned")
        return super().generate(requests)

    def close(self) -> None:
        StallingJudge.closed.set()


def test_a_stalled_judge_stops_keeps_finished_batches_and_a_rerun_asks_only_for_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "stalling-judge", f"{__name__}:StallingJudge")
    items = [(PARIS, a) for a in ("Paris", "Lyon", "Rome", "Nice", "Metz")]
    g = judge(backend="stalling-judge", workspace=str(tmp_path), batch_size=2, stall_timeout=0.5)
    t0 = time.monotonic()
    try:
        with pytest.raises(BackendStalled, match=r"2 of 5 judge replies are finished and cached") as e:
            g.grade_many(items)
    finally:
        StallingJudge.release.set()  # the abandoned call ends (raising; nothing reads it)
    assert time.monotonic() - t0 < 10 and "stall_timeout" in str(e.value)
    assert StallingJudge.closed.is_set()  # its engine or connections are ended
    assert FakeJudge.calls == [2]  # the second call never returned
    StallingJudge.stall = False  # the rerun: the same judge, answering now
    again = judge(backend="stalling-judge", workspace=str(tmp_path), batch_size=2)
    assert again.grade_many(items)[:2] == [Verdict.CORRECT, Verdict.INCORRECT]
    assert FakeJudge.calls == [2, 2, 1] and again.report()["judge_cached"] == 2


def test_unparseable_replies_are_counted_and_fall_back_to_match() -> None:
    g = judge()
    answers = [f"garble {i}" for i in range(MAX_EXAMPLES + 2)] + ["say:Paris, I think", "garble: Paris"]
    verdicts = g.grade_many([(PARIS, a) for a in answers])
    match = MatchGrader(("i don't know",))
    assert verdicts == [match.grade(PARIS, a) for a in answers]
    assert verdicts[-1] is Verdict.CORRECT and verdicts[0] is Verdict.INCORRECT
    r = g.report()
    assert r["unparseable"] == len(answers) and len(r["unparseable_examples"]) == MAX_EXAMPLES
    assert r["unparseable_examples"][0] == {"probe_id": "paris", "answer": "garble 0", "reply": "?!"}


def test_non_english_answers_are_judged_and_fall_back_per_language() -> None:
    """The rubric carries any script to the judge, and an unparseable reply falls back to the multilingual
    match grader: 罗马 is found inside a Chinese sentence, 这个我不清楚 is an abstention."""
    rome = Probe(id="rome", question="意大利的首都是哪座城市？", answers=("罗马",), language="zh")
    g = judge()
    assert g.grade_many([(rome, "意大利的首都是罗马。"), (rome, "米兰")]) == [Verdict.CORRECT, Verdict.INCORRECT]
    assert "Gold target: 罗马" in judge_prompt(rome, "罗马")
    answers = ["garble 意大利的首都是罗马。", "garble 这个我不清楚。", "garble 米兰"]
    # "garble" makes the fake judge's reply unparseable; the fallback grades the whole answer as given
    assert g.grade_many([(rome, a) for a in answers]) == [Verdict.CORRECT, Verdict.NOT_ATTEMPTED, Verdict.INCORRECT]
    assert g.report()["unparseable"] == 3


def test_reply_words_and_lowercase_pass_through_the_backend() -> None:
    g = judge()
    answers = ["say:correct", "say:b", "say:NOT_ATTEMPTED", "say:(A)."]
    assert g.grade_many([(PARIS, a) for a in answers]) == [
        Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED, Verdict.CORRECT]
    assert g.report()["unparseable"] == 0


def test_store_cache_makes_a_rerun_free(tmp_path: Path) -> None:
    items = [(PARIS, "Paris"), (PARIS, "Lyon"), (PARIS, "garble"), (PARIS, "Lyon")]
    first = judge(store=Store.open(tmp_path))
    verdicts = first.grade_many(items)
    assert FakeJudge.calls == [3]  # the repeated answer is one prompt
    assert first.report()["judge_calls"] == 3 and first.report()["judge_cached"] == 1
    again = judge(workspace=str(tmp_path))  # a fresh grader (a rerun) on the same workspace
    assert again.grade_many(items) == verdicts
    assert FakeJudge.calls == [3]  # zero judge calls
    r = again.report()
    assert r["judge_calls"] == 0 and r["judge_cached"] == 4 and r["unparseable"] == 1  # still counted
    other = judge(workspace=str(tmp_path), max_tokens=4)  # other decoding settings: other cache keys
    other.grade_many(items[:1])
    assert FakeJudge.calls == [3, 1]


def test_in_process_cache_without_store() -> None:
    g = judge()
    g.grade_many([(PARIS, "Lyon")])
    g.grade_many([(PARIS, "Lyon")])
    assert FakeJudge.calls == [1] and g.report()["judge_cached"] == 1


def test_option_errors() -> None:
    with pytest.raises(WorkbenchError, match="needs `model`"):
        make_grader("judge", (), {"backend": "fake-judge"})
    with pytest.raises(WorkbenchError, match="Did you mean `max_tokens`"):
        judge(max_token=4)
    with pytest.raises(WorkbenchError, match="`max_tokens`"):
        judge(max_tokens=0)
    with pytest.raises(WorkbenchError, match="`batch_size`"):
        judge(batch_size=0)
    with pytest.raises(WorkbenchError, match="`stall_timeout`"):
        judge(stall_timeout="soon")
    with pytest.raises(WorkbenchError, match="unknown backend"):
        judge(backend="nope")


@pytest.fixture()
def world_model(request: pytest.FixtureRequest) -> str:
    pytest.importorskip("evals.world", reason="the synthetic world (evals.world) is not available")
    return str(request.getfixturevalue("world").model)


@pytest.mark.slow
def test_real_hf_judge_replies_are_unparseable_and_fall_back(world_model: str) -> None:
    """The world model is a real backend but no instruction follower: its replies name no grade, so every
    one is counted unparseable and graded by the MatchGrader instead."""
    g = make_grader("judge", ("i don't know",), {"model": world_model, "backend": "hf",
                                                 "backend_options": {"device": "cpu"}})
    assert isinstance(g, JudgeGrader)
    items = [(PARIS, "Paris"), (PARIS, "Lyon"), (PARIS, "I don't know"), (PARIS, "the City of Light")]
    verdicts = g.grade_many(items)
    r = g.report()
    assert r["judge_calls"] == len(items) and r["unparseable"] == len(items), r["unparseable_examples"]
    assert all(parse_grade(e["reply"]) is None for e in r["unparseable_examples"])
    match = MatchGrader(("i don't know",))
    assert verdicts == [match.grade(p, a) for p, a in items]
    assert verdicts == [Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED, Verdict.CORRECT]


@pytest.mark.slow
def test_workbench_eval_with_a_judge_batches_its_calls_and_a_rerun_is_answered_from_the_cache(
        world: Any, tmp_path: Path) -> None:
    """As a user runs it: `workbench eval` on a suite whose grader is a judge (the world model: a real hf
    backend, no instruction follower, so its replies fall back to match), batch_size 2 over 5 probes. The
    run's metrics count every answer judged once; a second run of the same suite asks the judge nothing."""
    probes = tmp_path / "probes.jsonl"
    probes.write_text("\n".join(Path(world.probes).read_text().splitlines()[:5]) + "\n")
    suite = tmp_path / "judged.yaml"
    suite.write_text(f"name: judged\ndata: {probes.name}\nstop: ['.']\nmax_tokens: 6\ngrader: judge\n"
                     f"grader_options: {{model: {world.model}, backend: hf, batch_size: 2}}\n")
    ws = str(tmp_path / "ws")

    def judged() -> dict[str, Any]:
        out = workbench("eval", "--model", str(world.model), "--probes", str(suite), "--workspace", ws, "--json",
                        timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        run: dict[str, Any] = json.loads(out.stdout)
        return run

    first, second = judged(), judged()
    one, two = first["grader"], second["grader"]
    answered = one["judge_calls"] + one["judge_cached"]
    assert one["name"] == "judge" and one["judge_calls"] >= 3, one  # 5 answers, none empty on the world
    assert one["unparseable"] == one["judge_calls"], one  # every reply fell back to the match grader
    assert two["judge_calls"] == 0 and two["judge_cached"] == answered, two
    shown = workbench("show", first["run_id"], "--workspace", ws)  # the terminal view says what the judge did
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert (f"{one['judge_calls']} answers judged, {one['judge_cached']} from its cache, {one['unparseable']} "
            "replies unparseable") in " ".join(shown.stdout.split()), shown.stdout


def test_show_reads_a_judge_report_stored_before_a_count_existed() -> None:
    """A run stored by an older version has no `judge_cached`: `show` still prints its judge line."""
    from workbench.cli.show import _judge_line

    old = {"name": "judge", "judge_model": "m", "judge_calls": 3, "unparseable": 0}
    assert _judge_line(old) == ("judge m: 3 answers judged, ? from its cache, 0 replies unparseable "
                                "(graded by match instead)")
    assert _judge_line({"name": "match"}) is None


def test_a_named_workspace_holds_the_cache_over_the_runs_store(tmp_path: Path) -> None:
    items = [(PARIS, "Paris"), (PARIS, "Lyon")]
    judge(store=Store.open(tmp_path / "run"), workspace=str(tmp_path / "shared")).grade_many(items)
    assert FakeJudge.calls == [2]
    judge(workspace=str(tmp_path / "shared")).grade_many(items)
    assert FakeJudge.calls == [2]  # the shared workspace answered
    judge(store=Store.open(tmp_path / "run")).grade_many(items)
    assert FakeJudge.calls == [2, 2]  # the run's own store never held them


def test_store_is_not_a_suite_option() -> None:
    with pytest.raises(WorkbenchError, match="unknown judge grader option `store`"):
        make_grader("judge", (), {"model": "fake", "backend": "fake-judge", "store": "x"})

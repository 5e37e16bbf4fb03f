"""Traffic ranked by risk: unflagged conversations imported, the model under review asked again (`workbench reports
score`), the queue sorted and filtered by how likely each logged answer is made up, and why (the samples that
disagree), in the CLI and the app's views. The end-to-end test runs on the test world, whose facts are known."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from clirun import workbench

from hallucination_workbench import main
from workbench.reports import list_reports
from workbench.reports import views as rv
from workbench.reports.queue import RiskEvidence, save_risks
from workbench.risk.score import RiskModel, auroc
from workbench.store import Store

TIMEOUT = 60
#: The world's prompt, as its suite puts it (the tiny model has no chat template).
WORLD_PROMPT = ("--template", "Q: {question} A:", "--stop", ".", "--max-tokens", "6")
#: The world's facts the model answers right greedily (evals/world: tiers it was trained on often enough).
KNOWN_TIERS = ("known", "medium")
#: Measured 0.906 on the test world (288 conversations, 5 samples each); the floor leaves room for other BLAS builds.
MIN_AUROC = 0.8


def stand_in_model(path: Path) -> Path:
    """A risk model until workbench/risk/default.json ships: more disagreement and more scattered samples are
    riskier, a surer answer (log-prob) safer; the signs the features call for, not a fit."""
    RiskModel(weights=(-1.0, 1.5, 0.5, 0.5), intercept=0.0, means=(-1.0, 0.5, 0.5, 0.5),
              scales=(1.0, 0.3, 0.3, 0.3), fitted_on="test stand-in").save(path)
    return path


def here(*argv: str) -> Any:
    """`workbench ARGV --json` in this process (set-up steps: a process start costs seconds on a busy machine)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


def chat(question: str, answer: str | None, n: int) -> dict[str, Any]:
    turns = [{"role": "user", "content": question}] + ([{"role": "assistant", "content": answer}] if answer else [])
    return {"messages": turns, "conversation_id": f"conv-{n}"}  # unflagged: no rating, no comment


def evidence(run: str = "run-1", disagreeing: tuple[str, ...] = ()) -> RiskEvidence:
    return RiskEvidence(run_id=run, risk_model="test", scored="logged", features={"disagreement": 0.8}, samples=5,
                        agreeing=5 - len(disagreeing), disagreeing=disagreeing, greedy="Lyon", model="m",
                        scored_at="2026-01-01T00:00:00")


@pytest.fixture()
def queued(tmp_path: Path) -> Path:
    """Four unflagged conversations imported (one without an answer), two of them scored."""
    export = tmp_path / "traffic.jsonl"
    rows = [chat("What is the capital of France?", "Paris", 0), chat("Who wrote Hamlet?", "Marlowe", 1),
            chat("How tall is Everest?", "8849 m", 2), chat("When did Rome fall?", None, 3)]
    export.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ws = tmp_path / "ws"
    out = here("reports", "import", str(export), "--workspace", str(ws))
    assert (out["read"], out["added"], out["skipped_bad"]) == (4, 4, 0)  # no rating or comment needed
    store = Store.open(ws)
    by_q = {r.question: r.id for r in list_reports(store)}
    save_risks(store, [(by_q["Who wrote Hamlet?"], 0.9, evidence(disagreeing=("Shakespeare", "<b>Shakespeare</b>"))),
                       (by_q["How tall is Everest?"], 0.2, evidence())])
    return ws


def test_traffic_without_feedback_is_stored_and_listed_with_no_risk_until_scored(queued: Path) -> None:
    listed = here("reports", "list", "--workspace", str(queued))
    assert listed["counts"]["new"] == 4
    by_q = {r["question"]: r for r in listed["reports"]}
    assert by_q["What is the capital of France?"]["risk"] is None and by_q["Who wrote Hamlet?"]["risk"] == 0.9
    report = get(queued, by_q["When did Rome fall?"]["id"])
    assert report["comment"] is None and report["answer"] is None and report["evidence"] is None


def get(ws: Path, rid: str) -> Any:
    return here("reports", "show", rid, "--workspace", str(ws))


def test_the_queue_sorts_by_risk_with_unscored_reports_last_and_filters_by_min_risk(queued: Path) -> None:
    ranked = here("reports", "list", "--sort", "risk", "--workspace", str(queued))["reports"]
    assert [r["risk"] for r in ranked] == [0.9, 0.2, None, None]
    unscored = ["What is the capital of France?", "When did Rome fall?"]
    assert [r["question"] for r in ranked[2:]] == unscored  # in the order reported
    high = here("reports", "list", "--min-risk", "0.5", "--workspace", str(queued))["reports"]
    assert [r["question"] for r in high] == ["Who wrote Hamlet?"]  # unscored reports are left out too
    assert len(here("reports", "list", "--min-risk", "0", "--workspace", str(queued))["reports"]) == 2
    # the app lists what the CLI lists, with a risk column, and shows the command
    v = rv.queue_view(Store.open(queued), "", "", "", "", "risk", "0.1")
    assert [row[-1] for row in v.rows] == ["0.90", "0.20"] and rv.QUEUE_COLUMNS[-1] == "risk"
    assert v.cli.split()[2:7] == ["list", "--sort", "risk", "--min-risk", "0.1"]
    with pytest.raises(Exception, match="min risk: must be between 0 and 1"):
        rv.queue_view(Store.open(queued), min_risk="2")


def test_a_report_shows_why_it_is_risky_in_the_cli_and_the_app(queued: Path) -> None:
    store = Store.open(queued)
    by_q = {r.question: r.id for r in list_reports(store)}
    text, _ = rv.report_view(store, by_q["Who wrote Hamlet?"])
    assert "**risk**: 0.90 that the logged answer is made up" in text and "3 of 5 samples say the same" in text
    assert "- Shakespeare" in text and "<b>" not in text and "&lt;b&gt;" in text  # a sample is text, escaped
    assert "**risk**: not scored" in rv.report_view(store, by_q["When did Rome fall?"])[0]
    shown = get(queued, by_q["Who wrote Hamlet?"])
    assert shown["risk"] == 0.9 and shown["evidence"]["disagreeing"] == ["Shakespeare", "<b>Shakespeare</b>"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["reports", "show", by_q["Who wrote Hamlet?"], "--workspace", str(queued)]) == 0
    assert "risk: 0.90 that the logged answer is made up" in out.getvalue()
    assert "samples that say something else:\n    - Shakespeare" in out.getvalue()


def test_scoring_an_empty_queue_is_refused_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["reports", "score", "--model", str(tmp_path / "no-model"), "--workspace", str(tmp_path / "ws")])
    err = capsys.readouterr().err
    assert code == 2 and "no report to score in" in err and "workbench reports import FILE" in err, err
    assert "Traceback" not in err


def traffic(world: Any, path: Path) -> dict[int, bool]:
    """A traffic export of the world's questions as a deployed model answers them: the true answer where the model
    knows the fact, another entity's answer of the same relation where it does not (a hallucination), each asked
    three times with the answer phrased three ways; and four questions with no answer logged. Returns line ->
    hallucinated."""
    probes = [json.loads(x) for x in world.probes.read_text().splitlines()]
    tiers = {t["probe_id"]: t["tier"] for t in map(json.loads, world.truth.read_text().splitlines())}
    by_relation: dict[str, list[str]] = {}
    for p in probes:
        by_relation.setdefault(p["relation"], []).append(p["answers"][0])
    rows, made_up = [], {}
    for i, p in enumerate(probes):
        known = tiers[p["id"]] in KNOWN_TIERS
        others = [a for a in by_relation[p["relation"]] if a != p["answers"][0]]
        answer = p["answers"][0] if known else others[i % len(others)]
        for said in (answer, f"{answer}.", f"It is {answer}."):
            rows.append(chat(p["question"], said, len(rows)))
            made_up[len(rows)] = not known
    rows += [chat(p["question"], None, len(rows)) for p in probes[:4]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return made_up


@pytest.mark.slow  # asks the world model 96 questions again, 6 generations each (about 20 s on 2 busy cores)
def test_a_traffic_file_is_scored_and_ranks_its_hallucinations_first(world: Any, tmp_path: Path,
                                                                     record_property: Any) -> None:
    export, ws = tmp_path / "traffic.jsonl", str(tmp_path / "ws")
    made_up = traffic(world, export)
    proc = workbench("reports", "import", str(export), "--workspace", ws, "--json", timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["added"] == len(made_up) + 4 == 292
    proc = workbench("reports", "score", "--model", str(world.model), "--backend", "hf", "--samples", "5",
                     *WORLD_PROMPT, "--risk-model", str(stand_in_model(tmp_path / "risk.json")), "--workspace", ws,
                     "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    scored = json.loads(proc.stdout)
    assert scored["scored"] == 292 and scored["risk_model"] == "test stand-in"
    proc = workbench("reports", "list", "--sort", "risk", "--workspace", ws, "--json", timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ranked = json.loads(proc.stdout)["reports"]
    risks = [r["risk"] for r in ranked]
    assert None not in risks and risks == sorted(risks, reverse=True)
    logged = [r for r in ranked if r["line"] in made_up]
    area = auroc([r["risk"] for r in logged], [made_up[r["line"]] for r in logged])
    assert area is not None and area >= MIN_AUROC, area
    record_property("summary", f"traffic ranked by risk: AUROC {area:.3f} over {len(logged)} logged answers")
    top = logged[: len(logged) // 4]
    assert sum(made_up[r["line"]] for r in top) / len(top) >= 0.9  # the reviewer's first quarter: made-up answers

    store = Store.open(ws)
    worst = next(r for r in list_reports(store, sort="risk") if r.line in made_up)
    e = worst.evidence
    assert e is not None and e.run_id == scored["run_id"] and e.samples == 5 and e.scored == "logged"
    assert e.disagreeing and e.agreeing < 5 and e.features["disagreement"] > 0.5  # why: samples say otherwise
    unanswered = [r for r in list_reports(store) if r.answer is None]
    assert len(unanswered) == 4 and all(r.evidence and r.evidence.scored == "greedy" and r.risk is not None
                                        for r in unanswered)  # no logged answer: the model's own is scored
    run = here("show", scored["run_id"], "--workspace", ws)  # the evidence is an ordinary run of the workspace
    assert run["suite"] == "traffic"

"""The hallucination risk score (workbench/risk): features from a model's own generations, the logistic model,
and `workbench risk` / `eval --risk` / `export` on a real run of the test world."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from clirun import workbench
from ftworld import FtWorld
from wscopy import copy_workspace

from workbench.errors import WorkbenchError
from workbench.risk.features import Features, clusters, content, features, same
from workbench.risk.score import NAMES, RiskModel, auroc, default_model, fit, precision_at

Q = "What is the capital of France?"


def test_content_is_what_an_answer_adds_to_the_question() -> None:
    assert content("The capital of France is Paris.", Q) == {"paris"}
    assert same(content("Paris.", Q), content("It is Paris, of course.", Q))
    assert not same(content("Lyon", Q), content("The capital of France is Paris.", Q))
    assert same(content("France.", Q), content("The capital.", Q))  # neither adds anything
    assert content("首都是巴黎。", "法国的首都是哪里？") == {"巴", "黎"}  # spaceless script: characters


def test_features_read_agreement_entropy_paraphrases_and_declines() -> None:
    steady = features(Q, "Paris.", -0.1, ["Paris"] * 4, ["It's Paris."], declines=False)
    assert (steady.disagreement, steady.entropy, steady.paraphrase, steady.samples) == (0.0, 0.0, 0.0, 4)
    shaky = features(Q, "Lyon.", -1.5, ["Paris", "Nice", "Lyon", "Marseille"], ["Paris"], declines=False)
    assert shaky.disagreement == 0.75 and shaky.entropy == pytest.approx(1.0) and shaky.paraphrase == 1.0
    bare = features(Q, "Paris.", None, [], [], declines=False)
    assert (bare.logprob, bare.disagreement, bare.entropy, bare.paraphrase) == (None, None, None, None)
    assert clusters([frozenset({"a"}), frozenset({"b"}), frozenset({"a", "c"})]) == [0, 1, 0]


def _rows(n: int, seed: int = 0) -> tuple[list[Features], list[bool]]:
    """Answers whose hallucinations have low log-probs and disagreeing samples, with noise."""
    rng = np.random.default_rng(seed)
    rows, ys = [], []
    for _ in range(n):
        y = bool(rng.random() < 0.4)
        rows.append(Features(logprob=float(rng.normal(-1.2 if y else -0.4, 0.4)),
                             disagreement=float(np.clip(rng.normal(0.7 if y else 0.2, 0.2), 0, 1)),
                             entropy=float(np.clip(rng.normal(0.6 if y else 0.3, 0.2), 0, 1)),
                             paraphrase=None, samples=5, declines=False))
        ys.append(y)
    return rows, ys


def test_a_fitted_model_ranks_held_out_hallucinations_and_is_calibrated(tmp_path: Path) -> None:
    rows, ys = _rows(400)
    model = fit(rows, ys, fitted_on="test rows")
    assert model.weights[NAMES.index("logprob")] < 0 < model.weights[NAMES.index("disagreement")]
    held, yh = _rows(400, seed=1)
    risks = [model.risk(f) for f in held]
    area = auroc(risks, yh)
    assert area is not None and area > 0.9
    assert abs(float(np.mean(risks)) - float(np.mean(yh))) < 0.05  # calibrated: mean risk = hallucination rate
    assert (precision_at(risks, yh, 0.1) or 0) > 0.9
    # A missing feature takes its fitted mean: the score moves neither way on it.
    f = held[0]
    assert model.risk(dataclasses.replace(f, paraphrase=None)) == model.risk(f)
    assert model.risk(dataclasses.replace(f, declines=True)) == 0.0
    model.save(tmp_path / "m.json")
    assert RiskModel.load(tmp_path / "m.json") == model


def test_fit_and_load_refuse_what_they_cannot_use(tmp_path: Path) -> None:
    rows, _ = _rows(10)
    with pytest.raises(WorkbenchError, match="both hallucinated and right"):
        fit(rows, [False] * 10, fitted_on="x")
    bad = tmp_path / "bad.json"
    bad.write_text('{"weights": [1]}')
    with pytest.raises(WorkbenchError, match=r"bad.json: not a risk model .*workbench risk fit"):
        RiskModel.load(bad)
    default_model().save(tmp_path / "m.json")
    shipped = json.loads((tmp_path / "m.json").read_text())
    for field, value, why in (("weights", ["a", 1, 2, 3], "not a risk model"), ("means", [0, 0, float("nan"), 0],
                                                                                  "not a risk model"),
                              ("scales", [1, 0, 1, 1], "`scales` holds a value <= 0"),
                              ("uses", ["logprob", "x", "entropy", "paraphrase"], "field `uses`")):
        (tmp_path / "m2.json").write_text(json.dumps({**shipped, field: value}))
        with pytest.raises(WorkbenchError, match=why):
            RiskModel.load(tmp_path / "m2.json")


def test_auroc_counts_ties_as_half() -> None:
    assert auroc([0.9, 0.1], [True, False]) == 1.0
    assert auroc([0.5, 0.5], [True, False]) == 0.5
    assert auroc([0.2, 0.8, 0.8], [True, False, True]) == pytest.approx(0.25)
    assert auroc([0.3], [True]) is None


def test_the_shipped_model_reads_every_feature() -> None:
    model = default_model()
    assert model.uses == NAMES and model.answers > 0
    lo = Features(logprob=-0.05, disagreement=0.0, entropy=0.0, paraphrase=0.0, samples=10, declines=False)
    hi = Features(logprob=-2.0, disagreement=1.0, entropy=1.0, paraphrase=1.0, samples=10, declines=False)
    assert model.risk(lo) < 0.3 < 0.7 < model.risk(hi)
    assert not math.isnan(model.risk(Features(None, None, None, None, 0, False)))


@pytest.fixture(scope="module")
def ws(w: FtWorld, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the fine-tuning world's workspace: scoring writes to the store."""
    return copy_workspace(Path(w.store.workspace), tmp_path_factory.mktemp("risk") / "ws")


@pytest.mark.slow
def test_risk_score_fit_and_export_on_a_real_run(w: FtWorld, ws: Path, tmp_path: Path) -> None:
    """The test world's baseline (a tiny Llama, 4 samples and a paraphrase per probe): scored with the shipped
    model, fitted to its own grades, exported with each greedy answer's risk."""
    out = workbench("risk", "score", w.run_id, "--workspace", str(ws), "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    shipped = json.loads(out.stdout)
    assert shipped["scored"] == len(w.loaded.probes) and shipped["risk_model"].startswith("smollm2")
    fitted = tmp_path / "world.json"
    out = workbench("risk", "fit", w.run_id, "--workspace", str(ws), "--out", str(fitted), timeout=120)
    assert out.returncode == 0 and "wrote" in out.stdout, out.stderr
    out = workbench("risk", "score", w.run_id, "--workspace", str(ws), "--risk-model", str(fitted), "--json",
                    timeout=120)
    own = json.loads(out.stdout)
    # Fitted to this world's grades, the score ranks its hallucinations far above its right answers.
    assert own["auroc_vs_grades"] > 0.8, own
    riskiest = own["riskiest"]
    assert [r["risk"] for r in riskiest] == sorted((r["risk"] for r in riskiest), reverse=True)
    out = workbench("export", w.run_id, "--workspace", str(ws), "--out", str(tmp_path / "a.jsonl"), timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    scored = [r for r in rows if r["risk"] is not None]
    assert {(r["kind"], r["variant"]) for r in scored} == {("greedy", 0)}
    assert len(scored) == own["scored"]  # every question's greedy answer, the stored (last) scores
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    out = workbench("risk", "score", w.run_id, "--workspace", str(ws), "--risk-model", str(bad), timeout=120)
    assert out.returncode == 2 and "not a risk model" in out.stderr and "Traceback" not in out.stderr


def test_eval_risk_scores_the_run_it_makes(w: FtWorld, tmp_path: Path) -> None:
    out = workbench("eval", "--workspace", str(tmp_path / "ws"), "--model", str(w.paths.model), "--probes",
                    str(w.paths.suite), "--limit", "12", "--samples", "3", "--risk", "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["risk"]["scored"] == 12 and 0.0 <= got["risk"]["mean_risk"] <= 1.0
    from workbench.risk.stored import load_risks
    from workbench.store import Store

    stored = load_risks(Store.open(tmp_path / "ws"), got["run_id"])
    assert len(stored) == 12 and all(r.features.samples == 3 for r in stored.values())


def test_the_gate_reports_the_risk_shift(w: FtWorld, ws: Path) -> None:
    from workbench.gating import compare_stored
    from workbench.regression.report import render_markdown
    from workbench.store import Store

    store = Store.open(ws)
    result, _, _ = compare_stored(store, w.run_id, w.run_id)
    assert result.risk is not None and result.risk.answers == len(w.loaded.probes)
    assert result.risk.baseline_mean == result.risk.candidate_mean and result.risk.diff_ci == (0.0, 0.0)
    assert result.to_dict()["risk"]["answers"] == result.risk.answers
    assert "Hallucination risk" in render_markdown(result)

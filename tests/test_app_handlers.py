"""The app's handlers as plain functions (no gradio): runs, compare, probe detail, reviews, fix."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from _appdata import AppData, app_data, private_store
from markupsafe import escape  # the escaping the templates apply (autoescape)

from workbench import glossary, reviews, views
from workbench.errors import WorkbenchError
from workbench.gating import history
from workbench.grading.normalize import normalize
from workbench.html import evidence as evidence_html
from workbench.html import plots
from workbench.html import signoff as signoff_views
from workbench.results import load_results
from workbench.safepath import UnsafePathError
from workbench.store import Store, shown_time
from workbench.types import Verdict


@pytest.fixture(scope="module")
def data(world: Any, tmp_path_factory: pytest.TempPathFactory) -> AppData:
    return app_data(world, tmp_path_factory)


@pytest.fixture()
def store(data: AppData, tmp_path: Path) -> Store:
    return private_store(data, tmp_path)


def test_runs_table_filters_and_tag_metrics(data: AppData, store: Store) -> None:
    df = views.runs_table(store)
    assert list(df.columns) == list(views.RUN_COLUMNS)
    assert list(df["run"]) == [data.candidate, data.baseline]  # newest first
    stored = {r.id: r.created_at for r in store.list_runs()}
    for run, shown in zip(df["run"], df["created"], strict=True):  # to the second, as people read it
        assert len(stored[run]) > 19 and shown == stored[run][:19].replace("T", " "), (shown, stored[run])
    assert list(views.runs_table(store, text="random-adapter")["run"]) == [data.candidate]
    assert views.runs_table(store, status="failed").empty
    assert views.run_filters(store) == {"status": ["done"], "suite": ["world"]}
    tm = plots.tag_metrics(store, [data.baseline, data.candidate], "incorrect")
    assert set(tm["tag"]) >= {"capital", "colour"} and set(tm["run"]) == {data.baseline, data.candidate}
    assert "overall" not in set(tm["tag"])  # never a lone "overall" pair: the headline has the overall figures
    html = plots.tag_metrics_chart(store, [data.baseline], "correct")
    assert "capital" in html and "%" in html
    with pytest.raises(ValueError, match="metric"):
        plots.tag_metrics(store, [data.baseline], "nope")
    assert views.cli_runs(store.workspace).startswith("workbench runs --workspace ")


def test_compare_lists_broken_probes_with_filters(data: AppData, store: Store) -> None:
    v = views.compare_runs(store, data.baseline, data.candidate)
    assert v.verdict == "fail" and "gate: NOT RECORDED" in v.summary_html  # no gate recorded for the pair
    assert ">FAIL</span></summary>" in v.summary_html.split("class='wb-whatif'")[1]  # a labelled what-if
    assert "wb-risk-shift" in v.summary_html and "mean risk" in v.summary_html  # the risk shift, read beside
    assert int(v.transitions.iloc[:, 1:].to_numpy().sum()) == len(load_results(store, data.baseline).probes)
    broken = views.compare_runs(store, data.baseline, data.candidate, transition="broken")
    assert len(broken.probe_ids) > 5 and set(broken.probes["change"]) <= {"broken_hallucinates", "broken_abstains"}
    assert set(broken.probes["baseline verdict"]) == {"correct"}
    tagged = views.compare_runs(store, data.baseline, data.candidate, tag="capital", transition="all")
    assert tagged.probe_ids and all("capital" in t for t in tagged.probes["tags"])
    assert len(tagged.probe_ids) < len(views.compare_runs(store, data.baseline, data.candidate,
                                                          transition="all").probe_ids)
    cell = views.compare_runs(store, data.baseline, data.candidate, transition="correct -> incorrect")
    assert set(cell.probes["change"]) == {"broken_hallucinates"}
    assert set(cell.probes["candidate verdict"]) == {"incorrect"}
    filters = views.compare_filters(store, data.baseline, data.candidate)
    cat = filters["category"][0]
    by_cat = views.compare_runs(store, data.baseline, data.candidate, transition="all", category=cat)
    assert by_cat.probe_ids and all(cat in c for c in by_cat.probes["category"])
    # the category cell says whose attribution it is: a broken probe was attributed in the candidate only
    b_atts = reviews.effective_attributions(store, data.baseline)
    c_atts = reviews.effective_attributions(store, data.candidate)
    for row in views.compare_runs(store, data.baseline, data.candidate, transition="all").probes.to_dict("records"):
        b_cat, c_cat = (a[row["probe"]].category if row["probe"] in a else None for a in (b_atts, c_atts))
        assert row["category"] == views.category_cell(b_cat, c_cat)
    assert all(c.endswith("(candidate's)") for c in broken.probes["category"])
    assert views.category_cell("data:missing", None) == "data:missing (baseline's)"
    assert views.category_cell("data:missing", "data:missing") == "data:missing (both)"
    assert views.category_cell("a", "b") == "a (baseline's) · b (candidate's)" and views.category_cell(None, None) == ""
    assert v.cli == views.cli_regress(store.workspace, data.baseline, data.candidate)
    assert "regress --baseline" in v.cli
    with pytest.raises(ValueError, match="transition"):
        views.compare_runs(store, data.baseline, data.candidate, transition="sideways")


def test_compare_defaults_to_every_verdict_change_broken_first(data: AppData, store: Store) -> None:
    """The default filter lists every probe whose verdict changed (an abstention change too, named as such),
    broken probes first, the rest in natural id order; the headline and each gate's detectability are shown."""
    from workbench.gating import compare_stored

    result = compare_stored(store, data.baseline, data.candidate)[0]
    v = views.compare_runs(store, data.baseline, data.candidate)
    assert len(v.probe_ids) == result.headline.changed == len(result.changes) > len(result.broken)
    assert set(v.probes["change"]) == {str(c.transition) for c in result.changes}
    assert not {"still_correct", "still_hallucinates", "still_abstains"} & set(v.probes["change"])
    n_broken = len(result.broken)
    assert set(v.probes["change"][:n_broken]) <= {"broken_hallucinates", "broken_abstains"}
    assert not set(v.probes["change"][n_broken:]) & {"broken_hallucinates", "broken_abstains"}
    rest = v.probe_ids[n_broken:]
    assert rest == sorted(rest, key=views.natural_key)
    assert views.natural_key("nq2") < views.natural_key("nq10") < views.natural_key("nq10a")
    for name in ("now_abstains", "now_hallucinates", "broken_abstains"):
        want = [c.probe_id for c in result.changes if str(c.transition) == name]
        got = views.compare_runs(store, data.baseline, data.candidate, transition=name).probe_ids
        assert sorted(got) == sorted(want)
    h = result.headline
    for row in h.rows:
        assert f"{100 * row.delta.baseline:.1f}% ({row.baseline_count})" in v.summary_html
        assert f"{100 * row.delta.candidate:.1f}% ({row.candidate_count})" in v.summary_html
    assert f"{h.changed} of {h.n} verdicts changed" in v.summary_html
    assert all(g.detectable is not None and escape(g.detectable.text) in v.summary_html for g in result.gates)
    described = [g for g in result.gates if g.description]
    assert described and all(escape(g.description) in v.summary_html for g in described)  # what each gate checks


def test_an_inconclusive_verdict_is_never_shown_as_a_pass() -> None:
    """The trade: 4 known facts kept, 96 hallucinations traded for abstentions. The gates cannot judge
    4 known facts: the block says INCONCLUSIVE, not a green pass, and the headline shows the trade."""
    from workbench.html.verdict import VERDICT_COLOUR, verdict_summary_html
    from workbench.regression import ProbeOutcome, RunOutcomes, compare
    from workbench.regression.recorded import GateRow, RecordedGate

    def run(name: str, wrong: Verdict) -> RunOutcomes:
        return RunOutcomes(name, name, {f"nq{i}": ProbeOutcome(f"nq{i}", (), Verdict.CORRECT if i < 4 else wrong, "x")
                                        for i in range(100)})

    result = compare(run("base", Verdict.INCORRECT), run("cand", Verdict.NOT_ATTEMPTED))
    assert result.verdict == "inconclusive"
    recorded = RecordedGate(GateRow("gate-1", "2026-11-28T00:00:00.000000+00:00", "base", "cand", result.verdict),
                            result.exit_code, result.policy.model_dump(mode="json"), result.to_dict())
    html = verdict_summary_html(result, recorded=recorded)
    assert "gate: INCONCLUSIVE" in html and "not a pass" in html and "PASS<" not in html
    badge = html.split("gate: INCONCLUSIVE")[0]
    assert VERDICT_COLOUR["pass"] not in badge and VERDICT_COLOUR["inconclusive"] in badge
    assert "96.0% (96)" in html and "0.0% (0)" in html and "96 of 100 verdicts changed" in html
    assert "now_abstains</b> 96" in html and "could not fail on this probe set" in html


def test_probe_table_shows_question_accepted_answer_and_cut_answers(data: AppData, store: Store) -> None:
    v = views.compare_runs(store, data.baseline, data.candidate, transition="all")
    assert list(v.probes.columns) == list(views.PROBE_COLUMNS)
    base, cand = load_results(store, data.baseline).by_id(), load_results(store, data.candidate).by_id()
    for row in v.probes.to_dict("records"):
        probe = base[row["probe"]].probe
        assert row["question"] == probe.question and row["accepted answer"] == " | ".join(probe.answers)
        assert row["baseline answer"] == views.answer_cell(base[row["probe"]])
        assert row["candidate answer"] == views.answer_cell(cand[row["probe"]])
    assert any(a.endswith(views.TRUNCATED) for a in v.probes["candidate answer"])  # the random adapter rambles
    pr = next(iter(cand.values()))
    for reason, suffix in (("length", views.TRUNCATED), ("stop", "")):
        g = dataclasses.replace(pr.greedy[0], finish_reason=reason)
        assert views.answer_cell(dataclasses.replace(pr, greedy=(g, *pr.greedy[1:]))) == g.text + suffix
    heat = views.transition_heatmap(v.transitions).to_html()
    broken = int(v.transitions.iloc[0, 2])  # correct -> incorrect
    assert broken > 0 and heat.count("rgba(207,34,46,") >= 1 and "rgba(26,127,55," in heat  # broken red, fixed green
    zeros = int((v.transitions.iloc[:, 1:] == 0).to_numpy().sum())
    assert heat.count("background-color") == 9 - zeros  # an empty cell stays blank
    html = views.styled_probes(v.probes).to_html()
    assert "color: #cf222e" in html and "color: #1a7f37" in html  # incorrect red, correct green


def test_probe_detail_shows_both_models_samples_and_evidence(data: AppData, store: Store) -> None:
    pid = views.compare_runs(store, data.baseline, data.candidate, transition="broken").probe_ids[0]
    html = views.probe_detail(store, pid, [data.baseline, data.candidate])
    probe = load_results(store, data.baseline).by_id()[pid].probe
    assert probe.question.split()[0] in html and probe.answers[0] in html
    assert data.baseline in html and data.candidate in html
    assert "exact-match agreement" in html and "exact-match entropy" in html and html.count("paraphrase 1") >= 2
    assert ">agreement " not in html  # one name per measure: exact-match here, meaning agreement in the evidence
    cut = [g for r in (data.baseline, data.candidate) for g in load_results(store, r).by_id()[pid].greedy
           if g.finish_reason == "length"]
    assert html.count("cut at max_tokens") == len(cut)  # every greedy answer cut at the token limit is marked
    prompt = load_results(store, data.candidate).by_id()[pid].greedy[0].prompt
    assert prompt and html.count("prompt sent (question)") == 2 and escape(prompt) in html
    assert html.count("<ol class='wb-samples'>") == 4  # question + 1 paraphrase, both runs: one sample a line
    assert evidence_html.format_value(0.005347582224854227) == "0.00535"
    assert evidence_html.format_value({"p_value": 0.0053475822, "n": 3}) == '{"p_value": 0.00535, "n": 3}'
    assert evidence_html.format_value("x" * 500).endswith("…") and len(evidence_html.format_value("x" * 500)) == 400
    # the candidate's failure has its attribution: evidence in sentences, the raw fields one click away
    att = reviews.effective_attributions(store, data.candidate)[pid]
    k, n = att.evidence["samples"]["correct"], att.evidence["samples"]["n"]
    assert "attribution:" in html and f"The model gave the right answer in {k} of {n} samples" in html
    assert "<details class='wb-raw-evidence'>" in html and "p_value" in html.split("wb-raw-evidence")[1]
    assert "p_value" not in html.split("wb-raw-evidence")[0]  # no raw field names in the prose
    assert f"title='{escape(glossary.CATEGORY_HELP[att.category])}'" in html  # the category explained
    # a broken probe: the baseline answered it right, so it has nothing to attribute (its run is attributed)
    assert "answered correctly: nothing to attribute" in html and "no attribution stored" not in html
    assert "pick a probe" in views.probe_detail(store, "", [data.baseline])
    ids = views.detail_choices(store, data.baseline, data.candidate, [pid, "not-in-the-run"])
    assert ids[0] == pid and len(ids) == len(load_results(store, data.baseline).probes)  # listed first, then all
    assert views.detail_choices(store, "", data.candidate) == []
    assert "no run answered" in views.probe_detail(store, "no-such-probe", [data.baseline])


def test_step_probe_walks_the_listed_probes() -> None:
    ids = ["nq2", "nq10", "sq1"]
    assert [views.step_probe(ids, "nq10", s) for s in (-1, 1, 5, -5)] == ["nq2", "sq1", "sq1", "nq2"]
    assert views.step_probe(ids, "gone", 1) == "nq2" and views.step_probe(ids, "", -1) == "sq1"
    assert views.step_probe([], "nq2", 1) == "nq2"


def test_overrides_are_append_only_and_feed_compare_and_fix_sets(data: AppData, store: Store) -> None:
    pid = views.compare_runs(store, data.baseline, data.candidate, transition="broken").probe_ids[0]
    before = store.answer_rows(data.baseline)
    r1 = reviews.record_override(store, reviewer="ann", run_id=data.baseline, probe_id=pid, target="verdict",
                                 new_value="incorrect", reason="the accepted answer is outdated <script>")
    assert (r1.old_value, r1.new_value) == ("correct", "incorrect")
    assert reviews.effective_verdicts(store, data.baseline)[pid] == Verdict.INCORRECT
    # The comparison now sees the baseline's probe as wrong: it is no longer a broken probe.
    assert pid not in views.compare_runs(store, data.baseline, data.candidate, transition="broken").probe_ids
    r2 = reviews.record_override(store, reviewer="bob", run_id=data.baseline, probe_id=pid, target="verdict",
                                 new_value="correct", reason="ann was wrong")
    assert r2.old_value == "incorrect" and r2.id > r1.id
    assert [r.new_value for r in reviews.list_reviews(store, data.baseline, probe_id=pid)] == ["incorrect", "correct"]
    assert store.answer_rows(data.baseline) == before  # the grader's verdicts are never touched
    html = views.probe_detail(store, pid, [data.baseline])
    assert "grade overridden" in html and "bob" in html and "<script>" not in html
    assert f"at {shown_time(r2.at)}:" in html and r2.at not in html  # to the second, as every table shows times
    # A corrected grade that marks the model's answer wrong becomes a DPO pair for the next fix set.
    bad = views.compare_runs(store, data.baseline, data.candidate, transition="correct -> incorrect")
    cand_pid = next(p for p in bad.probe_ids if p != pid)
    assert _pairs(store, data.candidate) == []
    reviews.record_override(store, reviewer="ann", run_id=data.candidate, probe_id=cand_pid, target="verdict",
                            new_value="correct", reason="alias")  # grader fix: no pair
    assert _pairs(store, data.candidate) == []
    ok_pid = next(p.probe.id for p in load_results(store, data.baseline).probes if p.verdict == Verdict.CORRECT
                  and p.probe.id != pid)
    reviews.record_override(store, reviewer="ann", run_id=data.baseline, probe_id=ok_pid, target="verdict",
                            new_value="incorrect", reason="wrong entity")
    res = load_results(store, data.baseline).by_id()[ok_pid]
    [grade] = reviews.corrected_grades(store, data.baseline)
    assert grade.probe_id == ok_pid and grade.answer == res.answer
    # The answer is an accepted answer: the reviewer disputes the probe; chosen = rejected would teach nothing.
    assert normalize(res.answer) == normalize(res.probe.answers[0])
    assert _pairs(store, data.baseline) == []
    # An answer the grader accepted leniently (not an accepted answer) becomes chosen = accepted, rejected = it.
    lenient = dataclasses.replace(grade, answer=res.answer + " Vale")
    assert lenient.dpo_pair() == (res.probe.answers[0], res.answer + " Vale")


def _pairs(store: Store, run_id: str) -> list[tuple[str, str]]:
    """The DPO pairs the next fix set gets from a run's corrected grades."""
    return [p for g in reviews.corrected_grades(store, run_id) if (p := g.dpo_pair()) is not None]


def test_attribution_override_and_validation(data: AppData, store: Store) -> None:
    pid = next(iter(reviews.effective_attributions(store, data.candidate)))
    old = reviews.effective_attributions(store, data.candidate)[pid].category
    new = "data:missing" if old != "data:missing" else "data:conflict"
    r = reviews.record_override(store, reviewer="ann", run_id=data.candidate, probe_id=pid, target="attribution",
                                new_value=new, reason="no such fact in the corpus")
    assert r.old_value == old
    att = reviews.effective_attributions(store, data.candidate)[pid]
    assert att.category == new and att.evidence["review"]["reviewer"] == "ann"
    from workbench.attribution.types import load_attributions

    assert load_attributions(store, data.candidate)[pid].category == old  # original kept
    for kwargs, match in [({"reason": " "}, "reason"), ({"reviewer": ""}, "reviewer"),
                          ({"new_value": "data:nope"}, "category"), ({"probe_id": "zzz"}, "no answered probe"),
                          ({"target": "release"}, "override target")]:
        args = {"reviewer": "ann", "run_id": data.candidate, "probe_id": pid, "target": "attribution",
                "new_value": new, "reason": "x", **kwargs}
        with pytest.raises(WorkbenchError, match=match):
            reviews.record_override(store, **args)


def test_the_gate_reads_reviewed_attributions_as_the_app_does(data: AppData, store: Store) -> None:
    """A reviewer's category override reaches the recorded gate (its per-category transitions and broken-probe
    list), as it reaches the Compare tab: both read the reviews table through workbench.reviews."""
    from workbench.gating import gate_runs

    atts = reviews.effective_attributions(store, data.baseline)
    before = gate_runs(store, data.baseline, data.candidate).result
    changed = {c.probe_id for c in before.changes}
    pid = next((p for p in sorted(atts) if p in changed), sorted(atts)[0])  # one in the broken/fixed list if any
    old = atts[pid].category
    new = "data:missing" if old != "data:missing" else "data:conflict"
    reviews.record_override(store, reviewer="ann", run_id=data.baseline, probe_id=pid, target="attribution",
                            new_value=new, reason="the corpus has no such fact")
    after = gate_runs(store, data.baseline, data.candidate).result

    def n(result: Any, cat: str) -> int:
        return result.by_category[cat].total if cat in result.by_category else 0

    assert (n(after, new), n(after, old)) == (n(before, new) + 1, n(before, old) - 1)
    assert [c.category for c in after.changes if c.probe_id == pid] == [new] * len(changed & {pid})
    shown = views.compare_runs(store, data.baseline, data.candidate, transition="all").probes
    assert shown.set_index("probe").loc[pid, "category"].startswith(f"{new} (")


def test_a_signoff_is_tied_to_one_recorded_gate(data: AppData, store: Store) -> None:
    """No gate: a sign-off is refused (a block is not). A sign-off records its gate and shows on that gate only;
    on this FAIL gate it needs an override with a reason; after a reviewer changes a grade the gate saw, it also
    needs an explicit confirmation; a later FAIL gate of the candidate shows beside it."""
    from workbench.gating import gate_runs
    from workbench.regression.recorded import recorded_gates
    from workbench.store import shown_time

    with pytest.raises(WorkbenchError, match="has no recorded gate: a sign-off is tied to one"):
        reviews.record_release(store, reviewer="ann", run_id=data.candidate, decision="signoff", reason="ok")
    no_gate = signoff_views.signoff_note(store, data.candidate)
    assert "**no recorded gate**" in no_gate and "--override-reason" in no_gate
    assert "no recorded gate for this pair" in views.compare_runs(store, data.baseline, data.candidate).summary_html
    assert reviews.record_release(store, reviewer="ann", run_id=data.candidate, decision="block",
                                  reason="no gate yet").gate_id is None
    g1 = gate_runs(store, data.baseline, data.candidate).id
    with pytest.raises(WorkbenchError, match=f"gate `{g1}` is FAIL: a sign-off over a failed or inconclusive gate"):
        reviews.record_release(store, reviewer="bob", run_id=data.candidate, decision="signoff", reason="waived")
    r = reviews.record_release(store, reviewer="bob", run_id=data.candidate, decision="signoff", reason="waived",
                               override_reason="a random adapter, signed for the demo")
    assert r.gate_id == g1 and reviews.signoff_check(store, data.candidate).changed == ()
    assert "signoff</b> by bob" in views.compare_runs(store, data.baseline, data.candidate).summary_html
    # times to the second, as every table shows them (store.shown_time), in the sign-off line and the gate picker
    line = signoff_views.signoff_line(store, data.baseline, data.candidate)
    assert f"by bob at {shown_time(r.at)}: " in line and r.at not in line
    ((label, _),) = signoff_views.gate_choices(store, data.candidate)
    assert label.endswith(f" · {shown_time(recorded_gates(store, candidate=data.candidate)[0].created_at)}")
    # a reviewer changes a grade the gate saw: a sign-off on g1 now needs confirming, and the note says so
    pid = views.compare_runs(store, data.baseline, data.candidate, transition="broken").probe_ids[0]
    reviews.record_override(store, reviewer="ann", run_id=data.candidate, probe_id=pid, target="verdict",
                            new_value="correct", reason="alias")
    assert reviews.signoff_check(store, data.candidate).changed == (f"{data.candidate}:{pid}",)
    note = signoff_views.signoff_note(store, data.candidate, g1)
    assert "changed 1 grade it saw" in note and "confirm" in note and g1 in note
    with pytest.raises(WorkbenchError, match="changed 1 grade it saw"):
        reviews.record_release(store, reviewer="bob", run_id=data.candidate, decision="signoff", reason="again",
                               override_reason="still the demo")
    confirmed = reviews.record_release(store, reviewer="bob", run_id=data.candidate, decision="signoff",
                                       reason="read the change", confirm=True, override_reason="still the demo")
    assert confirmed.gate_id == g1 and confirmed.old_value == "signoff"
    reviews.record_override(store, reviewer="ann", run_id=data.candidate, probe_id=pid, target="verdict",
                            new_value="incorrect", reason="no, wrong")  # undone: the grade is what the gate saw
    assert reviews.signoff_check(store, data.candidate).changed == ()
    # a later gate of the same pair: the sign-off on g1 does not show on it
    g2 = gate_runs(store, data.baseline, data.candidate).id
    hist = {h["gate_id"]: h["signoff"] for h in history(store)}
    assert hist[g1] is not None and hist[g1]["reason"] == "read the change" and hist[g2] is None
    table = views.gate_history_table(store).set_index("gate")["sign-off"]
    assert table[g1].startswith(f"signoff by bob on gate {g1} (FAIL); override: still the demo; later gate {g2} FAIL")
    assert table[g2] == ""
    assert "no sign-off yet" in views.compare_runs(store, data.baseline, data.candidate).summary_html
    assert [g for _, g in signoff_views.gate_choices(store, data.candidate)] == [g2, g1]
    # the runs table says what the sign-off stands on: the gate's verdict, the override, the later gate
    assert views.runs_table(store)["release"].iloc[0] == table[g1].split("; reason:")[0]
    assert len(views.reviews_table(store)) == 5  # block, signoff, override, confirmed signoff, override
    with pytest.raises(WorkbenchError, match="unknown gate of candidate run"):
        reviews.record_release(store, reviewer="x", run_id=data.candidate, decision="block", reason="y",
                               gate_id="gate-nope")
    with pytest.raises(WorkbenchError, match="decision"):
        reviews.record_release(store, reviewer="x", run_id=data.candidate, decision="ship", reason="y")
    try:
        reviews.record_release(store, reviewer=" ", run_id=data.candidate, decision="block", reason="y")
    except WorkbenchError as e:
        assert views.refusal(e) == "**not recorded**: `reviewer` is required: say who decides"
    else:
        raise AssertionError("an empty reviewer was accepted")


def test_a_run_in_progress_shows_up(data: AppData, store: Store) -> None:
    rid = store.create_run(model="m", adapter=None, backend="hf", fingerprint="f", suite="world", suite_config={},
                           options={}, n_probes=3, skipped_bad=0)
    df = views.runs_table(store)
    assert df["run"].iloc[0] == rid and df["status"].iloc[0] == "running"
    with pytest.raises(WorkbenchError, match="finished"):
        views.compare_runs(store, data.baseline, rid)


def test_defaults_pick_the_latest_gated_pair_of_finished_runs(data: AppData, store: Store) -> None:
    """Unfinished runs are marked in the dropdowns and never preselected; a recorded gate's pair wins."""
    from workbench.gating import gate_runs

    assert views.default_pair(store) == (data.baseline, data.candidate)  # no gate yet: the two newest finished
    kw: dict[str, Any] = {"adapter": None, "backend": "hf", "fingerprint": "f", "suite": "world",
                          "suite_config": {}, "options": {}, "n_probes": 3, "skipped_bad": 0}
    failed = store.create_run(model="m-failed", **kw)
    store.finish_run(failed, status="failed", metrics=None, generated=0, cached=0)
    running = store.create_run(model="m-partial", **kw)
    assert views.default_pair(store) == (data.baseline, data.candidate)
    assert views.finished_runs(store) == [data.candidate, data.baseline]
    labels = {rid: label for label, rid in views.run_choices(store)}
    assert labels[running].startswith("⚠ RUNNING · ") and labels[failed].startswith("⚠ FAILED · ")
    assert labels[data.candidate].startswith(data.candidate)
    gate_runs(store, data.candidate, data.baseline)  # the latest gate compares the other way round
    assert views.default_pair(store) == (data.candidate, data.baseline)


def test_a_refused_comparison_replaces_the_previous_result(data: AppData, store: Store) -> None:
    ok = views.compare_or_refusal(store, data.baseline, data.candidate)
    assert ok.verdict == "fail" and ok.probe_ids
    rid = store.create_run(model="m", adapter=None, backend="hf", fingerprint="f", suite="world", suite_config={},
                           options={}, n_probes=3, skipped_bad=0)
    bad = views.compare_or_refusal(store, data.baseline, rid)
    assert bad.verdict == "" and "cannot compare" in bad.summary_html and "must be finished" in bad.summary_html
    assert "gate:" not in bad.summary_html and bad.probes.empty and not bad.probe_ids and bad.metrics.empty
    assert "pick a baseline and a candidate" in views.compare_or_refusal(store, "", data.candidate).summary_html


def test_fix_tab_preflight_and_fixset(data: AppData, store: Store) -> None:
    from finetune import ui

    pf = ui.preflight(str(data.model), 0.001, method="lora", seq_len=64, workspace=store.workspace)
    assert not pf.breakdown.empty and "GiB" in pf.chart_html and "preflight --model" in pf.cli
    big = ui.preflight(str(data.model), 80, method="full", seq_len=64)
    assert "fits" in big.verdict and big.recommendations.empty
    fx = ui.build_fix(store, data.baseline, "fixsets/base")
    assert (store.workspace / "fixsets" / "base" / "fixset.json").exists()
    assert fx.path == "fixsets/base" and "training rows" in fx.summary and "workbench fix" in fx.cli
    for bad in ("../outside", "/tmp/outside", "%2e%2e/outside"):
        with pytest.raises(UnsafePathError):
            ui.build_fix(store, data.baseline, bad)
    with pytest.raises(UnsafePathError):
        ui.launch_job(store, "../../etc")
    # refused before anything starts: an unknown method, and grpo on a fix set without GRPO prompts
    with pytest.raises(WorkbenchError, match=r"unknown method `grp`\. Did you mean `grpo`"):
        ui.launch_job(store, "fixsets/base", method="grp")
    with pytest.raises(WorkbenchError, match=r"`trainer.max_steps` must be <= 1000000, got 1e\+30"):
        ui.launch_job(store, "fixsets/base", max_steps=1e30, name="t0")  # a widget value, bounded by the spec
    with pytest.raises(WorkbenchError, match=r"`trainer.max_steps` must be a finite number"):
        ui.launch_job(store, "fixsets/base", max_steps=float("inf"), name="t0")
    with pytest.raises(WorkbenchError, match=r"no `prompts` training rows for method grpo; rebuild it with "
                       r"`--strategy rl`, or use method sft / dpo"):
        ui.launch_job(store, "fixsets/base", method="grpo", name="t0")
    assert not (store.workspace / "jobs" / "t0").exists()


@pytest.mark.slow
def test_fix_tab_launches_follows_and_stops_a_job(data: AppData, store: Store) -> None:
    from finetune import ui

    ui.build_fix(store, data.baseline, "fixsets/base")
    job = ui.launch_job(store, "fixsets/base", method="sft", max_steps=2000, name="t1")
    assert job.cli.startswith("workbench train jobs/t1/job.yaml")
    deadline = time.time() + 240
    view = ui.follow_job(store, job.output_dir)
    while time.time() < deadline and view.loss.empty:
        time.sleep(1)
        view = ui.follow_job(store, job.output_dir)
        assert view.running or not view.loss.empty, view.status
    assert not view.loss.empty and "running" in view.status
    assert "stopped" in ui.stop_job(store, job.output_dir, who="ann")
    after = ui.follow_job(store, job.output_dir)
    assert "stopped" in after.status and not after.running and "stopped" in set(after.events["kind"])
    # An empty "max steps" widget leaves the steps to the job's rule (epochs over the fix set), not a UI default.
    ruled = ui.launch_job(store, "fixsets/base", method="sft", name="t2")
    ui.stop_job(store, ruled.output_dir)
    from finetune.job import from_dict, load_spec, resolve

    saved = load_spec(store.workspace / ruled.output_dir / "job.yaml")
    fresh = resolve(from_dict({"fixset": str(store.workspace / "fixsets/base"), "method": "sft",
                               "output_dir": str(store.workspace / "jobs/unused"), "workspace": str(store.workspace)},
                              where="job"))
    assert saved.trainer.max_steps == fresh.max_steps and "epochs x" in fresh.steps_rule, fresh.steps_rule


def test_review_cli_matches_the_app(data: AppData, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    from hallucination_workbench import main

    pid = views.compare_runs(store, data.baseline, data.candidate, transition="broken").probe_ids[0]
    cli = views.cli_review(store.workspace, data.candidate, target="verdict", value="correct", reason="alias ok",
                           probe_id=pid, reviewer="ann")
    import shlex

    argv = shlex.split(cli)
    assert argv[0] == "workbench"
    assert main(argv[1:]) == 0
    assert reviews.effective_verdicts(store, data.candidate)[pid] == Verdict.CORRECT
    assert main(["review", data.candidate, "--workspace", str(store.workspace), "--json"]) == 0
    assert '"reviewer": "ann"' in capsys.readouterr().out
    assert main(["review", data.candidate, "--workspace", str(store.workspace), "--target", "release",
                 "--value", "ship", "--reason", "x"]) == 2


def test_follow_job_plots_the_reward_and_abstention_of_a_grpo_job(store: Store) -> None:
    from finetune import records, ui

    out = store.workspace / "jobs" / "g1"
    out.mkdir(parents=True)
    job_id = records.create_job(store, method="grpo", spec={}, run_id=None, fixset_path="f", fixset_hash="h")
    (out / "job_id").write_text(job_id)
    records.set_status(store, job_id, "running")
    for step in (1, 2):
        records.add_metrics(store, job_id, step, {"loss": 0.01, "reward": 0.1 * step, "abstention/replay": 0.0,
                                                  "kl/replay": 0.3, "completions/mean_length": 4.0})
    view = ui.follow_job(store, "jobs/g1")
    assert set(view.loss["name"]) == {"loss", "reward", "abstention/replay"}
    assert list(view.loss[view.loss["name"] == "reward"]["value"]) == pytest.approx([0.1, 0.2])
    assert "**running** (grpo)" in view.status

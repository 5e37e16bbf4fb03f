"""The reading aids as plain functions (no gradio): per-group deltas with intervals, the shares of every
run over time, paging of the probe table, the glossary, evidence in words with span tracing, and the Fix tab
opening an existing job."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from _appdata import AppData, app_data, private_store
from markupsafe import escape  # the escaping the templates apply (autoescape)

from workbench import glossary, reviews, views
from workbench.attribution.types import CATEGORIES, Attribution
from workbench.gating import compare_stored
from workbench.html import evidence as evidence_html
from workbench.html import plots
from workbench.regression.compare import RunOutcomes, compare
from workbench.regression.policy import GATE_TYPES
from workbench.regression.transitions import Transition
from workbench.safepath import UnsafePathError
from workbench.store import Store


@pytest.fixture(scope="module")
def data(world: Any, tmp_path_factory: pytest.TempPathFactory) -> AppData:
    return app_data(world, tmp_path_factory)


@pytest.fixture()
def store(data: AppData, tmp_path: Path) -> Store:
    return private_store(data, tmp_path)


def test_deltas_per_tag_with_their_intervals(data: AppData, store: Store) -> None:
    result, b_out, c_out = compare_stored(store, data.baseline, data.candidate)
    d = plots.group_deltas(result, b_out, c_out)
    assert d.by == "tag" and set(d.table["group"]) == set(result.by_tag) and "overall" not in set(d.table["group"])
    for row in d.table.itertuples(index=False):
        metric = {label: key for key, label, _ in plots.SHARES}[row.measure]
        m = result.by_tag[row.group].metrics[metric]
        assert row._3 == round(100 * m.delta, 1) and row._4 == round(100 * m.ci_low, 1) <= row._3 <= row._5
    html = views.compare_runs(store, data.baseline, data.candidate).delta_plot
    assert "change per tag" in html and html.count("<g class='wb-delta'>") == len(d.table)
    assert all(f">{t} " in html for t in result.by_tag)


def test_without_tags_the_deltas_are_per_attribution_category(data: AppData, store: Store) -> None:
    _, b_out, c_out = compare_stored(store, data.baseline, data.candidate)

    def untagged(o: RunOutcomes) -> RunOutcomes:
        return RunOutcomes(o.run_id, o.label, {k: dataclasses.replace(v, tags=()) for k, v in o.outcomes.items()})

    b, c = untagged(b_out), untagged(c_out)
    d = plots.group_deltas(compare(b, c), b, c)
    cats = {o.category or plots.NO_CATEGORY for o in b.outcomes.values()}
    assert d.by == "attribution category" and set(d.table["group"]) == cats and len(cats) > 1
    per_group = d.table.drop_duplicates("group")
    assert int(per_group["n"].sum()) == len(b.outcomes)
    assert (d.table["ci low"] <= d.table["delta pts"]).all() and (d.table["delta pts"] <= d.table["ci high"]).all()


def test_a_zero_change_stays_visible() -> None:
    df = plots.pd.DataFrame([["t", 5, "correct", 0.0, -3.0, 2.0], ["t", 5, "hallucinated", 4.0, 1.0, 8.0]],
                            columns=list(plots.DELTA_COLUMNS))
    html = plots.delta_plot_html(plots.GroupDeltas("tag", df))
    assert "fill='white'" in html and "+0.0" in html and "+4.0" in html  # hollow marker and its label
    bars = plots.bar_chart_html([("a", "run", 0.0), ("a", "other", 50.0)], scale=100)
    assert "min-width:3px" in bars and "0.0%" in bars


def test_shares_of_every_run_over_time(data: AppData, store: Store) -> None:
    df = plots.run_shares(store)
    assert list(df["run"]) == [data.baseline, data.candidate]  # creation order
    for row in df.itertuples(index=False):
        assert abs(row._4 + row._5 + row._6 - 100) < 0.3
    running = store.create_run(model="partial", adapter=None, backend="hf", fingerprint="f", suite="world",
                               suite_config={}, options={}, n_probes=3, skipped_bad=0)
    store.finish_run(running, status="interrupted", metrics={"overall": {"correct": 1.0, "incorrect": 0.0,
                                                                          "not_attempted": 0.0}},
                     generated=3, cached=0)
    assert running not in set(plots.run_shares(store)["run"])  # unfinished runs left out by default
    both = plots.run_shares(store, include_unfinished=True)
    assert list(both["run"]) == [data.baseline, data.candidate, running]
    html = plots.shares_plot_html(both)  # baseline, candidate and the partial run are no series: no line joins them
    assert html.count("<polyline") == 0 and html.count("<circle class='wb-share'") == 9
    assert f"<title>{data.candidate} (done" in html and f"<title>{running} (interrupted" in html
    assert "no finished run" in plots.shares_plot_html(plots.run_shares(Store.open(store.workspace / "empty")))
    again = store.create_run(model=store.get_run(data.baseline).model, adapter=None, backend="hf", fingerprint="f",
                             suite="world", suite_config={}, options={}, n_probes=3, skipped_bad=0)
    store.finish_run(again, status="done", metrics={"overall": {"correct": 1.0, "incorrect": 0.0,
                                                                "not_attempted": 0.0}}, generated=3, cached=0)
    html = plots.shares_plot_html(plots.run_shares(store))  # the base model twice: one line per share joins them
    assert html.count("<polyline") == 3 and html.count("<circle class='wb-share'") == 9


def test_paging_works_with_the_search_and_the_filter(data: AppData, store: Store) -> None:
    v = views.compare_runs(store, data.baseline, data.candidate, transition="all")
    n = len(v.probes)
    assert n > 25
    first = views.page_probes(v.probes, page=1, size=25)
    assert len(first.table) == 25 and first.pages == -(-n // 25) and first.label.startswith(f"page 1 of {first.pages}")
    last = views.page_probes(v.probes, page=999, size=25)  # clamped
    assert last.page == last.pages and len(last.table) == n - 25 * (last.pages - 1)
    assert first.matching_ids == v.probe_ids  # next/previous in the detail walk every listed probe, not one page
    pid = v.probe_ids[-1]
    hit = views.page_probes(v.probes, query=pid.upper(), page=3, size=25)
    assert pid in hit.matching_ids and hit.page == 1 and "matching" in hit.label
    assert all(pid.lower() in " ".join(map(str, r)).lower() for r in hit.table.itertuples(index=False))
    broken = views.compare_runs(store, data.baseline, data.candidate, transition="broken")
    assert views.page_probes(broken.probes, size=25).matching_ids == broken.probe_ids  # after the filter
    assert views.page_probes(views.empty(views.PROBE_COLUMNS)).label == "page 1 of 1 · rows 0-0 of 0"
    with pytest.raises(ValueError, match="page size"):
        views.page_probes(v.probes, size=7)


def test_every_category_transition_and_gate_is_explained() -> None:
    assert set(glossary.CATEGORY_HELP) == set(CATEGORIES)
    assert {str(t) for t in Transition} | {"broken", "fixed"} <= set(glossary.TRANSITIONS)
    assert set(glossary.GATE_HELP) == set(GATE_TYPES)
    assert glossary.explain("mcnemar") and glossary.explain("nope") == ""
    md = glossary.glossary_markdown()
    assert all(f"`{k}`" in md for k in [*CATEGORIES, *GATE_TYPES, "now_abstains", "meaning agreement"])
    assert glossary.term_html("<x>") == "&lt;x&gt;"


def test_evidence_reads_as_sentences_with_spans_and_their_documents(data: AppData, store: Store) -> None:
    atts = reviews.effective_attributions(store, data.candidate)
    traced = [a for a in atts.values() if a.evidence.get("data", {}).get("spans")]
    assert traced, "the real attribution traced no span of any hallucination"
    att = traced[0]
    html = views.probe_detail(store, att.probe_id, [data.baseline, data.candidate])
    span = att.evidence["data"]["spans"][0]
    assert "spans of the answer found word for word in the corpus" in html
    assert f"<mark>{escape(span['text'])}</mark>" in html
    assert all(f"<code>{r['doc_id']}</code>" in html for r in span["rows"])
    hostile = Attribution("p", "data:missing", 0.5, "Unknown", "abstain", {
        "why": "<b>x</b>", "samples": {"correct": 2, "n": 10, "question_correct": 1, "question_n": 5},
        "greedy": [{"variant": 0, "text": "a", "verdict": "incorrect"},
                   {"variant": 1, "text": "b", "verdict": "correct"}],
        "agreement": 0.5, "data": {"available": True, "support": 0, "support_rows": [], "conflict_rows": [],
                                   "spans": [{"text": "<script>", "words": 1, "count": 2,
                                              "rows": [{"doc_id": "d<1>", "snippet": "<i>s</i>"}]}]}})
    twice = {"text": "which", "words": 1, "count": 4, "rows": []}
    assert evidence_html.spans_html([twice, {**twice, "text": "Which"}]).count("<mark>") == 1  # once per text
    h = evidence_html.attribution_html(hostile)
    assert "<script>" not in h and "&lt;script&gt;" in h and "d&lt;1&gt;" in h and "<b>x</b>" not in h
    assert "The model gave the right answer in 2 of 10 samples (1 of 5 for the question as asked)" in h
    assert "Its paraphrase 1 was answered correctly" in h and "The corpus has 0 documents" in h
    assert "Meaning agreement of the samples: 50%" in h and "1 word ·" in h


@pytest.mark.slow  # over 5 s on 2 cores
def test_fix_tab_opens_an_existing_job(data: AppData, store: Store) -> None:
    from finetune import ui

    assert ui.list_jobs(store) == []
    ui.build_fix(store, data.baseline, "fixsets/base")
    job = ui.launch_job(store, "fixsets/base", method="sft", max_steps=2, name="done-job")
    deadline = time.time() + 240
    result = store.workspace / job.output_dir / "result.json"
    while ui.follow_job(store, job.output_dir).running or not result.exists():
        assert time.time() < deadline, ui.follow_job(store, job.output_dir).status
        time.sleep(1)
    (store.workspace / "jobs" / "later").mkdir()
    (store.workspace / "jobs" / "later" / "job.yaml").write_text("method: dpo\n")
    assert ui.list_jobs(store) == [("jobs/later · dpo · not started", "jobs/later"),
                                   ("jobs/done-job · sft · done", "jobs/done-job")]
    d = ui.open_job(store, "jobs/done-job")
    assert "method: sft" in d.config and "**done**" in d.summary and "after 2 steps" in d.summary
    assert "known facts broken by the job" in d.summary and not d.view.loss.empty
    assert "of the fix set's validation slice" in d.summary  # the job's denominator, named
    assert "- gate: none recorded for this adapter yet" in d.summary
    # the last step's weights, whole: sft's default `auto` found no smaller scale fixing 80% of 2 steps' targets
    assert "adapter scale 1: no scale below 1.0 fixes >= 80%" in d.summary and "rolled back" not in d.summary
    import dataclasses

    from finetune.job.result import read_result, write_result

    res = read_result(store.workspace / job.output_dir)
    assert res is not None  # a job that rolled back and scaled its delta says both, with the reasons
    write_result(dataclasses.replace(res, kept_step=1, kept_reason="fewest known facts broken",
                                     adapter_scale=0.5, adapter_scale_reason="the smallest scale fixing 80%"),
                 store.workspace / job.output_dir)
    summary = ui.open_job(store, "jobs/done-job").summary
    assert "- rolled back to step 1: fewest known facts broken" in summary
    assert "- adapter scale 0.5: the smallest scale fixing 80%" in summary
    # a finished job: its card from its records, not `train` (which would train again)
    assert d.cli.startswith("workbench card jobs/done-job/adapter --workspace") and "train" not in d.cli
    assert "made by `workbench train jobs/done-job/job.yaml` (running it again trains again)" in d.summary
    assert ui.open_job(store, "jobs/later").cli.startswith("workbench train jobs/later/job.yaml --workspace")
    from finetune import records  # the same job stopped after its checkpoints, before its result

    (store.workspace / "jobs/done-job/result.json").unlink()
    records.set_status(store, str(ui.job_id_of(store, "jobs/done-job")), "stopped", finished=True)
    assert ui.open_job(store, "jobs/done-job").cli.startswith("workbench train jobs/done-job/job.yaml --resume")
    with pytest.raises(ui.WorkbenchError, match=r"holds no job\.yaml"):
        ui.open_job(store, "fixsets")
    with pytest.raises(UnsafePathError):
        ui.open_job(store, "../outside")

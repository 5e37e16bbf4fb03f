"""The app's panels and the HTML report render through one Jinja2 environment with autoescape (workbench.html):
no hand-placed `escape(` is left in the rendering code, and a script in any field a user controls (probe text,
model answers, reviewer names, reasons, run labels, tags, gate names and descriptions, evidence, report text)
comes out as text in every panel and report."""

from __future__ import annotations

import json
import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from _appdata import AppData, app_data, private_store
from jinja2 import UndefinedError
from sqlalchemy import update

from workbench import reviews, views
from workbench.html import environment, macro, plots, render
from workbench.html import evidence as evidence_html
from workbench.html import signoff as signoff_views
from workbench.html import verdict as verdict_html
from workbench.html.gate_report import render_html
from workbench.regression import ProbeOutcome, RunOutcomes, compare, parse_policy
from workbench.reviews import Review
from workbench.store import Store
from workbench.store import schema as t
from workbench.types import Verdict

ROOT = Path(__file__).resolve().parents[1]
EVIL = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
RENDERING = ["workbench/html/__init__.py", "workbench/views.py", "workbench/html/evidence.py",
             "workbench/html/verdict.py", "workbench/html/signoff.py", "workbench/html/plots.py",
             "workbench/glossary.py", "workbench/html/gate_report.py", "workbench/reports/views.py",
             "finetune/ui.py"]
"""The modules that make HTML: they hand values to templates and never escape by hand."""


def assert_escaped(html: str, at_least: int = 1) -> None:
    assert "<script" not in html, html[max(0, html.find("<script") - 200):html.find("<script") + 200]
    assert html.count(ESCAPED) >= at_least, (html.count(ESCAPED), at_least)


@pytest.fixture(scope="module")
def data(world: Any, tmp_path_factory: pytest.TempPathFactory) -> AppData:
    return app_data(world, tmp_path_factory)


def test_no_hand_placed_escape_in_the_rendering_code() -> None:
    hand = re.compile(r"\bescape\(|html\.escape|from html import")
    found = [f"{path}:{i}" for path in RENDERING
             for i, line in enumerate((ROOT / path).read_text().splitlines(), 1) if hand.search(line)]
    assert found == []


def test_the_environment_escapes_and_refuses_unknown_names() -> None:
    env = environment()
    assert env.from_string("<p>{{ x }}</p>").render(x=EVIL) == f"<p>{ESCAPED}</p>"
    with pytest.raises(UndefinedError, match="'missing' is undefined"):
        env.from_string("{{ missing }}").render()
    with pytest.raises(UndefinedError):  # a misspelt field of a value is an error too, never an empty cell
        env.from_string("{{ x.nme }}").render(x=SimpleNamespace(name="a"))
    assert env is environment()  # one environment, built once


def test_every_template_is_package_data() -> None:
    """An installed wheel carries the templates (pyproject's package-data covers every file in templates/)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    templates = sorted((ROOT / "workbench/html/templates").iterdir())
    assert templates and all(any(fnmatch(f"templates/{p.name}", g) for g in globs["workbench.html"])
                             for p in templates)
    assert all("http://" not in (p.read_text().replace("http://www.w3.org/2000/svg", ""))
               and "https://" not in p.read_text() for p in templates)  # nothing fetched: reports work offline


def _hostile_comparison() -> tuple[Any, RunOutcomes, RunOutcomes]:
    """Two runs whose labels, probe ids, questions, answers and tags, and a policy whose gate name and
    description, all carry a script."""
    v = [Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED]
    base = {f"{EVIL}{k}": ProbeOutcome(f"{EVIL}{k}", (EVIL,), v[k % 3], f"{EVIL} base {k}", question=f"{EVIL}?",
                                       category=EVIL) for k in range(12)}
    cand = {pid: ProbeOutcome(pid, (EVIL,), v[(k + 1) % 3], f"{EVIL} cand {k}", question=f"{EVIL}?",
                              category=EVIL) for k, pid in enumerate(base)}
    policy = parse_policy(f"bootstrap: {{resamples: 100}}\ngates:\n  - {{type: max_broken, max_count: 0, "
                          f"name: '{EVIL}', description: '{EVIL}'}}\n")
    b, c = RunOutcomes(f"run-{EVIL}", f"base {EVIL}", base), RunOutcomes(f"run2-{EVIL}", f"cand {EVIL}", cand)
    return compare(b, c, policy), b, c


def test_the_verdict_block_the_delta_plot_and_the_report_escape_every_field() -> None:
    result, b, c = _hostile_comparison()
    summary = verdict_html.verdict_summary_html(result)
    assert_escaped(summary, at_least=4)  # both labels, the gate's name and its description
    assert_escaped(verdict_html.gate_html(result.gates[0]), at_least=2)
    page = render_html(result)
    assert_escaped(page, at_least=12)  # labels, run ids, tag, and the broken probes' ids, questions and answers
    assert page.count("<svg") == 2 and "<style>" in page and "<link" not in page  # self-contained
    assert_escaped(plots.delta_plot_html(plots.group_deltas(result, b, c)), at_least=3)  # the tag and its tips


def test_plots_escape_run_ids_groups_series_and_titles() -> None:
    shares = pd.DataFrame([[f"{EVIL}{i}", f"2026-{EVIL}", "done", 3, 50.0, 30.0, 20.0, EVIL] for i in range(2)],
                          columns=list(plots.SHARE_COLUMNS))
    assert_escaped(plots.shares_plot_html(shares), at_least=6)  # every point's title
    assert_escaped(plots.bar_chart_html([(EVIL, EVIL, 1.0)], unit=EVIL, title=EVIL), at_least=4)


def test_evidence_escapes_every_field() -> None:
    rows = [{"doc_id": EVIL, "snippet": EVIL}]
    spans = [{"text": EVIL, "words": 3, "count": 1, "rows": rows}]
    evidence: dict[str, Any] = {
                "why": EVIL, "correct_sample": EVIL, "greedy": [{"variant": 1, "verdict": "correct", "text": EVIL}],
                "data": {"support": 1, "support_rows": rows, "conflict": 1,
                         "conflict_value": EVIL, "conflict_rows": rows,
                         "spans": spans},
                "missing_signals": {EVIL: EVIL}}
    att = SimpleNamespace(category=EVIL, confidence=0.5, knowledge=EVIL, fix=EVIL, evidence=evidence)
    assert_escaped(evidence_html.attribution_html(att), at_least=17)
    assert_escaped(evidence_html.spans_html(spans), at_least=3)
    assert_escaped(evidence_html.rows_html(EVIL, rows, "wb-support"), at_least=3)


def _poison_probe(store: Store, run_id: str, probe_id: str) -> None:
    """Every text of one probe of a stored run (question, paraphrases, answers, tags, subject) and every answer
    the model gave to it (greedy and samples, and the prompt sent) made a script."""
    with store.engine.begin() as c:
        row = c.execute(t.probes.select().where(t.probes.c.run_id == run_id, t.probes.c.probe_id == probe_id)).one()
        d = json.loads(row.data_json)
        d.update(question=EVIL, paraphrases=[EVIL for _ in d.get("paraphrases") or []], answers=[EVIL],
                 incorrect_answers=[EVIL], tags=[EVIL], subject=EVIL, relation=EVIL)
        c.execute(update(t.probes).where(t.probes.c.run_id == run_id, t.probes.c.probe_id == probe_id)
                  .values(data_json=json.dumps(d)))
        c.execute(update(t.answers).where(t.answers.c.run_id == run_id, t.answers.c.probe_id == probe_id)
                  .values(text=EVIL, prompt=EVIL))


def test_probe_detail_and_signoff_escape_stored_text_and_reviewers(data: AppData, tmp_path: Path) -> None:
    from workbench.gating import gate_runs

    store = private_store(data, tmp_path)
    pid = views.compare_runs(store, data.baseline, data.candidate, transition="broken").probe_ids[0]
    for run in (data.baseline, data.candidate):
        _poison_probe(store, run, pid)
    reviews.record_override(store, reviewer=EVIL, run_id=data.candidate, probe_id=pid, target="verdict",
                            new_value="correct", reason=EVIL)
    detail = views.probe_detail(store, pid, [data.baseline, data.candidate])
    # question, tags, subject, relation, answers, wrong answers, and per run greedy answers, prompts, reviewer, reason
    assert_escaped(detail, at_least=12)
    gate = gate_runs(store, data.baseline, data.candidate).id
    reviews.record_release(store, reviewer=EVIL, run_id=data.candidate, decision="signoff", reason=EVIL,
                           override_reason=EVIL, confirm=True)
    line = signoff_views.signoff_line(store, data.baseline, data.candidate)
    assert_escaped(line, at_least=3)
    assert gate in line
    assert_escaped(views.compare_runs(store, data.baseline, data.candidate).summary_html, at_least=3)
    refused = views.compare_or_refusal(store, data.baseline, EVIL).summary_html
    assert "id='wb-refused'" in refused and "<script" not in refused


def test_an_unknown_template_is_an_error() -> None:
    """A template that is not there is an error, not an empty panel."""
    from jinja2 import TemplateNotFound

    with pytest.raises(TemplateNotFound):
        render("no-such-panel.html")


def test_the_reports_tab_and_a_recorded_decision_keep_a_users_words_as_text() -> None:
    """Markdown panels: a script stays text and Markdown's marks are defused (no link, no emphasis)."""
    hostile = f"{EVIL} **bold** [a](javascript:b)"
    decision = SimpleNamespace(decision="hallucinated", abstain=False, answers=[hostile], reviewer=hostile,
                               at="2026-01-01 00:00:00", report_id=hostile)
    report = SimpleNamespace(id="rep-1", status="new", line=3, group_size=2,
                             source="/data/<img src=x onerror=alert(1)>.jsonl",
                             messages=[{"role": "user", "content": hostile}], answer=hostile, comment=hostile,
                             feedback={EVIL: hostile}, decision=decision)
    text = macro("reports.md", "report", report, "2026-01-01 00:00:00", hostile, "2026-01-01 00:00:00")
    assert_escaped(text, at_least=7)  # message, answer, complaint, feedback key and value, decision, reviewer
    assert "`&lt;img src=x onerror=alert(1)&gt;.jsonl`" in text  # the file's name
    assert "**bold**" not in text and "[a](javascript" not in text and "\\*\\*bold\\*\\* \\[a\\]" in text
    assert_escaped(macro("reports.md", "decided", decision, "", hostile), at_least=3)
    line = signoff_views.recorded_line(Review(id=1, at="2026-01-01T00:00:00Z", reviewer=hostile, target="release",
                                              run_id="run-1", probe_id=None, old_value=None, new_value="signoff",
                                              reason=hostile, gate_id="gate-1", override_reason=hostile))
    assert_escaped(line, at_least=2)
    assert line.startswith("recorded #1: `run-1` signoff by ") and "; **override**: " in line

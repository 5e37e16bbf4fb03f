"""Regression reports: JUnit XML, JSON, Markdown, terminal, and the self-contained HTML in Chromium."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from workbench.glossary import GATE_HELP
from workbench.html.gate_report import render_html, write_reports
from workbench.regression import (
    ComparisonResult,
    ProbeOutcome,
    RunOutcomes,
    compare,
    parse_policy,
    render_json,
    render_junit,
    render_markdown,
    render_terminal,
)
from workbench.types import Verdict

C, W, N = Verdict.CORRECT, Verdict.INCORRECT, Verdict.NOT_ATTEMPTED
CHROMIUM = Path("/usr/bin/chromium")
EVIL = "<script>alert('x')</script> | & \"q\""

POLICY = """\
bootstrap: {resamples: 300}
gates:
  - {type: max_broken, max_count: 0, description: "nothing may break <ever>"}
  - {type: mcnemar, name: mcnemar_ok}
  - {type: max_hallucination_increase, max_points: 50, severity: warn}
  - {type: max_abstention_on_previously_correct, max_fraction: 0, severity: warn}
"""


@pytest.fixture(scope="module")
def result() -> ComparisonResult:
    rows = [(v, v, ("geo",)) for v in [C, W, N] * 10] + [(C, W, ("geo", "a&b")), (C, N, ("a&b",)), (W, C, ()),
                                                        (W, N, ())]  # fmt: skip
    base = {f"p{k}": ProbeOutcome(f"p{k}", t, b, f"base answer {k}", question=f"question {k}?")
            for k, (b, _, t) in enumerate(rows)}  # fmt: skip
    cand = {f"p{k}": ProbeOutcome(f"p{k}", t, c, f"cand answer {k}") for k, (_, c, t) in enumerate(rows)}
    base["p30"] = ProbeOutcome("p30", ("geo", "a&b"), C, EVIL, question="question 30?")
    return compare(RunOutcomes("run-1", "base <v1>", base), RunOutcomes("run-2", "cand", cand),
                   parse_policy(POLICY))  # fmt: skip


def test_result_summary(result: ComparisonResult) -> None:
    assert [g.status for g in result.gates] == ["fail", "pass", "pass", "warn"]
    assert (result.verdict, result.exit_code) == ("fail", 1)
    assert [c.probe_id for c in result.broken] == ["p30", "p31"] and [c.probe_id for c in result.fixed] == [
        "p32"
    ]
    assert [(c.probe_id, str(c.transition)) for c in result.changes if c.flip == "still_wrong"] == [
        ("p33", "now_abstains")]  # fmt: skip


@pytest.fixture(scope="module")
def inconclusive() -> ComparisonResult:
    """The gate: 4 known facts, 95 hallucinations turned into abstentions, built-in policy."""
    rows = [(C, C)] * 4 + [(W, N)] * 95 + [(N, N)]
    base = {f"nq{k}": ProbeOutcome(f"nq{k}", (), b, "Paris" if b == C else "Neptune") for k, (b, _) in enumerate(rows)}
    cand = {f"nq{k}": ProbeOutcome(f"nq{k}", (), c, "Paris" if c == C else "i don't know")
            for k, (_, c) in enumerate(rows)}  # fmt: skip
    return compare(RunOutcomes("run-a", "base", base), RunOutcomes("run-b", "base + adapter", cand))


def _order(text: str, *parts: str) -> list[int]:
    return [text.index(p) for p in parts]


def test_junit_has_one_testcase_per_gate_with_failures_marked(result: ComparisonResult) -> None:
    root = ET.fromstring(render_junit(result))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == [g.name for g in result.gates]
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["max_broken"]
    assert root.get("tests") == "4" and root.get("failures") == "1"
    warned = cases[3].find("system-out")
    assert warned is not None and (warned.text or "").startswith("WARNING:")
    suite = root.find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert props["verdict"] == "fail" and props["exit_code"] == "1" and props["format_version"] == "4"
    detectable = {c.get("name"): {p.get("name"): p.get("value") for p in c.findall("properties/property")}
                  for c in cases}  # fmt: skip
    assert detectable["mcnemar_ok"]["detectable"].startswith("could detect: >= 6 broken probes")
    # the broken probes, with question and both answers, in the broken gate's failure and the suite's output
    failure = cases[0].find("failure")
    assert failure is not None and "p31 'question 31?': 'base answer 31' -> 'cand answer 31'" in (failure.text or "")
    out = suite.find("system-out")
    assert out is not None and (out.text or "").startswith("verdict: FAIL (exit 1)")
    assert "broken probes (2)" in (out.text or "") and "hallucinated" in (out.text or "")


def test_junit_marks_a_gate_that_could_not_fail_as_skipped(inconclusive: ComparisonResult) -> None:
    root = ET.fromstring(render_junit(inconclusive))
    suite = root.find("testsuite")
    # the blind McNemar gate, and the four gates whose sets were not evaluated (fix targets, guard set, field suite)
    assert suite is not None and suite.get("skipped") == "5" and suite.get("failures") == "0"
    skips = {c.get("name"): c for c in root.iter("testcase") if c.find("skipped") is not None}
    assert set(skips) == {"not_significantly_worse", "targets_fixed", "guard_facts_kept", "field_fixes_kept",
                          "field_failures_fixed"}
    assert "NOT CHECKED: not checked: no guard set" in (skips["guard_facts_kept"].findtext("system-out") or "")
    case = skips["not_significantly_worse"]
    skipped = case.find("skipped")
    assert case.get("name") == "not_significantly_worse" and skipped is not None
    assert "could not fail on this probe set" in (skipped.get("message") or "")
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert props["verdict"] == "inconclusive" and props["exit_code"] == "3"


def test_json_round_trips_and_is_plain(result: ComparisonResult) -> None:
    data = json.loads(render_json(result))
    assert data["verdict"] == "fail" and data["exit_code"] == 1 and data["n_probes"] == 34
    assert data["format_version"] == 4 and list(data)[:5] == ["format_version", "verdict", "exit_code",
                                                              "headline", "broken"]  # fmt: skip
    assert set(data["overall"]["metrics"]) == {"correct", "incorrect", "not_attempted",
                                               "accuracy_given_attempted", "f_score"}  # fmt: skip
    assert data["overall"]["transitions"]["counts"][0] == [10, 1, 1]
    assert data["overall"]["transitions"]["transitions"]["now_abstains"] == 1
    assert {c["flip"] for c in data["changes"]} == {"broken", "fixed", "still_wrong"}
    assert {c["transition"] for c in data["changes"]} == {"broken_hallucinates", "broken_abstains", "fixed",
                                                         "now_abstains"}  # fmt: skip
    broken = [(b["probe_id"], b["question"]) for b in data["broken"]]
    assert broken == [("p30", "question 30?"), ("p31", "question 31?")]
    rows = {r["label"]: (r["baseline_count"], r["candidate_count"]) for r in data["headline"]["rows"]}
    assert rows == {"correct": (12, 11), "hallucinated": (12, 11), "abstained": (10, 12)}
    assert all(g["detectable"]["text"] for g in data["gates"]) and data["inconclusive_gates"] == []
    assert data["policy"]["bootstrap"]["resamples"] == 300
    assert json.loads(json.dumps(result.to_dict())) == data


def test_markdown_and_terminal_render_the_key_facts(result: ComparisonResult) -> None:
    md = render_markdown(result)
    assert md.startswith("# Regression check: FAIL")
    for section in ("## Gates", "## Metrics", "## Transitions", "## Per tag", "## Broken probes (2)"):
        assert section in md
    # the headline, then the broken probes, before everything else
    assert _order(md, "## All probes", "## Broken probes", "## Gates", "## Metrics") == sorted(
        _order(md, "## All probes", "## Broken probes", "## Gates", "## Metrics"))  # fmt: skip
    assert "| hallucinated | 12 (35.3%) | 11 (32.4%) |" in md
    assert "| p31 | question 31? | base answer 31 | cand answer 31 | broken_abstains |" in md
    assert "## Other verdict changes (2)" in md and "| p33 | question 33? |" in md and "now_abstains |" in md
    assert "could detect: &gt;= 6 broken probes" in md  # Markdown escapes data and text alike
    assert "\\| &amp; " in md  # a pipe in an answer does not break the table
    # each gate type of the report explained once, in the glossary's (the app's) words
    assert f"- `max_broken`: {GATE_HELP['max_broken']}" in md and md.count("- `max_broken`:") == 1
    # Data is text in Markdown too: no raw HTML from an answer or a model name survives into the report.
    assert "<script" not in md and "&lt;script&gt;" in md and "base &lt;v1&gt;" in md
    text = render_terminal(result, width=400)
    assert "FAIL" in text and "max_broken" in text and "p31" in text
    # the terminal explains the same gate types in the same words, once each, after the gates table
    explained = [line.strip() for line in text.split("What the gates check:")[1].splitlines()[1:]]
    types = list(dict.fromkeys(g.type for g in result.gates))
    assert explained[:len(types)] == [f"{t}: {GATE_HELP[t]}" for t in types]
    assert text.count(f"max_broken: {GATE_HELP['max_broken']}") == 1
    assert _order(text, "hallucinated", "broken probes (2)", "p31 'question 31?'", "Gates") == sorted(
        _order(text, "hallucinated", "broken probes (2)", "p31 'question 31?'", "Gates"))  # fmt: skip


def test_inconclusive_reports_say_which_gate_could_not_fail(inconclusive: ComparisonResult) -> None:
    md = render_markdown(inconclusive)
    assert md.startswith("# Regression check: INCONCLUSIVE")
    assert "**Verdict: INCONCLUSIVE (exit 3): not\\_significantly\\_worse could not have failed" in md or (
        "**Verdict: INCONCLUSIVE (exit 3): not_significantly_worse could not have failed" in md)
    assert "| abstained | 1 (1.0%) | 96 (96.0%) | +95.00 |" in md and "now_abstains 95" in md
    assert "| inconclusive | not" in md
    text = render_terminal(inconclusive, width=200)
    assert "INCONCLUSIVE (exit 3)" in text and "could not fail on this probe set" in text
    page = render_html(inconclusive)
    assert 'id="verdict" class="inconclusive">INCONCLUSIVE<' in page and 'id="inconclusive"' in page


@pytest.mark.parametrize("field", ["model", "tag", "probe", "answer"])
def test_markdown_keeps_hostile_names_as_text(field: str) -> None:
    """A model name, tag, probe id or answer holding HTML or Markdown markup stays literal text."""
    evil = "<img src=x onerror=alert(1)>[link](javascript:alert(2))*x*`y`"
    pid = evil if field == "probe" else "p0"
    tags = (evil,) if field == "tag" else ("t",)
    answer = evil if field == "answer" else "a"
    base = {pid: ProbeOutcome(pid, tags, C, answer)}
    cand = {pid: ProbeOutcome(pid, tags, W, answer)}
    label = evil if field == "model" else "m"
    md = render_markdown(compare(RunOutcomes("run-1", label, base), RunOutcomes("run-2", label, cand),
                                 parse_policy(POLICY)))
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "[link](" not in md and "\\[link\\](" in md and "\\*x\\*" in md and "\\`y\\`" in md


def test_html_is_self_contained_and_escaped(result: ComparisonResult) -> None:
    page = render_html(result)
    assert "<script" not in page and "&lt;script&gt;" in page and "base &lt;v1&gt;" in page
    assert not re.search(r"""(src|href)\s*=""", page) and "@import" not in page and "url(" not in page
    assert page.count('<svg class="tag-chart"') == 1 + len(result.by_tag)
    for hook in ('id="verdict"', 'id="metric-deltas"', 'id="transition-matrix"', 'id="broken-probes"'):
        assert hook in page
    hooks = ['id="headline"', 'id="broken-probes"', 'id="gates"', 'id="metric-deltas"', 'id="other-changes"']
    assert _order(page, *hooks) == sorted(_order(page, *hooks))
    assert "question 31?" in page and "could detect: &gt;= 6 broken probes" in page
    assert 'id="inconclusive"' not in page


def test_write_reports(tmp_path: Path, result: ComparisonResult) -> None:
    files = write_reports(result, tmp_path / "out")
    assert sorted(files) == ["html", "json", "junit", "markdown"]
    assert all(p.is_file() and p.stat().st_size > 0 for p in files.values())


@pytest.mark.browser
def test_html_report_in_headless_chromium(tmp_path: Path, result: ComparisonResult) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing")
    sync_api = pytest.importorskip("playwright.sync_api")
    path = tmp_path / "report.html"
    path.write_text(render_html(result), encoding="utf-8")
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=args, headless=True)
        try:
            page = browser.new_page()
            page.add_init_script("window.alert = () => { window.alertFired = true; };")
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(path.as_uri())
            assert requests == [path.as_uri()]  # nothing fetched besides the page itself
            assert page.locator("#verdict").is_visible() and page.inner_text("#verdict") == "FAIL"
            for table in ("#metric-deltas", "#transition-matrix", "#broken-probes"):
                assert page.locator(table).is_visible()
            assert page.locator("#metric-deltas tbody tr").count() == 5
            assert page.locator("#headline tbody tr").count() == 3
            assert "question 31?" in page.inner_text("#broken-probes")
            assert page.locator("#transition-matrix tbody tr").count() == 3
            broken = page.inner_text("#broken-probes")
            assert "p31" in broken and "cand answer 31" in broken and EVIL.split(" |")[0] in broken
            charts = page.locator("svg.tag-chart")
            assert charts.count() == 3 and charts.first.is_visible()
            assert page.locator("svg.tag-chart rect.bar").count() == 3 * 6
            assert page.evaluate("() => window.alertFired === undefined")  # the evil answer is inert text
        finally:
            browser.close()

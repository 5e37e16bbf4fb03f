"""End to end in headless Chromium: Compare two runs, open a broken probe, record a review override,
and find it in the store. Screenshots go to test-artifacts/app/ (and, with
WORKBENCH_UPDATE_SCREENSHOTS=1, to docs/screenshots/ for the docs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _appbrowser import ARGS, CHROMIUM, NEEDS_CHROMIUM, field, pick, shot
from _appdata import AppData, app_data, private_copy
from procs import free_port

pytestmark = [pytest.mark.browser, NEEDS_CHROMIUM]


@pytest.fixture(scope="module")
def served(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, AppData]]:
    import app

    data = app_data(world, tmp_path_factory)
    ws = private_copy(data.workspace, tmp_path_factory.mktemp("browser") / "ws")
    demo, url = app.launch(ws, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url, AppData(ws, data.baseline, data.candidate, data.model)
    finally:
        demo.close()


def test_compare_detail_and_review_override(served: tuple[str, AppData]) -> None:
    from playwright.sync_api import sync_playwright

    from workbench import reviews
    from workbench.store import Store

    url, data = served
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(url)
            page.wait_for_selector("#queue-summary:has-text('No gate recorded yet')")  # the first screen
            page.get_by_role("tab", name="Runs").click()  # one click away
            page.locator("#runs-table [role=gridcell]").filter(has_text=data.candidate).first.wait_for()
            page.wait_for_selector("#tag-chart .wb-chart")
            page.wait_for_selector("#shares-plot .wb-shares circle.wb-share")
            assert (page.locator("#shares-plot title").first.text_content() or "").startswith(data.baseline)
            table = page.locator("#runs-table")  # the key columns fit: no horizontal scrolling at 1400 px
            assert table.evaluate("e => { const s = e.querySelector('.table-wrap') || e;"
                                  " return s.scrollWidth <= s.clientWidth + 2; }")
            shot(page, "runs")

            page.get_by_role("tab", name="Compare").click()
            pick(page, "baseline", data.baseline)
            pick(page, "candidate", data.candidate)
            pick(page, "transition", "broken")
            page.locator("#compare-btn").click()
            page.wait_for_selector("#compare-summary #wb-verdict")
            assert "gate: NOT RECORDED" in page.locator("#compare-summary").inner_text()  # no verdict made up
            page.wait_for_selector("#delta-plot svg.wb-delta-plot")
            assert "change per tag" in page.locator("#delta-plot").inner_text()
            page.wait_for_selector("#page-label:has-text('page 1 of ')")
            cell = page.locator("#probes-table [role=gridcell].first-column").first
            probe_id = cell.inner_text().strip()
            assert probe_id and "broken" in page.locator("#probes-table").inner_text()
            page.locator("#transitions").scroll_into_view_if_needed()  # the heatmap and the probe table
            shot(page, "compare", full_page=False)

            cell.click()  # opens the Probe detail tab
            page.wait_for_selector("#probe-detail #wb-probe-detail")
            detail = page.locator("#probe-detail").inner_text()
            assert probe_id in detail and "exact-match agreement" in detail and "attribution:" in detail
            assert "The model gave the right answer in" in detail and "raw evidence" in detail
            shot(page, "probe-detail")

            page.get_by_role("tab", name="Review").click()
            assert field(page, "review-probe").input_value() == probe_id  # carried over from Compare
            field(page, "reviewer").fill("ann")
            pick(page, "review-value", "correct")
            field(page, "review-reason").fill("the adapter's answer is an accepted alias")
            page.locator("#review-btn").click()
            page.wait_for_selector("#review-msg:has-text('recorded')")
            shot(page, "review")

            page.get_by_role("tab", name="Fix").click()
            for table_id, header in (("pf-recs", "peak GiB"), ("job-events", "message")):  # not gradio's 1 2 3
                page.wait_for_selector(f"#{table_id} th:has-text('{header}')")
            field(page, "pf-model").fill(str(data.model))
            page.locator("#pf-btn").click()
            page.wait_for_selector("#pf-chart .wb-chart")
            shot(page, "fix", full_page=False)
        finally:
            browser.close()
    rows = reviews.list_reviews(Store.open(data.workspace), data.candidate, target="verdict")
    assert [(r.probe_id, r.reviewer, r.old_value, r.new_value) for r in rows] == [
        (probe_id, "ann", "incorrect", "correct")]
    assert rows[0].reason == "the adapter's answer is an accepted alias"


def test_the_trade_by_default_and_no_careless_signoff(served: tuple[str, AppData]) -> None:
    """the finished pair is preselected (a running run is marked, not picked); Compare shows the
    headline, every verdict change (broken first) and each gate's detectability by default; a sign-off needs a
    recorded gate, on this FAIL gate the override box and its reason, and, after an override changed a grade it
    saw, the confirmation box; an empty reviewer is a message beside the form; a pair that cannot be compared
    replaces the previous verdict."""
    from playwright.sync_api import sync_playwright

    from workbench.store import Store

    url, data = served
    running = Store.open(data.workspace).create_run(
        model="partial", adapter=None, backend="hf", fingerprint="f", suite="world", suite_config={}, options={},
        n_probes=3, skipped_bad=0)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(url)
            page.get_by_role("tab", name="Runs").click()
            page.locator("#runs-table [role=gridcell]").filter(has_text=running).first.wait_for()
            page.get_by_role("tab", name="Compare").click()
            page.wait_for_function(f"document.querySelector('#candidate input').value.startsWith('{data.candidate}')")
            assert page.locator("#baseline input").input_value().startswith(data.baseline)
            page.locator("#compare-btn").click()  # default filter: any verdict change
            page.wait_for_selector("#compare-summary #wb-headline")
            summary = page.locator("#compare-summary").inner_text()
            assert "gate: NOT RECORDED" in summary and "hallucinated" in summary and "abstained" in summary
            assert "what-if, not recorded" in summary and "FAIL" in summary.split("what-if")[1]
            assert "verdicts changed" in summary and ("could detect" in summary or "could not fail" in summary)
            first = page.locator("#probes-table [role=row]").nth(1).inner_text()
            assert "broken_" in first, first
            page.wait_for_selector("#page-label:has-text('page 1 of ')")
            label = "page" + page.locator("#page-label").inner_text().split("page", 1)[1]  # past a progress note
            search = field(page, "probe-search")
            search.fill(first.split()[0])  # the search box narrows the table to that probe, on page 1 of 1
            page.wait_for_selector("#page-label:has-text('matching')")
            assert "page 1 of 1 · rows 1-" in page.locator("#page-label").inner_text()
            search.fill("")
            page.wait_for_function(f"document.querySelector('#page-label').innerText.includes({label!r})")
            page.get_by_role("button", name="Record gate verdict").click()
            page.wait_for_selector("#gate-msg:has-text('recorded gate')")
            page.wait_for_selector("#compare-summary .wb-badge:has-text('gate: FAIL')")  # the recorded verdict
            page.locator("#compare-summary").scroll_into_view_if_needed()
            page.evaluate("window.scrollTo(0, 0)")  # the verdict and the headline, not the search box
            shot(page, "compare-headline", full_page=False)
            cell = page.locator("#probes-table [role=gridcell].first-column").first
            probe_id = cell.inner_text().strip()
            second = page.locator("#probes-table [role=gridcell].first-column").nth(1).inner_text().strip()
            cell.click()  # carries the probe and the candidate run to the Review tab
            page.wait_for_selector("#probe-detail #wb-probe-detail")
            page.locator("body").click(position={"x": 5, "y": 5})  # focus out of any field
            page.keyboard.press("j")  # the next listed probe, then back
            page.wait_for_selector(f"#probe-detail h3:has-text('{second}:')")
            page.keyboard.press("ArrowLeft")
            page.wait_for_selector(f"#probe-detail h3:has-text('{probe_id}:')")
            page.get_by_role("tab", name="Review").click()
            page.wait_for_selector("#release-note:has-text('decision on gate')")
            assert field(page, "release-gate").input_value().startswith("gate-")
            field(page, "release-reason").fill("checked the broken probes")
            page.locator("#release-btn").click()  # no reviewer name
            page.wait_for_selector("#release-msg:has-text('reviewer')")
            assert "not recorded" in page.locator("#release-msg").inner_text()
            assert page.locator(".error").count() == 0  # no "Error" badge over the log

            field(page, "reviewer").fill("ann")
            assert field(page, "review-probe").input_value() == probe_id
            pick(page, "review-value", "correct")
            field(page, "review-reason").fill("an accepted alias")
            page.locator("#review-btn").click()
            page.wait_for_selector("#review-msg:has-text('recorded')")
            page.wait_for_selector("#release-note:has-text('changed 1 grade it saw')")
            assert "(FAIL," in page.locator("#release-note").inner_text()
            page.locator("#release-btn").click()
            page.wait_for_selector("#release-msg:has-text('confirm')")
            refused = page.locator("#release-msg").inner_text()
            assert "not recorded" in refused and "is FAIL" in refused and "tick override" in refused, refused
            page.locator("#release-confirm input").check()
            page.locator("#release-override input").check()
            field(page, "release-override-reason").fill("the random adapter, signed for the screenshot")
            page.locator("#release-btn").click()
            page.wait_for_selector("#release-msg:has-text('recorded #')")
            for table in ("#review-log", "#gate-history"):  # key columns readable without horizontal scrolling
                assert page.locator(table).evaluate("e => { const s = e.querySelector('.table-wrap') || e;"
                                                    " return s.scrollWidth <= s.clientWidth + 2; }"), table
            shot(page, "signoff", full_page=False)

            page.get_by_role("tab", name="Compare").click()
            pick(page, "candidate", running)
            assert "RUNNING" in page.locator("#candidate input").input_value()
            page.locator("#compare-btn").click()
            page.wait_for_selector("#compare-summary:has-text('cannot compare')")
            assert "gate:" not in page.locator("#compare-summary").inner_text()
            assert "recorded gate" not in page.locator("#gate-msg").inner_text()
        finally:
            browser.close()


def test_probe_detail_opened_directly_is_no_dead_end(served: tuple[str, AppData]) -> None:
    """Opened first, the Probe detail tab offers the preselected pair's probes and shows one; a probe the baseline
    answered right says it has nothing to attribute, not that the run has no attribution."""
    from playwright.sync_api import sync_playwright

    url, data = served
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(url)
            page.wait_for_selector("#queue-summary:has-text('No gate')")  # the page has loaded
            page.get_by_role("tab", name="Probe detail").click()
            page.wait_for_selector("#probe-detail #wb-probe-detail")
            assert data.baseline in page.locator("#detail-pair").inner_text()
            page.locator("#probe-pick input").click()
            assert page.get_by_role("option").count() > 10  # every probe of the pair on offer
            page.keyboard.press("Escape")
            detail = page.locator("#probe-detail").inner_text()
            assert "answered correctly: nothing to attribute" in detail and "no attribution stored" not in detail
        finally:
            browser.close()

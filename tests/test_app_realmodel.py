"""The app in headless Chromium at 1400x1000 on long real answers: the real chat model on 20 NQ
questions answering in sentences (chat template, 64 tokens), an abstention LoRA SFT job trained from its
attributions, and the gate of base vs base + adapter, all made through the CLI (tests/_appdata.py).

Checks: the preselected pair is the gated one; the verdict headline shows the trade (correct / hallucinated /
abstained before -> after); the probe table lists the changed probes by default; long answers wrap and are never
cut (an answer cut at max_tokens is marked); the probe detail shows the prompt actually sent (chat template and
system prompt); the Fix tab's picker opens the SFT job with its config, result and curves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _appbrowser import ARGS, CHROMIUM, NEEDS_CHROMIUM, field, pick, shot
from _appdata import REAL_SYSTEM, RealAppData, private_copy, real_workspace
from procs import free_port

from workbench import views

pytestmark = [pytest.mark.browser, pytest.mark.slow, NEEDS_CHROMIUM]

# A cell's content fits its box (no text hidden behind an ellipsis or clipped), within a pixel of rounding.
FITS = "e => e.scrollWidth <= e.clientWidth + 2 && e.scrollHeight <= e.clientHeight + 2"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, RealAppData]]:
    import app

    data = real_workspace(tmp_path_factory)
    ws = private_copy(data.workspace, tmp_path_factory.mktemp("real-browser") / "ws")
    demo, url = app.launch(ws, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url, RealAppData(ws, data.baseline, data.candidate, data.gate, data.job_dir, data.seconds)
    finally:
        demo.close()


@pytest.fixture()
def page(served: tuple[str, RealAppData]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.set_default_timeout(30_000)
            pg.goto(served[0])
            pg.get_by_role("tab", name="Runs").click()
            pg.locator("#runs-table [role=gridcell]").filter(has_text=served[1].candidate).first.wait_for()
            yield pg
        finally:
            browser.close()


def _cell(page: Any, text: str) -> Any:
    return page.locator("#probes-table [role=gridcell]").filter(has_text=text).first


def test_long_real_answers_the_trade_and_the_prompt(served: tuple[str, RealAppData], page: Any) -> None:
    from workbench.gating import compare_stored
    from workbench.results import load_results
    from workbench.store import Store

    _, data = served
    store = Store.open(data.workspace)
    result = compare_stored(store, data.baseline, data.candidate)[0]
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_function(f"document.querySelector('#candidate input').value.startsWith('{data.candidate}')")
    assert page.locator("#baseline input").input_value().startswith(data.baseline)  # the gated pair
    page.locator("#compare-btn").click()
    page.wait_for_selector("#compare-summary #wb-headline")
    summary = page.locator("#compare-summary").inner_text()
    assert f"gate: {result.verdict.upper()}" in summary
    for row in result.headline.rows:  # the trade, before -> after, over all probes
        assert row.label in summary
        assert f"{100 * row.delta.baseline:.1f}% ({row.baseline_count})" in summary
        assert f"{100 * row.delta.candidate:.1f}% ({row.candidate_count})" in summary
    changed = result.headline.changed
    assert changed > 0, "the abstention adapter changed no verdict"
    assert f"{changed} of {result.overall.n} verdicts changed" in summary
    page.wait_for_selector(f"#page-label:has-text('of {changed}')")  # the changed probes, by default
    listed = page.locator("#probes-table").inner_text()
    assert not any(f"still_{x}" in listed for x in ("correct", "hallucinates", "abstains"))
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "compare-real-headline", full_page=False)

    pick(page, "transition", "all", exact=True)  # every probe: the longest answers and the cut ones
    page.locator("#compare-btn").click()
    page.wait_for_selector(f"#page-label:has-text('of {result.overall.n}')")
    answers = {}
    for run in (data.baseline, data.candidate):
        for pr in load_results(store, run).probes:
            answers.setdefault(pr.probe.id, []).append(views.answer_cell(pr))
    cut = [a for texts in answers.values() for a in texts if a.endswith(views.TRUNCATED)]
    assert cut, "no answer hit 64 tokens: the marker is untested"
    longest = sorted((a for texts in answers.values() for a in texts), key=len)[-3:]
    assert len(longest[-1]) > 120, longest
    for text in [*longest, *cut]:  # whole, wrapped, marked when cut
        cell = _cell(page, " ".join(text.replace(views.TRUNCATED, "").split())[-50:])
        cell.scroll_into_view_if_needed()
        assert " ".join(text.split()) in " ".join(cell.inner_text().split()), text
        assert cell.evaluate(FITS), text

    page.locator("#page-label").scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, document.querySelector('#page-label').getBoundingClientRect().top - 10)")
    shot(page, "compare-real-probes", full_page=False)

    pid = next(p for p, texts in answers.items() if longest[-1] in texts)
    _cell(page, pid).click()
    page.wait_for_selector("#probe-detail #wb-probe-detail")
    page.locator("#probe-detail details.wb-prompt summary").first.click()
    prompt = page.locator("#probe-detail details.wb-prompt pre").first.inner_text()
    question = load_results(store, data.baseline).by_id()[pid].probe.question
    assert REAL_SYSTEM in prompt and question in prompt  # the chat-rendered prompt, as sent
    assert " ".join(longest[-1].replace(views.TRUNCATED, "").split())[:80] in " ".join(
        page.locator("#probe-detail").inner_text().split())
    shot(page, "probe-detail-real", full_page=False)


def test_fix_tab_opens_the_trained_job(served: tuple[str, RealAppData], page: Any) -> None:
    _, data = served
    page.get_by_role("tab", name="Fix").click()
    for table, header in (("pf-recs", "peak GiB"), ("job-events", "message")):  # headers, never gradio's 1 2 3
        page.wait_for_selector(f"#{table} th:has-text('{header}')")
    pick(page, "job-pick", Path(data.job_dir).name)
    page.wait_for_selector("#job-status:has-text('after 8 steps')")
    status = page.locator("#job-status").inner_text()
    assert "known facts broken" in status and "final loss" in status
    assert field(page, "job-dir").input_value() == data.job_dir
    page.get_by_text("job config (job.yaml)").click()
    page.wait_for_selector("#job-config:has-text('method: sft')")
    page.wait_for_selector("#job-loss canvas, #job-loss svg")  # the loss curve drew
    assert page.locator("#job-events [role=gridcell]").count() > 0  # the job's events
    page.get_by_text("job config (job.yaml)").click()  # closed again: the status and the curve on one screen
    page.evaluate("window.scrollBy(0, document.querySelector('#job-status').getBoundingClientRect().top - 120)")
    shot(page, "fix-job", full_page=False)

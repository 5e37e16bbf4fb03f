"""The Reports tab: its handlers as plain functions (the same calls and command lines as `workbench reports`), and
one report decided in headless Chromium and found in the store."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from _appbrowser import ARGS, CHROMIUM, NEEDS_CHROMIUM, field, shot
from clirun import workbench
from procs import free_port

from workbench.reports import Redactor, get_report, read_reports
from workbench.reports import views as rv
from workbench.reports.queue import add_reports
from workbench.store import Store, utcnow

CHAT = Path(__file__).parent / "data" / "reports" / "chat_export.jsonl"


def imported(ws: Path) -> Store:
    store = Store.open(ws)
    now = utcnow()
    good = [r for r in read_reports(CHAT, columns={}, redactor=Redactor(pii=True), imported_at=now)
            if not isinstance(r, Exception)]
    add_reports(store, good, imported_at=now)
    return store


@pytest.fixture()
def store(tmp_path: Path) -> Store:
    return imported(tmp_path / "ws")


def report_id(store: Store, needle: str) -> str:
    return next(row[0] for row in rv.queue_view(store).rows if needle in row[4])


def test_queue_filters_and_its_command(store: Store) -> None:
    v = rv.queue_view(store)
    assert v.counts == "**queue**: 7 new, 0 decided, 0 promoted" and len(v.rows) == 7
    australia = [r for r in v.rows if "australia" in r[4].lower()]
    assert [r[5] for r in australia] == ["by 1 more"] * 2  # each shows the other report asking the same
    assert all(r[5] == "" for r in v.rows if r not in australia)  # nothing where no other report asks it
    narrowed = rv.queue_view(store, "", "chat_export", "2026-11-05", "2026-11-06")
    assert sorted(r[4][:5] for r in narrowed.rows) == ["What ", "Write"]
    assert shlex.split(narrowed.cli)[:8] == ["workbench", "reports", "list", "--source", "chat_export", "--since",
                                             "2026-11-05", "--until"]
    with pytest.raises(Exception, match="not an ISO date"):
        rv.queue_view(store, "", "", "last week")


def test_a_report_is_shown_escaped(tmp_path: Path) -> None:
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text('{"messages": [{"role": "user", "content": "<img src=x onerror=alert(1)> **bold** [a](b)"}, '
                       '{"role": "assistant", "content": "`code`"}], "comment": "<script>alert(2)</script>"}\n')
    store = Store.open(tmp_path / "ws")
    reports = [r for r in read_reports(hostile, columns={}, redactor=Redactor(), imported_at=utcnow())
               if not isinstance(r, Exception)]
    add_reports(store, reports, imported_at=utcnow())
    text, cli = rv.report_view(store, reports[0].id)
    assert "<img" not in text and "<script>" not in text and "&lt;script&gt;" in text
    assert "\\*\\*bold\\*\\*" in text and "\\`code\\`" in text and "\\[a\\](b)" in text
    assert cli.startswith(f"workbench reports show {reports[0].id} --workspace ")


def test_decide_and_export_make_the_cli_s_calls(store: Store, tmp_path: Path) -> None:
    rid = report_id(store, "Zugspitze")
    message, cli = rv.decide_view(store, rid, "hallucinated", "2962 m; 2.962 Meter", False, "ann", "checked")
    assert f"decided **{rid}**" in message
    assert shlex.split(cli)[2:] == ["decide", rid, "--decision", "hallucinated", "--answer", "2962 m", "--answer",
                                    "2.962 Meter", "--note", "checked", "--reviewer", "ann", "--workspace",
                                    str(store.workspace)]
    d = get_report(store, rid).decision
    assert d is not None and d.answers == ("2962 m", "2.962 Meter") and d.reviewer == "ann"
    # The command the tab shows does the same when a user runs it (here: on a second workspace).
    other = imported(tmp_path / "other")
    argv = [*shlex.split(cli)[1:-1], str(other.workspace)]
    proc = workbench(*argv, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert get_report(other, rid).decision.answers == d.answers  # type: ignore[union-attr]
    text, export_cli = rv.export_view(store)
    assert "1 probe(s) from 1 report(s)" in text and (store.workspace / "suites" / "field" / "suite.yaml").exists()
    assert export_cli.endswith(f"export --suite {store.workspace / 'suites' / 'field'} --workspace {store.workspace}")
    with pytest.raises(Exception, match="outside the workspace"):
        rv.export_view(store, "/tmp/elsewhere")
    with pytest.raises(Exception, match="needs the reference answer") as refused:
        rv.decide_view(store, report_id(store, "Carthage"), "correct", " ; ", False, "ann")
    assert "*reference answer*" in str(refused.value) and "--" not in str(refused.value)  # the app's words


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    import app

    store = imported(tmp_path / "ws")
    demo, url = app.launch(store.workspace, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url, store
    finally:
        demo.close()


@pytest.mark.browser
@pytest.mark.slow  # 25 s on 2 busy cores, most of it building the app
@NEEDS_CHROMIUM
def test_deciding_a_report_in_the_browser(served: tuple[str, Store]) -> None:
    from playwright.sync_api import sync_playwright

    url, store = served
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(url)
            page.get_by_role("tab", name="Reports").click()
            page.wait_for_selector("#reports-counts:has-text('7 new')")
            page.locator("#reports-table [role=gridcell]").filter(has_text="Zugspitze").first.click()
            page.wait_for_selector("#reports-detail:has-text('Falsch, sie ist 2.962 m hoch.')")
            rid = field(page, "reports-pick").input_value()
            assert rid.startswith("rep-")
            field(page, "reports-reviewer").fill("ann")
            page.locator("#reports-decision input[value='correct']").check()  # no answer: refused, in the app's words
            page.locator("#reports-decide").click()
            page.wait_for_selector("#reports-msg:has-text('not recorded')")
            refused = page.locator("#reports-msg").inner_text()
            assert "reference answer" in refused and "--answer" not in refused and "--" not in refused, refused
            assert page.locator(".toast-body").count() == 0  # a message, not an error toast
            page.locator("#reports-decision input[value='hallucinated']").check()
            field(page, "reports-answers").fill("2962 m; 2.962 Meter")
            field(page, "reports-note").fill("checked the height")
            page.locator("#reports-decide").click()
            page.wait_for_selector("#reports-msg:has-text('decided')")
            page.wait_for_selector("#reports-counts:has-text('1 decided')")
            assert "workbench reports decide" in field(page, "reports-cli").input_value()
            # on to the next report nobody decided, with a blank form (nothing carried over)
            page.wait_for_function(f"document.querySelector('#reports-pick input').value !== {rid!r}")
            assert "next undecided" in page.locator("#reports-msg").inner_text()
            assert "Zugspitze" not in page.locator("#reports-detail").inner_text()
            assert field(page, "reports-answers").input_value() == "" == field(page, "reports-note").input_value()
            assert not page.locator("#reports-abstain input").is_checked()
            page.wait_for_selector("#reports-table [role=gridcell]:has-text('hallucinated → answer: 2962 m')")
            page.locator("#reports-abstain input").check()  # ticked on this report ...
            field(page, "reports-note").fill("a note for this one")
            page.locator("#reports-table [role=gridcell]").filter(has_text="Zugspitze").first.click()
            page.wait_for_function("document.querySelector('#reports-answers textarea, #reports-answers input')"
                                   ".value === '2962 m; 2.962 Meter'")  # ... the decided one shows its decision
            assert not page.locator("#reports-abstain input").is_checked()
            assert field(page, "reports-note").input_value() == "checked the height"
            shot(page, "reports", full_page=False)
        finally:
            browser.close()
    d = get_report(store, rid).decision
    assert d is not None and (d.decision, d.answers, d.reviewer) == ("hallucinated", ("2962 m", "2.962 Meter"), "ann")

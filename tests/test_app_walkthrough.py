"""A reviewer's walk-through in Chromium, timed: signed in as ann, the app opens on the decision queue; three gates
await (pass, warn, and fail under a custom policy that the built-in policy would only warn on); ann reaches the
right decision on each from the first screen in at most two clicks (a click on the gate's row, a click on Sign off
or Block), every verdict the page shows is the recorded one, no gate left unevaluated reads "pass", and the store
holds the three decisions under ann's name. Screenshots go to the test's tmp folder (and, with
WORKBENCH_UPDATE_SCREENSHOTS=1, to docs/screenshots/)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _appbrowser import ARGS, CHROMIUM, NEEDS_CHROMIUM, field, shot
from _appdata import ThreeGates, app_data, three_gates
from procs import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow, NEEDS_CHROMIUM]

#: The right decision on each gate: the reviewer blocks what failed and signs off what passed or only warned.
DECISION = {"fail": "block", "warn": "signoff", "pass": "signoff"}
MAX_CLICKS = 2


@pytest.fixture(scope="module")
def served(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ThreeGates]]:
    import app
    from workbench.auth import add_user

    root = tmp_path_factory.mktemp("walkthrough")
    gates = three_gates(app_data(world, tmp_path_factory), root)
    users = root / "users"
    add_user(users, "ann", "pw-ann")
    demo, url = app.launch(gates.store.workspace, port=free_port(), auth_file=str(users), prevent_thread_lock=True,
                           quiet=True)
    try:
        yield url, gates
    finally:
        demo.close()


def test_the_fixture_is_the_issue_s_case(served: tuple[str, ThreeGates]) -> None:
    """The FAIL gate is FAIL only under its recorded policy: the built-in one says WARN (what the page must not show
    in its place)."""
    from workbench.gating import compare_stored

    _, g = served
    assert compare_stored(g.store, g.baseline, g.runs["fail"])[0].verdict == "warn"


def test_a_reviewer_decides_three_gates_from_the_first_screen(served: tuple[str, ThreeGates], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from workbench import reviews
    from workbench.regression.recorded import read_gates

    url, g = served
    recorded = {r.id: r.verdict for r in read_gates(g.store)}
    by_gate = {gate: verdict for verdict, gate in g.gates.items()}
    seconds: dict[str, float] = {}
    clicks: dict[str, int] = {}
    t_start = time.monotonic()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            _sign_in(page, url)
            seconds["sign in and first screen"] = round(time.monotonic() - t_start, 2)

            # The first screen: the queue, newest first, each verdict as recorded, the candidates by name.
            assert page.get_by_role("tab", name="Decisions").get_attribute("aria-selected") == "true"
            rows = _rows(page, "#queue-awaiting")
            assert [r[0] for r in rows] == [g.gates["fail"], g.gates["warn"], g.gates["pass"]]
            assert [r[2] for r in rows] == [recorded[r[0]].upper() for r in rows] == ["FAIL", "WARN", "PASS"]
            names = {by_gate[r[0]]: r[3] for r in rows}
            assert names["pass"].startswith("model + sft fix of run-") and names["pass"].endswith(" step 40")
            assert "staged (sft→dpo) fix of" in names["warn"] and "dpo fix of" in names["fail"]
            assert all(" of 96" in r[4] and " of 96" in r[5] and "baseline-correct probes" in r[6] for r in rows)
            assert rows[0][7] == "policy strict.yaml"
            reviewer = field(page, "queue-reviewer")
            assert reviewer.input_value() == "ann" and not reviewer.is_editable()  # the signed-in user, read-only
            shot(page, "decisions", full_page=False, folder=tmp_path)

            # FAIL (the newest, shown on arrival): 0 clicks to its evidence, 1 to block it.
            _assert_evidence(page, g.gates["fail"], "FAIL")
            assert "policy strict.yaml" in page.locator("#wb-evidence-recorded").inner_text()
            clicks["fail"] = _decide(page, g.gates["fail"], "block", "a known fact broken: the strict policy fails it")

            # PASS, picked from the queue (1 click), signed off (1 click).
            page.locator("#queue-awaiting [role=gridcell]").filter(has_text=g.gates["pass"]).first.click()
            _assert_evidence(page, g.gates["pass"], "PASS")
            clicks["pass"] = 1 + _decide(page, g.gates["pass"], "signoff", "four hallucinations fixed, nothing broken")

            # WARN, shown next by itself (0 clicks), signed off (1 click): abstention up 50 points, nothing broken.
            _assert_evidence(page, g.gates["warn"], "WARN")
            assert "48 → 0 of 96" in page.locator("#wb-tradeoffs").inner_text()
            shot(page, "decisions-warn", full_page=False, folder=tmp_path)
            clicks["warn"] = _decide(page, g.gates["warn"], "signoff", "hallucinations traded for abstentions")

            page.wait_for_selector("#queue-decided [role=gridcell]:has-text('ann')")
            decided = _rows(page, "#queue-decided")
            assert {(r[0], r[1], r[3], r[4]) for r in decided} == {
                (g.gates[v], v.upper(), DECISION[v], "ann") for v in DECISION}
            assert page.locator("#queue-awaiting [role=gridcell]").count() == 0
            seconds["three decisions"] = round(time.monotonic() - t_start - seconds["sign in and first screen"], 2)
            shot(page, "decisions-decided", full_page=False, folder=tmp_path)

            # The per-probe evidence of the FAIL gate is one click away: Compare heads it with the recorded FAIL
            # (never the WARN its probes give under the built-in policy, which only the labelled what-if may show).
            page.locator("#queue-decided [role=gridcell]").filter(has_text=g.gates["fail"]).first.click()
            page.wait_for_selector(f"#wb-evidence[data-gate='{g.gates['fail']}']")
            page.locator("#queue-compare").click()
            page.wait_for_selector(f"#compare-summary #wb-recorded:has-text('{g.gates['fail']}')")
            assert page.locator("#compare-summary .wb-badge").inner_text() == "gate: FAIL"
            head = page.locator("#compare-summary").inner_text().split("what-if")[0]
            assert "WARN" not in head and "policy strict.yaml" in head
            assert page.locator("#probes-table [role=gridcell]").filter(has_text="broken_").count() >= 1
        finally:
            browser.close()
    assert all(n <= MAX_CLICKS for n in clicks.values()), clicks
    made = {r.gate_id: (r.new_value, r.reviewer) for r in reviews.list_reviews(g.store, target="release")}
    assert made == {g.gates[v]: (DECISION[v], "ann") for v in DECISION}
    seconds["total"] = round(time.monotonic() - t_start, 2)
    (tmp_path / "walkthrough.json").write_text(json.dumps({"seconds": seconds, "clicks": clicks}, indent=1))
    print(f"walk-through: {seconds}, clicks {clicks}")


def test_the_fix_tab_opens_the_candidates_jobs(served: tuple[str, ThreeGates], tmp_path: Path) -> None:
    """The jobs behind the candidates (`fix/RUN/METHOD`, as `workbench demo` lays them out) are listed on Refresh
    jobs; an opened job names both known-facts denominators (the job's validation slice, the gate's baseline-correct
    probes) and its equivalent command does not train again; an empty job folder leaves the events table's header."""
    from playwright.sync_api import sync_playwright

    url, g = served
    dpo = g.jobs["fail"].relative_to(g.store.workspace).as_posix()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            _sign_in(page, url)
            page.get_by_role("tab", name="Fix").click()
            page.get_by_role("button", name="Refresh jobs").click()
            page.locator("#job-pick input").click()
            options = page.get_by_role("option").all_inner_texts()
            assert sorted(options) == sorted(f"{j.relative_to(g.store.workspace).as_posix()} · {m} · done"
                                             for j, m in zip(g.jobs.values(), ("sft", "staged", "dpo"), strict=True))
            page.get_by_role("option", name=f"{dpo} · dpo · done").click()
            page.wait_for_selector("#job-status:has-text('known facts broken by the job')")
            status = page.locator("#job-status").inner_text()
            assert "known facts broken by the job: 3 of 23 (13.0%) of the fix set's validation slice" in status
            assert f"gate {g.gates['fail']} (FAIL, policy strict.yaml): known facts broken 1 of 48 " \
                   "baseline-correct probes (2.1%) of the baseline run" in status, status
            assert field(page, "fix-cli").input_value().startswith(f"workbench card {dpo}/adapter ")  # not train
            page.locator("#job-status").scroll_into_view_if_needed()
            shot(page, "fix-job-denominators", full_page=False, folder=tmp_path)
            field(page, "job-dir").fill("")
            page.locator("#job-open").click()
            page.wait_for_selector("#job-status:has-text('pick a job dir')")
            assert page.locator("#job-events th").filter(has_text="message").count() == 1  # not gradio's 1 2 3
        finally:
            browser.close()


def _sign_in(page: Any, url: str) -> None:
    """Sign in as ann through the login page; returns once the first screen's evidence is there."""
    page.goto(url)
    page.locator("input").nth(0).fill("ann")
    page.locator("input").nth(1).fill("pw-ann")
    page.get_by_role("button", name="Login").click()
    page.wait_for_selector("#queue-evidence #wb-evidence")


def _rows(page: Any, table: str) -> list[list[str]]:
    """The table's rows as cell texts (gradio renders cells as role=gridcell in role=row)."""
    out = []
    for row in page.locator(f"{table} [role=row]").all()[1:]:
        cells = [c.strip() for c in row.locator("[role=gridcell]").all_inner_texts()]
        if cells:
            out.append(cells)
    return out


def _assert_evidence(page: Any, gate_id: str, verdict: str) -> None:
    """The evidence shown is `gate_id`'s, its badge the recorded verdict; every gate not evaluated reads `not
    checked` (grey), none `pass`."""
    page.wait_for_selector(f"#wb-evidence[data-gate='{gate_id}']")
    assert page.locator("#wb-evidence .wb-badge").inner_text() == f"gate: {verdict}"
    unchecked = page.locator("#wb-evidence .wb-gate-not_checked .wb-status").all_inner_texts()
    assert all(t == "not checked" for t in unchecked), unchecked
    if verdict != "FAIL":  # the built-in policy's guard, field and fix-target gates: no guard set, field suite, lineage
        assert len(unchecked) == 4


def _decide(page: Any, gate_id: str, decision: str, reason: str) -> int:
    """Type the reason, click Sign off or Block: one click. Waits for the line recording it on `gate_id`."""
    field(page, "queue-reason").fill(reason)
    page.locator("#queue-signoff" if decision == "signoff" else "#queue-block").click()
    page.wait_for_selector(f"#queue-msg:has-text('{decision} by ann on gate {gate_id}')")
    return 1

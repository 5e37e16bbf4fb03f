"""Every verdict shown is the recorded one: a gate recorded under a stricter policy (`regress --policy strict.yaml`,
FAIL where the built-in policy says WARN) reads FAIL in the Compare tab, in process and in Chromium; what is computed
now is a labelled what-if below it. A gate whose set was not evaluated (no guard set, no field suite) is `not checked`
in its own state and colour, never `pass`, in Compare and in report.md, report.html, junit.xml and the JSON, and a
gate recorded before that state existed reads the same.

The runs are written into the store directly (probes, greedy answers, verdicts) and gated by the real gate
(`gate_runs`): each verdict is made on purpose in about a second, without a model.
"""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _appbrowser import ARGS, CHROMIUM, NEEDS_CHROMIUM
from procs import free_port

from workbench import views
from workbench.gating import GateRecord, gate_runs
from workbench.regression import FORMAT_VERSION, parse_policy
from workbench.regression.recorded import BUILT_IN_SOURCE, gate_status, read_gates
from workbench.store import Store

STRICT = "gates:\n  - {type: max_broken, name: nothing_broken, max_count: 0}\n"


def write_run(store: Store, verdicts: str, adapter: str | None) -> str:
    """A finished run of model `m` + `adapter` whose probe i was graded `verdicts[i]` (c correct, i incorrect,
    n not attempted)."""
    graded = [{"c": "correct", "i": "incorrect", "n": "not_attempted"}[v] for v in verdicts]
    run = store.create_run(model="m", adapter=adapter, backend="hf", fingerprint="f", suite="s", suite_config={},
                           options={}, n_probes=len(graded), skipped_bad=0)
    store.add_probes(run, [{"id": f"p{i}", "question": f"q{i}?", "answers": ["yes"], "tags": ["t"]}
                           for i in range(len(graded))])
    store.add_answers(run, [{"probe_id": f"p{i}", "variant": 0, "kind": "greedy", "sample_index": 0, "prompt": "q",
                             "text": {"correct": "yes", "incorrect": "no"}.get(v, "I don't know"), "verdict": v,
                             "mean_logprob": None, "finish_reason": "stop"} for i, v in enumerate(graded)])
    store.finish_run(run, status="done", metrics=None, generated=0, cached=0)
    return run


@dataclass(frozen=True)
class Strict:
    """Baseline `base` (100 correct) and `cand` (2 of them broken: 2%): WARN under the built-in policy (the 1% goal
    warns, the 2.5% limit holds), FAIL under STRICT, recorded as `gate` with `regress --policy strict.yaml`."""

    store: Store
    base: str
    cand: str
    gate: GateRecord


@pytest.fixture()
def strict(tmp_path: Path) -> Strict:
    store = Store.open(tmp_path / "ws")
    base, cand = write_run(store, "c" * 100, None), write_run(store, "c" * 98 + "ii", "adapter-a")
    policy = tmp_path / "strict.yaml"
    policy.write_text(STRICT)
    gate = gate_runs(store, base, cand, parse_policy(STRICT, str(policy)), policy_source=str(policy))
    return Strict(store, base, cand, gate)


def badge(html: str) -> str:
    """The verdict badge's text (`gate: FAIL`) of a Compare summary."""
    found = re.search(r"<span class='wb-badge[^>]*>([^<]*)</span>", html)
    assert found, html[:500]
    return found.group(1)


def test_compare_shows_the_recorded_verdict_not_one_computed_again(strict: Strict) -> None:
    assert strict.gate.result.verdict == "fail" and strict.gate.result.exit_code == 1
    builtin = views.compare_runs(strict.store, strict.base, strict.cand).summary_html
    assert badge(builtin) == "gate: FAIL", "the strict gate's FAIL is the headline"
    assert "policy strict.yaml" in builtin and strict.gate.id in builtin
    head, whatif = builtin.split("class='wb-whatif'", 1)
    assert "gate: WARN" not in builtin and "WARN" not in head
    assert "nothing_broken" in head and "what-if, not recorded" in whatif  # the recorded gate's own gate list

    # The same pair without a recorded gate: no verdict in the headline, the built-in policy's WARN as a what-if.
    other = write_run(strict.store, "c" * 98 + "ii", "adapter-b")
    unrecorded = views.compare_runs(strict.store, strict.base, other).summary_html
    assert badge(unrecorded) == "gate: NOT RECORDED"
    head, whatif = unrecorded.split("class='wb-whatif'", 1)
    assert "WARN" not in head and ">WARN</span></summary>" in whatif and "built-in policy" in whatif


def test_not_checked_is_its_own_state_in_compare_and_every_report(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "ws")
    base, cand = write_run(store, "c" * 60 + "i" * 40, None), write_run(store, "c" * 60 + "n" * 40, "adapter-a")
    rec = gate_runs(store, base, cand)  # the built-in policy, no guard set, no field suite, no fix-set lineage
    unchecked = {"targets_fixed", "guard_facts_kept", "field_fixes_kept", "field_failures_fixed"}
    assert {g.name for g in rec.result.gates if g.status == "not_checked"} == unchecked
    assert rec.result.verdict == "warn"  # abstention up 40 points: the warn gate; not-checked gates do not count

    md = rec.reports["markdown"].read_text()
    for name in (n.replace("_", "\\_") for n in unchecked):  # Markdown-escaped
        assert f"| not checked | {name} |" in md and f"| pass | {name} |" not in md
    assert "Not checked (the verdict says nothing about them): targets\\_fixed (no fix set" in md
    assert "; guard\\_facts\\_kept (no guard set" in md
    html = rec.reports["html"].read_text()
    assert html.count('<td class="text not_checked">not checked</td>') == 4 and 'id="not-checked"' in html
    cases = {c.get("name"): c for c in ET.parse(rec.reports["junit"]).getroot().iter("testcase")}
    assert all(cases[n].find("skipped") is not None for n in unchecked)
    assert ET.parse(rec.reports["junit"]).getroot().find("testsuite").get("skipped") == "4"  # type: ignore[union-attr]
    data = json.loads(rec.reports["json"].read_text())
    assert data["format_version"] == FORMAT_VERSION == 4 and sorted(data["not_checked_gates"]) == sorted(unchecked)
    assert {g["name"] for g in data["gates"] if g["status"] == "not_checked" and g["checked"] is False} == unchecked

    summary = views.compare_runs(store, base, cand).summary_html
    for name in unchecked:  # grey `not checked`, never a green `pass`
        assert re.search(rf"wb-gate-not_checked'><span class='wb-status' style='color:#57606a;[^>]*>not checked"
                         rf"</span>: <b>{name}</b>", summary), name
        assert f">pass</span>: <b>{name}</b>" not in summary


def test_a_gate_recorded_before_the_state_existed_reads_not_checked(strict: Strict) -> None:
    old = {"name": "guard_facts_kept", "status": "pass", "passed": True, "observed": None,
           "message": "not checked: no guard set was evaluated with this comparison"}
    assert gate_status(old) == "not_checked"
    assert gate_status({**old, "observed": 0.0, "message": "guard set: 0 of 9"}) == "pass"
    (gate,) = read_gates(strict.store, gate_id=strict.gate.id)
    assert (gate.verdict, gate.policy_label, [g["status"] for g in gate.gates()]) == (
        "fail", "policy strict.yaml", ["fail"])
    # a gate under the built-in policy says so, even once the built-in policy has changed since
    builtin = read_gates(strict.store, gate_id=gate_runs(strict.store, strict.base, strict.cand).id)[0]
    assert (builtin.policy_source, builtin.policy_label) == (BUILT_IN_SOURCE, "built-in policy")
    older = dataclasses.replace(builtin, policy={"gates": []})
    assert older.policy_label == "built-in policy"
    assert dataclasses.replace(older, policy_source="").policy_label == "custom policy"  # no source kept: compared


# -- in Chromium -------------------------------------------------------------------------------------------------


@pytest.fixture()
def served(strict: Strict) -> Iterator[str]:
    import app

    demo, url = app.launch(strict.store.workspace, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url
    finally:
        demo.close()


@pytest.mark.browser
@NEEDS_CHROMIUM
def test_a_strict_policy_fail_reads_fail_in_the_browser(strict: Strict, served: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(served)
            page.get_by_role("tab", name="Compare").click()  # the recorded pair is preselected and compared
            page.wait_for_selector("#compare-summary .wb-badge")
            assert page.locator("#compare-summary .wb-badge").inner_text() == "gate: FAIL"
            assert "policy strict.yaml" in page.locator("#compare-summary #wb-recorded").inner_text()
            whatif = page.locator("#compare-summary .wb-whatif")
            assert not whatif.evaluate("e => e.open")  # the what-if stays folded under the recorded verdict
            assert "what-if, not recorded" in whatif.inner_text()
        finally:
            browser.close()

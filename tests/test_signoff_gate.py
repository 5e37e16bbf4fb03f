"""A release sign-off stands on the verdict of the gate it covers: over a FAIL or INCONCLUSIVE gate, or with no
gate, it is refused unless an override says why, and the store keeps that reason; `workbench history` and the
app show the override, and a later failed gate of the same candidate beside an earlier sign-off.

The runs are written into the store directly (probes, greedy answers and their verdicts) and gated by the real
gate (`gate_runs`): what is tested is how a sign-off treats a gate's verdict, and so each verdict (pass, fail,
inconclusive) is made on purpose in about a second, without a model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clirun import ENV, assert_refused, workbench
from procs import free_port

from workbench import reviews, views
from workbench.errors import WorkbenchError
from workbench.gating import gate_runs
from workbench.html import signoff as signoff_views
from workbench.releases import release_history
from workbench.store import Store


@dataclass(frozen=True)
class Gated:
    """A workspace of model `m` runs: `good` (adapter A, no change) gated PASS, then `bad` (adapter A, half
    its probes broken) gated FAIL, then `few` (adapter B, 3 probes) gated INCONCLUSIVE; `lone` has no gate."""

    store: Store
    base: str
    good: str
    bad: str
    few: str
    lone: str
    g_pass: str
    g_fail: str
    g_inc: str


def _run(store: Store, verdicts: str, adapter: str | None) -> str:
    """A finished run of model `m` + `adapter` whose probe i was graded `verdicts[i]` (c correct, i incorrect)."""
    graded = ["correct" if v == "c" else "incorrect" for v in verdicts]
    run = store.create_run(model="m", adapter=adapter, backend="hf", fingerprint="f", suite="s", suite_config={},
                           options={}, n_probes=len(graded), skipped_bad=0)
    store.add_probes(run, [{"id": f"p{i}", "question": f"q{i}?", "answers": ["yes"], "tags": ["t"]}
                           for i in range(len(graded))])
    store.add_answers(run, [{"probe_id": f"p{i}", "variant": 0, "kind": "greedy", "sample_index": 0, "prompt": "q",
                             "text": "yes" if v == "correct" else "no", "verdict": v, "mean_logprob": None,
                             "finish_reason": "stop"} for i, v in enumerate(graded)])
    store.finish_run(run, status="done", metrics=None, generated=0, cached=0)
    return run


@pytest.fixture()
def gated(tmp_path: Path) -> Gated:
    store = Store.open(tmp_path / "ws")
    base, base3 = _run(store, "c" * 100, None), _run(store, "ccc", None)
    good, bad = _run(store, "c" * 100, "adapter-a"), _run(store, "c" * 50 + "i" * 50, "adapter-a")
    few, lone = _run(store, "ccc", "adapter-b"), _run(store, "ccc", "adapter-c")
    gates = [gate_runs(store, b, c).id for b, c in ((base, good), (base, bad), (base3, few))]
    return Gated(store, base, good, bad, few, lone, *gates)


def _signoff(g: Gated, run: str, override_reason: str | None = None) -> reviews.Review:
    return reviews.record_release(g.store, reviewer="ann", run_id=run, decision="signoff", reason="looked at it",
                                  override_reason=override_reason)


def test_the_fixture_gates_have_the_verdicts_the_tests_rely_on(gated: Gated) -> None:
    verdicts = {r["gate_id"]: r["verdict"] for r in release_history(gated.store)}
    assert verdicts == {gated.g_pass: "pass", gated.g_fail: "fail", gated.g_inc: "inconclusive"}


def test_a_signoff_over_a_failed_or_inconclusive_gate_or_none_is_refused(gated: Gated) -> None:
    for run, gate, verdict in ((gated.bad, gated.g_fail, "FAIL"), (gated.few, gated.g_inc, "INCONCLUSIVE")):
        with pytest.raises(WorkbenchError) as refused:
            _signoff(gated, run)
        msg = str(refused.value)
        assert f"gate `{gate}` is {verdict}" in msg and '--override-reason "' in msg, msg
        assert reviews.signoff_check(gated.store, run).needs_override
    with pytest.raises(WorkbenchError, match="has no recorded gate: a sign-off is tied to one") as refused:
        _signoff(gated, gated.lone)
    assert "--override-reason" in str(refused.value)
    assert reviews.list_reviews(gated.store, target="release") == []  # nothing recorded by a refusal
    block = reviews.record_release(gated.store, reviewer="ann", run_id=gated.bad, decision="block", reason="broken")
    assert block.gate_id == gated.g_fail and block.override_reason is None  # a block needs no override


def test_a_signoff_on_a_passing_gate_needs_no_override(gated: Gated) -> None:
    r = _signoff(gated, gated.good)
    assert (r.gate_id, r.override_reason) == (gated.g_pass, None)
    assert not reviews.signoff_check(gated.store, gated.good).needs_override
    with pytest.raises(WorkbenchError, match=f"gate `{gated.g_pass}` is PASS, there is nothing to override"):
        _signoff(gated, gated.good, override_reason="just in case")


def test_an_override_with_a_reason_is_recorded_and_shown(gated: Gated) -> None:
    for blank in ("", "   "):
        with pytest.raises(WorkbenchError, match="`--override-reason` is empty: an override needs a reason"):
            _signoff(gated, gated.bad, override_reason=blank)
    with pytest.raises(WorkbenchError, match="a block needs none"):
        reviews.record_release(gated.store, reviewer="ann", run_id=gated.bad, decision="block", reason="x",
                               override_reason="why")
    r = _signoff(gated, gated.bad, override_reason="  the broken probes ask about a retired product ")
    assert (r.gate_id, r.override_reason) == (gated.g_fail, "the broken probes ask about a retired product")
    lone = _signoff(gated, gated.lone, override_reason="a hotfix; the gate runs tonight")
    assert (lone.gate_id, lone.override_reason) == (None, "a hotfix; the gate runs tonight")
    reopened = Store.open(gated.store.workspace)  # the reason is in the store, not only in the returned row
    assert [x.override_reason for x in reviews.list_reviews(reopened, target="release")] == [
        r.override_reason, lone.override_reason]

    rows = {row["gate_id"]: row for row in release_history(reopened)}
    signed = rows[gated.g_fail]["signoff"]
    assert (signed["gate_verdict"], signed["override_reason"]) == ("fail", r.override_reason)
    assert signed["text"] == (f"signoff by ann on gate {gated.g_fail} (FAIL); override: the broken probes ask "
                              "about a retired product")
    outside = rows[None]  # a sign-off outside any gate is a row of its own
    assert outside["candidate_run"] == gated.lone and outside["verdict"] is None
    assert outside["signoff"]["text"] == "signoff by ann on no gate; override: a hotfix; the gate runs tonight"
    table = views.gate_history_table(reopened).set_index("gate")["sign-off"]
    assert table[gated.g_fail] == f"{signed['text']}; reason: looked at it"
    assert table["(no gate)"].startswith("signoff by ann on no gate; override: a hotfix")
    line = signoff_views.signoff_line(reopened, gated.base, gated.bad)
    assert "<b>override</b>: the broken probes ask about a retired product" in line


def test_a_later_failed_gate_shows_beside_an_earlier_signoff(gated: Gated) -> None:
    """`good` and `bad` are one candidate (model m + adapter A): the FAIL gate of `bad`, recorded after the PASS
    gate `good` was signed off on, shows beside that sign-off, and so does a FAIL gate recorded after the
    sign-off; the INCONCLUSIVE gate of adapter B does not."""
    r = _signoff(gated, gated.good)
    assert r.gate_id == gated.g_pass
    g_fail2 = gate_runs(gated.store, gated.base, gated.bad).id
    rows = {row["gate_id"]: row for row in release_history(gated.store)}
    signed = rows[gated.g_pass]["signoff"]
    assert [g["gate_id"] for g in signed["later_gates"]] == [gated.g_fail, g_fail2]
    assert signed["text"] == (f"signoff by ann on gate {gated.g_pass} (PASS); later gate {gated.g_fail} FAIL, "
                              f"gate {g_fail2} FAIL")
    assert views.gate_history_table(gated.store).set_index("gate")["sign-off"][gated.g_pass].startswith(
        signed["text"])
    note = signoff_views.signoff_note(gated.store, gated.good, gated.g_pass)
    assert "(**PASS**" in note and f"later gate {gated.g_fail} FAIL" in note
    assert f"later gate {gated.g_fail} FAIL" in signoff_views.signoff_line(gated.store, gated.base, gated.good)
    assert rows[gated.g_inc]["signoff"] is None


# -- the CLI, run as a user runs it ------------------------------------------------------------------------


@pytest.mark.slow  # over 5 s on 2 cores
def test_review_cli_refuses_a_failed_gate_and_records_an_override(gated: Gated) -> None:
    ws = str(gated.store.workspace)

    def review(run: str, *extra: str) -> tuple[int, str, str]:
        p = workbench("review", run, "--target", "release", "--value", "signoff", "--reason", "ok", "--reviewer",
                      "ann", "--workspace", ws, *extra, timeout=120)
        return p.returncode, p.stdout, p.stderr

    assert_refused(workbench("review", gated.bad, "--target", "release", "--value", "signoff", "--reason", "ok",
                             "--workspace", ws, timeout=120),
                   f"gate `{gated.g_fail}` is FAIL", '--override-reason "')
    assert_refused(workbench("review", gated.few, "--target", "release", "--value", "signoff", "--reason", "ok",
                             "--workspace", ws, timeout=120),
                   f"gate `{gated.g_inc}` is INCONCLUSIVE", "--override-reason")
    assert_refused(workbench("review", gated.lone, "--target", "release", "--value", "signoff", "--reason", "ok",
                             "--workspace", ws, timeout=120),
                   "has no recorded gate", "--override-reason")
    assert_refused(workbench("review", gated.bad, "--target", "release", "--value", "signoff", "--reason", "ok",
                             "--override-reason", "  ", "--workspace", ws, timeout=120),
                   "`--override-reason` is empty")
    code, out, err = review(gated.bad, "--override-reason", "known issue, fix follows")
    assert code == 0, err[-2000:]
    assert f"on {gated.g_fail} (override: known issue, fix follows)" in out
    code, out, err = review(gated.good)
    assert code == 0 and f"on {gated.g_pass}" in out and "override" not in out, err[-2000:]

    wide = {**ENV, "COLUMNS": "400"}  # one line per row: the sign-off cell is long
    shown = workbench("history", "--workspace", ws, env=wide, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"signoff by ann on gate {gated.g_fail} (FAIL); override: known issue, fix follows" in shown.stdout
    assert f"signoff by ann on gate {gated.g_pass} (PASS); later gate {gated.g_fail} FAIL" in shown.stdout
    listed = workbench("history", "--json", "--workspace", ws, timeout=120)
    rows = {r["gate_id"]: r for r in json.loads(listed.stdout)}
    assert rows[gated.g_fail]["signoff"]["override_reason"] == "known issue, fix follows"
    assert [g["gate_id"] for g in rows[gated.g_pass]["signoff"]["later_gates"]] == [gated.g_fail]
    helped = workbench("review", "--help", timeout=120)
    assert "--override-reason TEXT" in helped.stdout and "INCONCLUSIVE" in helped.stdout


# -- the app's handler, served (no browser) --------------------------------------------------------------------


@pytest.fixture()
def served(gated: Gated) -> Iterator[str]:
    import app

    demo, url = app.launch(gated.store.workspace, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url
    finally:
        demo.close()


def test_the_app_needs_the_override_box_and_a_reason_over_a_failed_gate(gated: Gated, served: str) -> None:
    from gradio_client import Client

    c = Client(served, verbose=False)
    note = signoff_views.signoff_note(gated.store, gated.bad)  # what the form shows for the preselected gate
    assert f"gate `{gated.g_fail}` (**FAIL**" in note and "tick *override*" in note

    def release(override: bool, override_reason: str) -> tuple[Any, ...]:
        return tuple(c.predict("ann", gated.bad, "", "signoff", "looked at it", False, override, override_reason,
                               api_name="/release"))

    for override, why in ((False, ""), (False, "typed but not ticked"), (True, "  ")):
        msg = release(override, why)[0]
        assert msg.startswith("**not recorded**"), (override, why, msg)
        assert (f"gate `{gated.g_fail}` is FAIL" in msg) if not override else ("is empty" in msg), msg
    assert reviews.list_reviews(gated.store, target="release") == []
    msg, log, gates, cli = release(True, "known issue, fix follows")
    assert msg.startswith("recorded #") and "**override**: known issue, fix follows" in msg
    assert log["data"][0][-1] == "looked at it; override: known issue, fix follows"
    assert "--override-reason 'known issue, fix follows'" in cli and f"--gate {gated.g_fail}" in cli
    (row,) = [r for r in gates["data"] if r[0] == gated.g_fail]
    assert "override: known issue, fix follows" in row[-1]
    (stored,) = reviews.list_reviews(gated.store, target="release")
    assert (stored.gate_id, stored.override_reason) == (gated.g_fail, "known issue, fix follows")

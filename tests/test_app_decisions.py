"""No decision made in the app is lost while the CLI writes the same store, the workspace-file viewer never opens
the store's files, and nothing about the workspace is served before login."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from clirun import ENV, workbench
from procs import free_port

_REVIEWS = """
import json, sys
from workbench import reviews
from workbench.store import Store
print(json.dumps([[r.id, r.reviewer, r.reason] for r in reviews.list_reviews(Store.open(sys.argv[1]))]))
"""
_KILLED_RUN = """
import os, signal, sys
from workbench.store import Store
Store.open(sys.argv[1]).create_run(model="m", adapter=None, backend="hf", fingerprint="f", suite="s",
                                   suite_config={}, options={}, n_probes=0, skipped_bad=0)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(scope="module")
def workspace(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with one finished run of three probes, made by the CLI."""
    ws = tmp_path_factory.mktemp("decisions") / "ws"
    probes = tmp_path_factory.getbasetemp() / "decisions-probes.jsonl"
    probes.write_text("\n".join(Path(world.probes).read_text().splitlines()[:3]) + "\n")
    out = workbench("eval", "--model", str(world.model), "--probes", str(probes), "--workspace", str(ws), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    (ws / "reports").mkdir()
    (ws / "reports" / "ok.md").write_text("# a report")
    return ws


@pytest.fixture(scope="module")
def served(workspace: Path) -> Iterator[str]:
    """The app in this process (it holds the store open, as a running app does)."""
    import app

    demo, url = app.launch(workspace, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url
    finally:
        demo.close()


def _on_disk(ws: Path) -> list[list[Any]]:
    out = subprocess.run([sys.executable, "-c", _REVIEWS, str(ws)], capture_output=True, text=True, timeout=120,
                         env=ENV)
    assert out.returncode == 0, out.stderr[-2000:]
    return list(json.loads(out.stdout))


@pytest.mark.slow  # over 5 s on 2 cores
def test_viewer_never_opens_the_store_files(served: str, workspace: Path) -> None:
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    os.link(workspace / "store.sqlite", workspace / "reports" / "hardlink.md")
    (workspace / "reports" / "symlink.md").symlink_to(workspace / "store.sqlite")
    (workspace / "notes.bin").write_bytes(b"\x00\x01")
    c = Client(served, verbose=False)
    assert c.predict("reports/ok.md", api_name="/workspace_file") == ("", "# a report")  # rendered as Markdown
    for name in ("store.sqlite", "./store.sqlite", "store.sqlite-wal", "store.sqlite-shm", "store.sqlite-journal",
                 "STORE.SQLITE", "index/corpus.sqlite", "reports/hardlink.md", "reports/symlink.md"):
        with pytest.raises(AppError, match="database file"):
            c.predict(name, api_name="/workspace_file")
    with pytest.raises(AppError, match="the viewer shows only"):
        c.predict("notes.bin", api_name="/workspace_file")


@pytest.mark.slow  # over 20 s on 2 cores
def test_app_decisions_survive_concurrent_cli_writes(served: str, workspace: Path, world: Any) -> None:
    """Interleave app sign-offs and overrides with CLI evals and reviews, and a viewer request for the store
    (which, served, dropped the app's SQLite locks: the next CLI exit deleted the WAL under the app and the
    app's later decisions vanished). Every decision, from both sides, must be on disk afterwards."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    c = Client(served, verbose=False)
    run = c.predict("", "", "", api_name="/runs")["data"][0][0]
    probe = _on_disk_probe(workspace, run)
    probes = workspace.parent.parent / "decisions-probes.jsonl"
    replies: list[str] = []
    refused = workbench("review", run, "--target", "release", "--value", "signoff", "--reason", "no gate",
                        "--workspace", str(workspace))
    assert refused.returncode == 2 and "has no recorded gate: a sign-off is tied to one" in refused.stderr
    gate = workbench("regress", "--baseline", run, "--candidate", run, "--workspace", str(workspace), "--json")
    assert gate.returncode in (0, 3), gate.stderr[-2000:]  # 3 probes: inconclusive, recorded all the same
    # an inconclusive gate needs an override to be signed off on (a pass would refuse one)
    why = "3 probes cannot clear a gate" if json.loads(gate.stdout)["verdict"] == "inconclusive" else ""
    override = ["--override-reason", why] if why else []
    for i in range(2):
        # confirm: the app's override below changes a grade the gate saw
        replies.append(c.predict("ann", run, "", "signoff", f"app signoff {i}", True, bool(why), why,
                                 api_name="/release")[0])
        with contextlib.suppress(AppError):  # refused now; before, serving it dropped the app's locks
            c.predict("store.sqlite", api_name="/workspace_file")
        cli = workbench("eval", "--model", str(world.model), "--probes", str(probes), "--workspace", str(workspace),
                        "--json")
        assert cli.returncode == 0, cli.stderr[-2000:]
        replies.append(c.predict("ann", run, probe, "verdict", "incorrect", f"app override {i}",
                                 api_name="/override")[0])
        cli = workbench("review", run, "--target", "release", "--value", "block", "--reason", f"cli block {i}",
                        "--reviewer", "bob", "--workspace", str(workspace))
        assert cli.returncode == 0, cli.stderr[-2000:]
        replies.append(c.predict("ann", run, "", "signoff", f"app signoff again {i}", True, bool(why), why,
                                 api_name="/release")[0])
    rows = _on_disk(workspace)
    reasons = [r[2] for r in rows]
    for i in range(2):
        for reason in (f"app signoff {i}", f"app override {i}", f"cli block {i}", f"app signoff again {i}"):
            assert reason in reasons, (reason, rows)
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)) == 8
    recorded = sorted(int(msg.split("#", 1)[1].split(":", 1)[0]) for msg in replies)
    assert set(recorded) <= set(ids)  # each id the app reported is the id on disk
    assert c.predict("", "", "", api_name="/runs")["data"]  # and the app still reads its store
    from workbench.results import load_results
    from workbench.store import Store

    graded = load_results(Store.open(workspace), run).by_id()[probe].verdict  # the grade the gate saw
    flip = workbench("review", run, "--target", "verdict", "--probe", probe, "--reason", "cli override",
                     "--value", "correct" if graded != "correct" else "not_attempted", "--workspace", str(workspace))
    assert flip.returncode == 0, flip.stderr[-2000:]
    stale = workbench("review", run, "--target", "release", "--value", "signoff", "--reason", "cli", *override,
                      "--workspace", str(workspace))
    assert stale.returncode == 2 and "grade it saw" in stale.stderr and "confirm" in stale.stderr
    ok = workbench("review", run, "--target", "release", "--value", "signoff", "--reason", "cli", "--confirm",
                   *override, "--workspace", str(workspace))
    assert ok.returncode == 0 and "on gate-" in ok.stdout, ok.stderr[-2000:]


def _on_disk_probe(ws: Path, run: str) -> str:
    from workbench.store import Store

    return str(Store.open(ws).probe_rows(run)[0]["id"])


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_app_says_a_run_was_interrupted(served: str, workspace: Path) -> None:
    from gradio_client import Client

    killed = subprocess.run([sys.executable, "-c", _KILLED_RUN, str(workspace)], capture_output=True, timeout=120,
                            env=ENV)
    assert killed.returncode < 0
    out = Client(served, verbose=False).predict("", "", "", api_name="/refresh")
    table, note = out[0], out[-1]
    assert "interrupted" in [row[2] for row in table["data"]]
    assert "Interrupted runs" in note and "is gone" in note and "workbench eval" in note


@pytest.mark.slow  # over 5 s on 2 cores
def test_nothing_about_the_workspace_before_login(workspace: Path, tmp_path: Path) -> None:
    import app
    from workbench.auth import add_user
    from workbench.store import Store

    users = tmp_path / "users"
    add_user(users, "ann", "pw-ann")
    run_ids = [r.id for r in Store.open(workspace).list_runs()]
    demo, url = app.launch(workspace, port=free_port(), auth_file=str(users), prevent_thread_lock=True, quiet=True)
    secrets = [*run_ids, str(workspace), "workspace_file", "override", "release"]
    try:
        for path in ("", "?view=api", "gradio_api/info", "config", "openapi.json", "gradio_api/openapi.json",
                     "docs", "manifest.json", "gradio_api/startup-events"):
            resp = httpx.get(url + path, timeout=30)
            leaked = [s for s in secrets if s in resp.text]
            assert not leaked, (path, resp.status_code, leaked)
        assert httpx.get(url + "openapi.json", timeout=30).status_code == 404
        with httpx.Client(timeout=30) as logged_in:
            assert logged_in.post(url + "login", data={"username": "ann", "password": "pw-ann"}).status_code == 200
            page = logged_in.get(url).text
        assert "workspace_file" in page  # after login the page carries its API description again
    finally:
        demo.close()


@pytest.mark.browser
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="no Chromium at /usr/bin/chromium")
def test_signing_in_through_the_login_page_in_a_browser(workspace: Path, tmp_path: Path) -> None:
    """The login page still works without its API description, and says when sign-ins are locked (a lock-out reads
    apart from a typo, with the seconds to wait); signed in, the first screen arrives and every reviewer field holds
    the signed-in user, read-only."""
    from playwright.sync_api import sync_playwright

    import app
    from workbench.auth import add_user

    users = tmp_path / "users"
    add_user(users, "ann", "pw-ann")
    demo, url = app.launch(workspace, port=free_port(), auth_file=str(users), prevent_thread_lock=True, quiet=True)
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"]
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector("input", timeout=60_000)

            def sign_in(password: str) -> None:
                page.locator("input").nth(0).fill("ann")
                page.locator("input").nth(1).fill(password)
                with page.expect_response(lambda r: r.url.endswith("/login")):
                    page.get_by_role("button", name="Login").click()

            for _ in range(4):  # the fourth failure locks the name for a second
                sign_in("typo")
                assert page.get_by_text("Incorrect Credentials").is_visible()
            sign_in("typo")  # locked: the page says so, not "Incorrect Credentials"
            note = page.locator("#wb-login-note")
            assert note.inner_text().startswith("Sign-in locked: Too many failed sign-ins") and "try again in 1 s" \
                in note.inner_text()
            assert not page.get_by_text("Incorrect Credentials").is_visible()
            page.wait_for_timeout(1_100)
            sign_in("pw-ann")
            page.wait_for_function("document.querySelector('#queue-summary')?.innerText.includes('No gate')",
                                   timeout=60_000)
            for tab, box in (("Decisions", "queue-reviewer"), ("Review", "reviewer"), ("Reports", "reports-reviewer")):
                page.get_by_role("tab", name=tab).click()
                reviewer = page.locator(f"#{box} input, #{box} textarea").first
                page.wait_for_function(f"document.querySelector('#{box} input, #{box} textarea').value === 'ann'")
                assert not reviewer.is_editable(), tab
            browser.close()
    finally:
        demo.close()

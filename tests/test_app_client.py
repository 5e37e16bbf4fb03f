"""The launched app over HTTP: gradio_client calls on a free loopback port, login, and file serving."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _appdata import AppData, app_data, private_copy
from procs import free_port


@pytest.fixture(scope="module")
def data(world: Any, tmp_path_factory: pytest.TempPathFactory) -> AppData:
    return app_data(world, tmp_path_factory)


@pytest.fixture(scope="module")
def served(data: AppData, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The app on a private copy of the workspace (this module writes reviews)."""
    import app

    ws = private_copy(data.workspace, tmp_path_factory.mktemp("client") / "ws")
    (ws.parent / "secret.txt").write_text("top secret")
    demo, url = app.launch(ws, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url, ws
    finally:
        demo.close()


@pytest.mark.slow  # over 5 s on 2 cores
def test_api_calls(served: tuple[str, Path], data: AppData) -> None:
    from gradio_client import Client

    url, _ = served
    assert url.startswith("http://127.0.0.1:")
    c = Client(url, verbose=False)
    runs = c.predict("", "", "", api_name="/runs")
    assert [r[0] for r in runs["data"]] == [data.candidate, data.baseline]
    out = c.predict(data.baseline, data.candidate, "", "broken", "", "", 25, api_name="/compare")
    summary, _metrics, transitions, probes, cli = out[:5]
    # no gate recorded yet: no verdict in the headline, the comparison computed now only as a labelled what-if
    assert "gate: NOT RECORDED" in summary and ">FAIL</span></summary>" in summary and "workbench regress" in cli
    assert "change per tag" in out[9] and out[11].startswith("page 1 of ")  # delta plot, page label
    assert sum(sum(row[1:]) for row in transitions["data"]) == int(summary.split(" probes ·")[0].split("· ")[-1])
    pid = probes["data"][0][0]
    detail = c.predict(pid, data.baseline, data.candidate, api_name="/probe_detail")
    assert pid in detail and "exact-match agreement" in detail
    msg, log, cli = c.predict("ann", data.candidate, pid, "verdict", "correct", "grader missed an alias",
                              api_name="/override")
    assert "recorded" in msg and log["data"][0][2] == "ann" and "workbench review" in cli
    chart = c.predict([data.baseline], "incorrect", api_name="/tag_metrics")
    assert "capital" in chart
    gate_msg, _, gate_md = c.predict(data.baseline, data.candidate, api_name="/gate")
    assert "Regression check" in gate_md  # the report's Markdown, rendered in the Compare tab
    assert "recorded gate" in gate_msg and "fail" in gate_msg
    summary = c.predict(data.baseline, data.candidate, "", "broken", "", "", 25, api_name="/compare")[0]
    assert "gate: FAIL" in summary and "recorded gate gate-" in summary  # the recorded verdict heads it now
    report = gate_msg.split("report `")[1].rstrip("`")
    code, md = c.predict(report, api_name="/workspace_file")
    assert "Regression check" in code and not md  # HTML as text; a .md file renders as Markdown
    code, md = c.predict(report.replace("report.html", "report.md"), api_name="/workspace_file")
    assert "Regression check" in md and not code
    # a pair that cannot be compared replaces the previous result and the recorded-gate line
    bad = c.predict(data.baseline, "no-such-run", "", "any verdict change", "", "", 50, api_name="/compare")
    assert "cannot compare" in bad[0] and "gate:" not in bad[0] and not bad[3]["data"] and bad[8] == ""
    assert bad[-1] == "" and "change per" not in bad[9]
    gate_id = gate_msg.split("`")[1]
    rel = c.predict("ann", data.candidate, "", "block", "too many broken probes", False, False, "",
                    api_name="/release")
    assert gate_id in rel[0] and "block by ann" in rel[2]["data"][0][-1]
    # a refusal is a message beside the form, not an error: the review log and the gate history stay
    refused = c.predict("", data.candidate, gate_id, "signoff", "ok", False, False, "", api_name="/release")
    assert refused[0] == "**not recorded**: `reviewer` is required: say who decides"


@pytest.mark.parametrize("attempt", ["../secret.txt", "%2e%2e%2fsecret.txt", "/etc/passwd", "..%2fsecret.txt"])
def test_api_refuses_traversal(served: tuple[str, Path], attempt: str) -> None:
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=r"outside the workspace|not allowed"):
        Client(served[0], verbose=False).predict(attempt, api_name="/workspace_file")


@pytest.mark.parametrize("route", [
    "gradio_api/file=/etc/passwd", "gradio_api/file=../../../../../etc/passwd",
    "gradio_api/file=%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd", "file=/etc/passwd",
    "gradio_api/file={secret}", "gradio_api/file=%2F{secret_rel}", "static/../../../../etc/passwd",
    "gradio_api/file=..%2f..%2fsecret.txt", "assets/..%2f..%2f..%2f..%2fetc%2fpasswd",
])
def test_http_serves_no_file_outside_the_workspace(served: tuple[str, Path], route: str) -> None:
    url, ws = served
    secret = ws.parent / "secret.txt"
    path = route.format(secret=secret, secret_rel=str(secret).lstrip("/"))
    # http.client sends the path as given (httpx would normalise `..` away before sending).
    host, port = url.split("//")[1].rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/" + path)
    resp = conn.getresponse()
    body = resp.read().decode(errors="replace")
    conn.close()
    assert "root:" not in body and "top secret" not in body
    assert resp.status in (400, 403, 404, 405) or "<html" in body.lower(), (resp.status, body[:200])


def test_login_refuses_a_wrong_password(data: AppData, tmp_path: Path) -> None:
    from gradio_client import Client

    import app
    from workbench.auth import add_user

    users = tmp_path / "users"
    add_user(users, "ann", "right-password")
    demo, url = app.launch(data.workspace, port=free_port(), auth_file=str(users), prevent_thread_lock=True,
                           quiet=True)
    try:
        bad = httpx.post(url + "login", data={"username": "ann", "password": "wrong"}, timeout=10)
        assert bad.status_code in (400, 401)
        assert httpx.get(url + "gradio_api/info", timeout=10).status_code in (401, 403)
        with pytest.raises(Exception, match=r"(?i)login|auth|credentials"):
            Client(url, auth=("ann", "wrong"), verbose=False)
        ok = Client(url, auth=("ann", "right-password"), verbose=False)
        assert ok.predict("", "", "", api_name="/runs")["data"]
        # signed in as ann, another name is refused, never recorded as ann (nothing is written: the workspace is
        # the session's shared one)
        for api, args in (("/override", ("bob", data.candidate, "p1", "verdict", "correct", "typo")),
                          ("/release", ("bob", data.candidate, "", "block", "typo", False, False, ""))):
            msg = ok.predict(*args, api_name=api)[0]
            assert msg.startswith("**not recorded**") and "signed in as `ann`" in msg, (api, msg)
    finally:
        demo.close()

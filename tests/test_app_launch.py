"""`workbench app` as a user starts it (a subprocess with a time limit): it prints the local URL it serves and not
gradio's hint to set `share=True` (this app never publishes a workspace), and SIGTERM ends it cleanly."""

from __future__ import annotations

import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from clirun import finish, start
from procs import free_port

URL_LINE = "Running on local URL:  "


@pytest.mark.slow  # over 5 s on 2 cores
def test_app_prints_its_local_url_and_no_share_hint(tmp_path: Path) -> None:
    port = free_port()
    proc = start(["app", "--workspace", str(tmp_path / "ws"), "--port", str(port)],
                 env={"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}, fresh=True)  # reads stdout live
    t0 = time.monotonic()
    lines: list[str] = []
    stdout = proc.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")), daemon=True)
    reader.start()
    try:  # the URL line comes once the launch is over: a SIGTERM before it would interrupt the start
        while not any(URL_LINE in line for line in lines):
            assert proc.poll() is None and time.monotonic() - t0 < 180, ("no URL line", lines)
            time.sleep(0.2)
        url = next(line for line in lines if URL_LINE in line).split(URL_LINE)[1].strip()
        assert url.startswith(f"http://127.0.0.1:{port}")
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
    reader.join(60)
    done = finish(proc, 60, t0)
    out = "".join(lines)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "share=True" not in out + done.stderr, out

"""Guessing a password costs seconds per try: failed sign-ins lock the user and the client address for a delay that
doubles with each further failure (workbench.auth.Throttle, served by workbench.appguard.LoginThrottle); the users
file's iteration counts are bounded and a user may appear once; uploads are capped and the heartbeat stream needs a
session."""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from procs import free_port

from workbench.auth import MAX_ITERATIONS, Throttle, add_user, hash_password, load_users
from workbench.errors import WorkbenchError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failures_lock_a_key_for_a_doubling_delay() -> None:
    clock = Clock()
    t = Throttle(free=3, base_s=1.0, max_s=8.0, clock=clock)
    for _ in range(3):  # three free failures
        assert t.attempt("user:ann", "client:a") == 0
    assert t.attempt("user:ann", "client:a") == 0  # the fourth goes on, and locks both keys for 1 s
    assert t.attempt("user:ann", "client:b") == pytest.approx(1.0)  # another address: the user is locked
    assert t.attempt("user:bob", "client:a") == pytest.approx(1.0)  # another user: the address is locked
    delays = []
    for _ in range(6):
        clock.now += t.wait("user:ann", "client:a")
        assert t.attempt("user:ann", "client:a") == 0
        delays.append(t.wait("user:ann", "client:a"))
    assert delays == [2.0, 4.0, 8.0, 8.0, 8.0, 8.0]  # doubling, capped
    clock.now += 8
    assert t.attempt("user:ann", "client:a") == 0
    t.succeeded("user:ann", "client:a")  # a right password forgives the key
    assert t.wait("user:ann", "client:a") == 0 and t.attempt("user:ann", "client:a") == 0


def test_parallel_guesses_count_as_they_start_and_keys_are_bounded() -> None:
    t = Throttle(free=3, max_keys=100, clock=Clock())
    started = [t.attempt("user:ann", "client:a") == 0 for _ in range(60)]  # none has finished yet
    assert sum(started) == 4
    for i in range(1000):
        t.attempt(f"user:random{i}", "client:b")
    assert len(t._keys) <= 100


def test_users_file_bounds_iterations_and_refuses_duplicates(tmp_path: Path) -> None:
    f = tmp_path / "users"
    add_user(f, "ann", "pw")
    line = f.read_text().strip()
    for iterations in (2_000_000_000, 10**12, 10):
        f.write_text(line.replace("$310000$", f"${iterations}$") + "\n")
        with pytest.raises(WorkbenchError, match=rf"line 1: iterations must be .* to {MAX_ITERATIONS:,}"):
            load_users(f)
    f.write_text(line + "\n# again\n" + "ann:" + hash_password("other") + "\n")
    with pytest.raises(WorkbenchError, match=r"line 3: user `ann` again \(first on line 1\)"):
        load_users(f)
    f.write_text(line.replace("$310000$", "$310000$zz") + "\n")
    with pytest.raises(WorkbenchError, match="must be hexadecimal"):
        load_users(f)


@pytest.mark.slow  # gradio starts (about 10 s) and the test waits out two lock delays
def test_the_app_throttles_wrong_passwords_per_user_and_client(tmp_path: Path) -> None:
    import app

    users = tmp_path / "users"
    add_user(users, "ann", "right-password")
    demo, url = app.launch(tmp_path / "ws", port=free_port(), auth_file=str(users), prevent_thread_lock=True,
                           quiet=True)

    def login(password: str, user: str = "ann") -> Any:
        return httpx.post(url + "login", data={"username": user, "password": password}, timeout=30)

    try:
        assert httpx.get(url + "gradio_api/heartbeat/abc", timeout=10).status_code == 401  # no stream before login
        with httpx.Client(timeout=30) as session:
            assert session.post(url + "login", data={"username": "ann", "password": "right-password"}).is_success
            with session.stream("GET", url + "gradio_api/heartbeat/abc") as beat:
                assert beat.status_code == 200  # after login it is gradio's as before
            big = session.post(url + "gradio_api/upload", files={"files": ("big.bin", b"x" * 2_000_000)})
            assert big.status_code == 413, (big.status_code, big.text[:200])  # uploads capped (the app takes none)
        assert [login("wrong").status_code for _ in range(4)] == [400] * 4
        locked = login("right-password")  # locked: even the right password waits
        assert locked.status_code == 429 and "try again in 1 s" in locked.json()["detail"]
        assert locked.headers["retry-after"] == "1"
        assert login("wrong", user="bob").status_code == 429  # the same address, another user
        time.sleep(1.1)
        assert login("wrong").status_code == 400  # allowed after the delay, and now 2 s
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:  # 16 parallel guesses: none reaches the password
            codes = list(pool.map(lambda _: login("wrong").status_code, range(16)))
        assert codes == [429] * 16 and time.monotonic() - t0 < 5  # refused at once, without PBKDF2's cost
        time.sleep(2.1)
        assert login("right-password").status_code == 200  # the right password after the wait signs in
        assert [login("wrong").status_code for _ in range(3)] == [400] * 3  # and forgives the earlier failures
    finally:
        demo.close()


@pytest.mark.slow  # gradio starts (about 10 s)
def test_launch_asks_again_when_gradios_self_check_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gradio asks its own server for the page once it is up and gives up on the first answer slower than 3 s (a
    busy machine's first page build): the app closes that server and launches again, up to SELF_CHECKS times, and
    only then fails with gradio's error."""
    import gradio.networking as networking

    import app
    from apptabs.launching import SELF_CHECKS

    real, calls = networking.url_ok, []

    def slow_first(url: str) -> bool:
        calls.append(url)
        return len(calls) > 1 and real(url)

    monkeypatch.setattr(networking, "url_ok", slow_first)
    demo, url = app.launch(tmp_path / "ws", port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        assert len(calls) == 2
        assert httpx.get(url, timeout=30).status_code == 200
    finally:
        demo.close()
    never: list[str] = []
    monkeypatch.setattr(networking, "url_ok", lambda url: never.append(url) is not None)  # always False
    with pytest.raises(ValueError, match="localhost is not accessible"):
        app.launch(tmp_path / "ws", port=free_port(), prevent_thread_lock=True, quiet=True)
    assert len(never) == SELF_CHECKS

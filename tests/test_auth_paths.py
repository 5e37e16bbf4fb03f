"""Users file hashing, the loopback/auth bind rule, and path traversal refusals (no server needed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from workbench.auth import add_user, authenticator, hash_password, load_users, verify
from workbench.errors import WorkbenchError
from workbench.safepath import UnsafePathError, read_text_inside, resolve_inside

TRAVERSALS = ("../outside.txt", "sub/../../outside.txt", "..\\outside.txt", "%2e%2e/outside.txt",
              "%2e%2e%2foutside.txt", "%252e%252e%252foutside.txt", "..%2Foutside.txt", "%2E%2E%5Coutside.txt")


def test_hash_and_verify() -> None:
    h = hash_password("s3cret", iterations=1000)
    assert h.startswith("pbkdf2_sha256$1000$") and "s3cret" not in h
    assert verify("s3cret", h) and not verify("S3cret", h) and not verify("", h)
    assert hash_password("s3cret", iterations=1000) != h  # fresh salt each time
    assert not verify("s3cret", "md5$1$00$00") and not verify("s3cret", "garbage")


def test_users_file(tmp_path: Path) -> None:
    f = tmp_path / "users"
    add_user(f, "ann", "pw1")
    add_user(f, "bob", "pw2")
    add_user(f, "ann", "pw3")  # replaces
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    users = load_users(f)
    assert sorted(users) == ["ann", "bob"]
    check = authenticator(f)
    assert check("ann", "pw3") and not check("ann", "pw1") and not check("carl", "pw3") and not check("bob", "")
    f.write_text("# comment\nann:plaintext\n")
    with pytest.raises(WorkbenchError, match="line 2"):
        load_users(f)
    f.write_text("\n")
    with pytest.raises(WorkbenchError, match="no users"):
        load_users(f)
    with pytest.raises(WorkbenchError, match="bad username"):
        add_user(f, "a:b", "x")


@pytest.mark.parametrize("attempt", TRAVERSALS)
def test_traversal_is_refused(tmp_path: Path, attempt: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    with pytest.raises(UnsafePathError):
        read_text_inside(ws, attempt)


def test_absolute_symlink_and_inside_paths(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "reports").mkdir(parents=True)
    (ws / "reports" / "r.md").write_text("ok")
    (tmp_path / "outside.txt").write_text("secret")
    (ws / "link").symlink_to(tmp_path / "outside.txt")
    (ws / "dirlink").symlink_to(tmp_path)
    assert read_text_inside(ws, "reports/r.md") == "ok"
    assert read_text_inside(ws, str(ws / "reports" / "r.md")) == "ok"  # absolute, inside
    assert resolve_inside(ws, "reports%2Fr.md") == (ws / "reports" / "r.md").resolve()
    for bad in ("/etc/passwd", str(tmp_path / "outside.txt"), "link", "dirlink/outside.txt", "", "a\x00b",
                "%00", "reports"):
        with pytest.raises(UnsafePathError):
            read_text_inside(ws, bad)


def test_binding_beyond_loopback_needs_an_auth_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import app

    app.check_bind("127.0.0.1", None)
    app.check_bind("::1", None)
    for host in ("0.0.0.0", "192.168.1.5", "::"):
        with pytest.raises(WorkbenchError, match="--auth-file"):
            app.check_bind(host, None)
    assert app.main(["--workspace", str(tmp_path / "ws"), "--host", "0.0.0.0"]) == 2
    assert "refusing to bind 0.0.0.0" in capsys.readouterr().err
    # The same through the workbench CLI, and adding a user with it.
    from hallucination_workbench import main

    assert main(["app", "--workspace", str(tmp_path / "ws"), "--host", "0.0.0.0"]) == 2
    os.environ["WORKBENCH_PASSWORD"] = "pw"
    try:
        assert main(["app", "--add-user", "ann", "--auth-file", str(tmp_path / "users")]) == 0
    finally:
        del os.environ["WORKBENCH_PASSWORD"]
    assert authenticator(tmp_path / "users")("ann", "pw")

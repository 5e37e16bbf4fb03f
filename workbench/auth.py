"""Users file for the app when it is bound beyond loopback.

One user per line, `username:pbkdf2_sha256$iterations$salt$hash` (salt and hash hex); blank lines
and `#` comments are ignored. Passwords are never stored, only PBKDF2-HMAC-SHA256 digests, and are
compared in constant time. Add a user with `workbench app --add-user NAME --auth-file FILE`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.safeopen import read_input_text

ALGORITHM = "pbkdf2_sha256"
ITERATIONS = 310_000  # OWASP's 2023 figure for PBKDF2-HMAC-SHA256
#: Bounds on a users file's iteration counts: below, a hash is too cheap to guess offline; above, every login
#: (and every wrong guess) costs seconds of the server's CPU.
MIN_ITERATIONS, MAX_ITERATIONS = 100_000, 2_000_000
MAX_AUTH_BYTES = 1 << 20  # about 6,000 users
_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")  # always with fullmatch: `$` would accept a trailing newline


def hash_password(password: str, *, iterations: int = ITERATIONS, salt: str | None = None) -> str:
    """`pbkdf2_sha256$iterations$salt$hash` for `password` (a fresh random salt unless given)."""
    if not password:
        raise WorkbenchError("empty password")
    salt = salt or secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), iterations).hex()
    return f"{ALGORITHM}${iterations}${salt}${digest}"


def verify(password: str, encoded: str) -> bool:
    """Whether `password` matches an encoded hash; False (never an exception) for a malformed hash."""
    try:
        algorithm, iterations, salt, digest = encoded.split("$")
        if algorithm != ALGORITHM:
            return False
        got = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), int(iterations)).hex()
    except ValueError:
        return False
    return hmac.compare_digest(got, digest)


def load_users(path: str | os.PathLike[str]) -> dict[str, str]:
    """username -> encoded hash. Raises WorkbenchError naming the line of a malformed entry."""
    p = Path(path)
    try:  # a regular file only, bounded (a FIFO or a link to /dev/zero would hang or fill memory)
        text = read_input_text(p, max_bytes=MAX_AUTH_BYTES, what="auth file")
    except OSError as e:
        raise WorkbenchError(f"cannot read auth file {p}: {e.strerror}") from None
    users: dict[str, str] = {}
    lines: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, encoded = line.partition(":")
        if not sep or not _NAME.fullmatch(name) or not encoded.startswith(ALGORITHM + "$") or encoded.count("$") != 3:
            raise WorkbenchError(f"{p}, line {n}: expected `username:{ALGORITHM}$iterations$salt$hash`")
        _check_entry(p, n, encoded)
        if name in users:
            raise WorkbenchError(f"{p}, line {n}: user `{name}` again (first on line {lines[name]}); one line per "
                                 "user, or which password counts would depend on the order")
        users[name], lines[name] = encoded, n
    if not users:
        raise WorkbenchError(f"auth file {p} has no users; add one with `workbench app --add-user NAME "
                             f"--auth-file {p}`")
    return users


def _check_entry(path: Path, n: int, encoded: str) -> None:
    """Iterations within [MIN_ITERATIONS, MAX_ITERATIONS] (every login pays them: 2e9 made one take over 10 s, a
    denial of service; 1e12 overflowed), a hex salt and a 64-hex-digit digest."""
    _, iterations, salt, digest = encoded.split("$")
    if not iterations.isdigit() or not MIN_ITERATIONS <= int(iterations[:12]) <= MAX_ITERATIONS:
        raise WorkbenchError(f"{path}, line {n}: iterations must be a whole number from {MIN_ITERATIONS:,} to "
                             f"{MAX_ITERATIONS:,}, got `{iterations[:20]}`")
    if not re.fullmatch(r"(?:[0-9a-f]{2}){1,64}", salt) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise WorkbenchError(f"{path}, line {n}: the salt and the hash must be hexadecimal (a 32-byte hash)")


def authenticator(path: str | os.PathLike[str]) -> Callable[[str, str], bool]:
    """gradio's `auth=` callable over a users file (read once, at start)."""
    users = load_users(path)
    dummy = hash_password("x", iterations=ITERATIONS)

    def check(username: str, password: str) -> bool:
        # Unknown users cost as much as known ones, so timing does not reveal who exists.
        return verify(password, users.get(username, dummy)) and username in users

    return check


def add_user(path: str | os.PathLike[str], username: str, password: str) -> None:
    """Add or replace `username` in the users file. The file is rewritten whole under a temporary name with
    mode 0600 and renamed into place, so it is 0600 afterwards even if it was not, and a crash leaves the
    old file or the new one, never half of one."""
    if not _NAME.fullmatch(username):
        raise WorkbenchError(f"bad username {username!r}: use letters, digits and _ . @ - (at most 64)")
    p = Path(path)
    try:
        lines = read_input_text(p, max_bytes=MAX_AUTH_BYTES, what="auth file").splitlines() if p.exists() else []
    except OSError as e:
        raise WorkbenchError(f"cannot read auth file {p}: {e}") from None
    kept = [ln for ln in lines if ln.partition(":")[0].strip() != username]
    kept.append(f"{username}:{hash_password(password)}")
    tmp = p.with_name(f".{p.name}.{secrets.token_hex(4)}.tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(kept) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise WorkbenchError(f"cannot write auth file {p}: {e.strerror}") from None


class Throttle:
    """Failed sign-ins slow the next ones down, per user and per client address (OWASP's login throttling).

    Each key (a user name, a client address) may fail `free` times; from then on every attempt locks the key for
    `base_s` x 2^(attempts - free - 1) seconds, at most `max_s`, and an attempt on a locked key is refused without
    the password being checked. An attempt counts as failed from the moment it starts and is forgiven when it
    succeeds, so 60 parallel guesses are throttled like 60 sequential ones. At most `max_keys` keys are kept
    (the oldest dropped), so guessing with random names cannot grow memory without bound."""

    def __init__(self, *, free: int = 3, base_s: float = 1.0, max_s: float = 60.0, max_keys: int = 10_000,
                 clock: Callable[[], float] | None = None) -> None:
        import time

        self.free, self.base_s, self.max_s, self.max_keys = free, base_s, max_s, max_keys
        self.clock = clock or time.monotonic
        self._keys: dict[str, tuple[int, float]] = {}  # key -> (attempts not forgiven, locked until)

    def wait(self, *keys: str) -> float:
        """Seconds until every key may try again (0: now)."""
        now = self.clock()
        return max([0.0, *(self._keys.get(k, (0, 0.0))[1] - now for k in keys)])

    def attempt(self, *keys: str) -> float:
        """Start an attempt: 0 when it may go on (it counts as failed until `succeeded`), else the seconds to wait
        (the attempt is refused and changes nothing)."""
        if (left := self.wait(*keys)) > 0:
            return left
        now = self.clock()
        for k in keys:
            n = self._keys.pop(k, (0, 0.0))[0] + 1
            lock = 0.0 if n <= self.free else min(self.max_s, self.base_s * 2 ** (n - self.free - 1))
            self._keys[k] = (n, now + lock)
            if len(self._keys) > self.max_keys:
                del self._keys[next(iter(self._keys))]
        return 0.0

    def succeeded(self, *keys: str) -> None:
        for k in keys:
            self._keys.pop(k, None)

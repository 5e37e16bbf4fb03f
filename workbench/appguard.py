"""ASGI middleware for the app (no gradio import: it speaks ASGI and reads three attributes of gradio's App).

gradio 6 embeds `gradio_api_info` (endpoint names, parameters, example values) in every HTML page it serves,
the login page included, although `/gradio_api/info` itself answers 401 before login. `NoApiInfoBeforeLogin`
replaces that value by `{}` in HTML responses to visitors without a session; the page reloads after login
and gets the real one. Measured on gradio 6.31 over a workspace of 5 runs: the login page was 53 KB holding run
ids 236 times and every API name; with this (and run ids kept out of the layout) it is 4.6 KB holding neither.
Tested over HTTP and by signing in through the login page in Chromium (tests/test_app_decisions.py).
"""

from __future__ import annotations

import json
import math
from http.cookies import SimpleCookie
from typing import Any

#: The login page's own script (served only to visitors without a session; it holds nothing from the workspace).
#: gradio's login form shows "Incorrect Credentials" on a 400 and nothing on any other answer, so a visitor whose
#: sign-ins are locked (429, `LoginThrottle`) kept reading the last "Incorrect Credentials" and could not tell a
#: lock-out from a typo: this shows the 429's own words (with the seconds to wait) in place of it, and gives gradio's
#: line back on the next answer.
LOGIN_NOTE_JS = """(() => {
  const send = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const answer = await send(input, init);
    try {
      const url = new URL(typeof input === 'string' ? input : input.url, location.href);
      const method = ((init && init.method) || (input && input.method) || 'GET').toUpperCase();
      if (method !== 'POST' || !/\\/login\\/?$/.test(url.pathname)) return answer;
      let note = document.getElementById('wb-login-note');
      const creds = () => document.querySelectorAll('p.creds');
      if (answer.status === 429) {
        const detail = (await answer.clone().json()).detail || 'Too many failed sign-ins: wait, then try again.';
        if (!note) {
          note = document.createElement('p');
          note.id = 'wb-login-note';
          note.setAttribute('role', 'alert');
          note.style.cssText = 'color:#cf222e;font-weight:600;margin:0.5em 0';
          const head = document.querySelector('h2');
          if (head) head.insertAdjacentElement('afterend', note); else document.body.prepend(note);
        }
        note.textContent = 'Sign-in locked: ' + detail;
        creds().forEach((p) => { p.style.display = 'none'; });
      } else {
        if (note) note.remove();
        creds().forEach((p) => { p.style.display = ''; });
      }
    } catch (e) { /* the page's own handling goes on */ }
    return answer;
  };
})();"""


class NoApiInfoBeforeLogin:
    """With login on, HTML served to a visitor without a session carries no API description (module docstring).
    Other responses pass through untouched and unbuffered."""

    MARKER = "gradio_api_info = "

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or _logged_in(scope):
            await self.app(scope, receive, send)
            return
        held: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def filtered(message: Any) -> None:
            if message["type"] == "http.response.start":
                kinds = dict(message.get("headers", []))
                if b"text/html" in kinds.get(b"content-type", b""):
                    held["start"] = message
                    return
            elif "start" in held and message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                body = self.login_note(self.blank(b"".join(chunks)))
                start = held["start"]
                headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, filtered)

    @classmethod
    def login_note(cls, body: bytes) -> bytes:
        """The HTML with `LOGIN_NOTE_JS` before `</head>`: the login page says when sign-ins are locked."""
        text = body.decode("utf-8", "replace")
        at = text.find("</head>")
        return body if at < 0 else (text[:at] + f"<script>{LOGIN_NOTE_JS}</script>" + text[at:]).encode()

    @classmethod
    def blank(cls, body: bytes) -> bytes:
        """The HTML with the embedded API description replaced by `{}` (unchanged when there is none)."""
        text = body.decode("utf-8", "replace")
        at = text.find(cls.MARKER)
        if at < 0:
            return body
        start = at + len(cls.MARKER)
        try:
            _, end = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            return body
        return (text[:start] + "{}" + text[end:]).encode()


def _logged_in(scope: Any) -> bool:
    """Whether the request carries a session cookie of a logged-in user (always True when login is off).
    Reads gradio's App: `auth`, `cookie_id` and `tokens` (the same names its own routes use)."""
    app = scope.get("app")
    if getattr(app, "auth", None) is None:
        return True
    cookie_id, tokens = getattr(app, "cookie_id", ""), getattr(app, "tokens", {})
    cookies: SimpleCookie = SimpleCookie()
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            cookies.load(value.decode("latin-1"))
    for name in (f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}"):
        if name in cookies and cookies[name].value in tokens:
            return True
    return False


class LoginThrottle:
    """POST /login passes through `workbench.auth.Throttle`, keyed by the user name and the client address: a
    locked key gets HTTP 429 with the seconds to wait, before gradio checks (and pays PBKDF2 for) the password.
    The form is read here (at most `MAX_FORM` bytes) and handed on to gradio unchanged."""

    MAX_FORM = 16_384  # a login form is a name and a password

    def __init__(self, app: Any, throttle: Any = None) -> None:
        from workbench.auth import Throttle

        self.app, self.throttle = app, throttle or Throttle()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "").rstrip("/")
        if scope["type"] != "http" or scope.get("method") != "POST" or not path.endswith("/login"):
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.MAX_FORM:
                await _json(send, 413, {"detail": "the login form is too large"})
                return
        from urllib.parse import parse_qs

        user = (parse_qs(body.decode("latin-1")).get("username") or [""])[0].strip()
        client = (scope.get("client") or ("?",))[0]
        keys = (f"user:{user}", f"client:{client}")
        if (wait := self.throttle.attempt(*keys)) > 0:
            seconds = max(1, math.ceil(wait))  # the same whole seconds in the words and in Retry-After, never "0 s"
            await _json(send, 429, {"detail": f"Too many failed sign-ins for this user or from this address; "
                                              f"try again in {seconds} s."}, retry_after=seconds)
            return
        status: dict[str, int] = {}

        async def replay() -> Any:
            if "sent" in status:
                return await receive()
            status["sent"] = 1
            return {"type": "http.request", "body": body, "more_body": False}

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                self.throttle.succeeded(*keys)
            await send(message)

        await self.app(scope, replay, watch)


async def _json(send: Any, status: int, content: dict[str, Any], retry_after: int | None = None) -> None:
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class LoginOnlyRoutes:
    """Routes gradio serves without a session although nothing before login needs them: its heartbeat (an
    endless event stream per connection, `/gradio_api/heartbeat/{session}`) answers 401 to a visitor without a
    session, like `/gradio_api/info`; the page after login opens it with the session cookie."""

    PREFIXES = ("/gradio_api/heartbeat/", "/heartbeat/")

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith(self.PREFIXES) and not _logged_in(scope):
            await _json(send, 401, {"detail": "Not authenticated"})
            return
        await self.app(scope, receive, send)

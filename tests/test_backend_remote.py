"""What every remote backend shares (workbench/backends/remote.py): options, backoff, Retry-After, retries and the
concurrency limit per server. The openai backend's own tests (test_backend_openai.py) run it over HTTP."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from email.utils import formatdate
from pathlib import Path
from typing import Any, ClassVar

import pytest
from clirun import assert_refused, workbench

from workbench.backends.remote import (
    RemoteBackend,
    RemoteOptions,
    Retryable,
    call_with_retries,
    retry_after_seconds,
    shared_limit,
)
from workbench.errors import PartialGenerationError, WorkbenchError
from workbench.types import Completion, GenerationRequest, ModelSpec


class CountingServer:
    """Stands for a server: counts attempts per prompt and requests in flight (over every backend using it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.in_flight = self.max_in_flight = 0


class Flaky(RemoteBackend):
    """A remote backend as a plugin would write one: `flaky-N` fails N times, `never` always, others answer."""

    name = "flaky"
    OPTIONS = frozenset({"server"})
    servers: ClassVar[dict[str, CountingServer]] = {}

    def server(self) -> str:
        return str(self.spec.option("server", "s"))

    def attempt(self, request: GenerationRequest) -> list[Completion]:
        srv = self.servers[self.server()]
        with srv.lock:
            srv.attempts[request.prompt] += 1
            n = srv.attempts[request.prompt]
            srv.in_flight += 1
            srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
        try:
            time.sleep(0.02)
            fails = int(request.prompt.split("-")[1]) if request.prompt.startswith("flaky-") else 0
            if request.prompt == "never" or n <= fails:
                raise Retryable("HTTP 503: busy")
            return [Completion(text=f"ok {request.prompt}", finish_reason="stop")] * request.sampling.n
        finally:
            with srv.lock:
                srv.in_flight -= 1


def flaky(server: str = "s", **options: object) -> Flaky:
    Flaky.servers.setdefault(server, CountingServer())
    opts = {"retry_base_delay": 0.001, "server": server, **options}
    return Flaky(ModelSpec(model="m", backend="flaky", options=tuple(opts.items())))


def test_options_are_typed_bounded_and_named() -> None:
    assert flaky().remote == RemoteOptions(retry_base_delay=0.001)
    assert flaky(max_retries="7").remote.max_retries == 7  # from the command line every value is a string
    with pytest.raises(WorkbenchError, match=r"flaky backend option `max_retries`: .*greater than or equal to 0, "
                                             r"got `-1`"):
        flaky(max_retries=-1)
    with pytest.raises(WorkbenchError, match=r"flaky backend option `timeout`: .*got `soon`"):
        flaky(timeout="soon")
    with pytest.raises(WorkbenchError, match=r"unknown flaky backend option `max_retry`\. Did you mean "
                                             r"`max_retries`\?"):
        flaky(max_retry=1)


def test_backoff_grows_with_full_jitter_and_honours_retry_after() -> None:
    o = RemoteOptions(retry_base_delay=1.0, retry_max_delay=4.0)
    waits = [[o.backoff(k) for _ in range(200)] for k in range(5)]
    assert all(0 <= w <= min(4.0, 2**k) for k, ws in enumerate(waits) for w in ws)
    assert max(waits[0]) < 1.0 < max(waits[2])  # grows...
    assert min(waits[4]) < 1.0  # ...with full jitter: a wait may be short at any attempt
    assert all(o.backoff(0, retry_after=5.0) >= 5.0 for _ in range(20))


def test_retry_after_header() -> None:
    assert retry_after_seconds("2.5") == 2.5
    assert retry_after_seconds("-3") == 0.0
    assert 8 <= (retry_after_seconds(formatdate(time.time() + 10, usegmt=True)) or 0) <= 10
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_call_with_retries_stops_after_max_retries_or_when_stopped() -> None:
    calls = []

    def failing() -> str:
        calls.append(1)
        raise Retryable("HTTP 429: slow down")

    with pytest.raises(WorkbenchError, match=r"HTTP 429: slow down \(after 3 attempts\)"):
        call_with_retries(failing, RemoteOptions(max_retries=2, retry_base_delay=0.001))
    calls.clear()
    with pytest.raises(WorkbenchError, match=r"after 1 attempts"):
        call_with_retries(failing, RemoteOptions(max_retries=5, retry_base_delay=0.001), stopped=lambda: True)
    assert len(calls) == 1


def test_a_plugin_gets_retries_and_keeps_what_completed() -> None:
    b = flaky("retries", max_retries=2)
    out = b.generate([GenerationRequest("flaky-2"), GenerationRequest("plain")])
    assert [o[0].text for o in out] == ["ok flaky-2", "ok plain"]
    with pytest.raises(PartialGenerationError, match="1 of 3 requests failed") as e:
        b.generate([GenerationRequest("a"), GenerationRequest("never"), GenerationRequest("b")])
    assert sorted(e.value.completed) == [0, 2] and "(after 3 attempts)" in e.value.failures[1]
    assert Flaky.servers["retries"].attempts["never"] == 3


def _together(backends: Sequence[Any], n: int) -> None:
    """Each backend generates the same `n` prompts, all in threads at once."""
    reqs: Sequence[GenerationRequest] = [GenerationRequest(f"p{i}") for i in range(n)]
    threads = [threading.Thread(target=x.generate, args=(reqs,)) for x in backends]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_backends_on_one_server_share_its_limit() -> None:
    a, b = flaky("shared", max_concurrency=2), flaky("shared", max_concurrency=2)
    other = flaky("other", max_concurrency=2)
    _together((a, b, other), 12)
    assert Flaky.servers["shared"].max_in_flight == 2  # two backends, one server: 2 at most together
    assert Flaky.servers["other"].max_in_flight == 2
    assert sum(Flaky.servers["shared"].attempts.values()) == 24


def test_one_server_has_one_limit_the_smallest_whatever_the_order() -> None:
    a, b, c = object(), object(), object()  # three backends, all open
    first = shared_limit("one-limit", 4, a)
    assert shared_limit("one-limit", 2, b) is first and first.limit == 2  # a smaller limit lowers it for everyone
    assert shared_limit("one-limit", 8, c) is first and first.limit == 2  # a larger one does not raise it
    other = shared_limit("one-limit-other", 4, a)
    assert other is not first and other.limit == 4


def test_a_closed_backends_limit_no_longer_counts() -> None:
    """In a long-lived process (the app) a backend that declared a small limit and closed must not throttle the
    server for the backends that come after it."""
    server = "released"
    cautious, bold = flaky(server, max_concurrency=1), flaky(server, max_concurrency=4)
    for x in (cautious, bold):
        x.generate([GenerationRequest("warm")])
    _together((bold,), 8)
    assert Flaky.servers[server].max_in_flight == 1  # both open: the smaller limit
    cautious.close()
    Flaky.servers[server].max_in_flight = 0
    _together((bold,), 8)
    assert Flaky.servers[server].max_in_flight == 4  # its own limit back
    bold.close()  # none open: the next backend's own limit, even a larger one
    later = flaky(server, max_concurrency=6)
    Flaky.servers[server].max_in_flight = 0
    _together((later,), 12)
    assert Flaky.servers[server].max_in_flight == 6


@pytest.mark.parametrize("order", [(4, 2), (2, 4)])
def test_backends_with_different_limits_on_one_server_stay_under_the_smallest(order: tuple[int, int]) -> None:
    server = f"mixed-{order[0]}-{order[1]}"
    a, b = (flaky(server, max_concurrency=n) for n in order)
    other = flaky(f"{server}-other", max_concurrency=4)
    for x in (a, b, other):  # each meets its server's limit once, in this order, before they run together
        x.generate([GenerationRequest("warm")])
    _together((a, b, other), 16)
    # Keyed by (server, limit) these were two semaphores, 4 + 2 = 6 in flight together.
    assert Flaky.servers[server].max_in_flight == 2
    assert Flaky.servers[f"{server}-other"].max_in_flight == 4  # another server keeps its own limit
    assert sum(Flaky.servers[server].attempts.values()) == 2 + 32


def test_a_bad_option_on_the_command_line_is_refused_by_name(tmp_path: Path) -> None:
    probes = tmp_path / "p.jsonl"
    probes.write_text('{"id": "p1", "question": "Capital of France?", "answers": ["Paris"]}\n')
    proc = workbench("eval", "--workspace", str(tmp_path / "ws"), "--model", "m", "--backend", "openai",
                     "--backend-option", "base_url=http://127.0.0.1:9/v1", "--backend-option", "max_retries=-1",
                     "--probes", str(probes), timeout=120)
    assert_refused(proc, "openai backend option `max_retries`: Input should be greater than or equal to 0, got `-1`")

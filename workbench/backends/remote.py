"""What every remote backend shares: retries with backoff, and a limit on requests in flight.

A backend that talks to a server (openai here; a plugin for another API) subclasses `RemoteBackend` and
implements one method, `attempt(request)`: one try at one request, raising `Retryable` for what may pass (429,
5xx, a timeout, a dropped connection) and `WorkbenchError` for what will not (400, 401, a bad response). The base
class runs the requests on threads, at most `max_concurrency` in flight per server, retries each with exponential
backoff and full jitter (honouring a server's Retry-After), and raises `PartialGenerationError` when some requests
still fail, keeping the ones that completed.

Its settings (`RemoteOptions`) are backend options: `--backend-option max_retries=8`.
"""

from __future__ import annotations

import abc
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from email.utils import parsedate_to_datetime
from typing import ClassVar, TypeVar

from pydantic import BaseModel, Field, ValidationError

from workbench.backends.base import Backend
from workbench.errors import PartialGenerationError, WorkbenchError, did_you_mean
from workbench.types import Completion, GenerationRequest, ModelSpec

log = logging.getLogger(__name__)

T = TypeVar("T")


class RemoteOptions(BaseModel, extra="forbid", frozen=True, use_attribute_docstrings=True):
    """Retries and concurrency of a remote backend (openai, or a plugin built on `RemoteBackend`), set as backend
    options: `--backend-option max_retries=8 --backend-option max_concurrency=4`."""

    max_concurrency: int = Field(8, ge=1, le=1024)
    """Requests in flight at most. Every backend of one process talking to the same server shares one limit, the
    smallest any of them sets (the model under test and a judge on one server together stay under it)."""
    timeout: float = Field(60.0, gt=0, le=3600)
    """Seconds one HTTP attempt may take before it counts as failed (and is retried)."""
    max_retries: int = Field(5, ge=0, le=100)
    """Retries of one request after a 429, a 5xx, a timeout or a dropped connection; other errors (400, 401, 404)
    are not retried."""
    retry_base_delay: float = Field(0.5, ge=0, le=600)
    """Seconds of the first backoff: retry k waits a random time in [0, min(retry_max_delay, base x 2^k)] (full
    jitter, so clients that failed together do not retry together), and at least what a Retry-After header asks."""
    retry_max_delay: float = Field(30.0, gt=0, le=3600)
    """Seconds the backoff stops growing at."""

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> RemoteOptions:
        """The options of `spec` that are this model's fields; a bad value is a WorkbenchError naming it."""
        given = {k: v for k, v in spec.options if k in cls.model_fields}
        try:
            return cls.model_validate(given)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise WorkbenchError(f"{spec.backend} backend option `{field}`: {err['msg']}, got "
                                 f"`{given.get(field)}`") from None

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry `attempt` (0-based): full jitter, at least `retry_after`."""
        return max(random.uniform(0, min(self.retry_max_delay, self.retry_base_delay * 2**attempt)),
                   retry_after or 0.0)


class Retryable(Exception):
    """One attempt failed in a way that may pass: retry after the backoff (at least `retry_after` seconds)."""

    def __init__(self, why: str, retry_after: float | None = None) -> None:
        super().__init__(why)
        self.retry_after = retry_after


def retry_after_seconds(value: str | None) -> float | None:
    """An HTTP Retry-After header as seconds: either a number or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def call_with_retries(attempt: Callable[[], T], options: RemoteOptions, *,
                      stopped: Callable[[], bool] = lambda: False) -> T:
    """`attempt()` until it returns, retrying on `Retryable` up to `options.max_retries` times; then (or once
    `stopped()`) a WorkbenchError saying why and after how many attempts."""
    for k in range(options.max_retries + 1):
        try:
            return attempt()
        except Retryable as e:
            if k == options.max_retries or stopped():
                raise WorkbenchError(f"{e} (after {k + 1} attempts)") from e
            wait = options.backoff(k, e.retry_after)
            log.debug("%s; retry %d of %d in %.1f s", e, k + 1, options.max_retries, wait)
            time.sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


class ServerLimit:
    """Requests in flight to one server: at most `limit` at once, over every backend of the process using it.

    Each backend declares its own limit; the limit is the smallest declared by a backend still open. Unlike a
    semaphore it can change while requests are in flight: a backend that declares a smaller limit lowers it for
    everyone (those already in flight finish; no new one starts until the count is under it), and when that
    backend closes the others get their own limits back (in a long-lived process, the app, one cautious backend
    would otherwise throttle the server for good)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self._declared: dict[int, int] = {}  # id of the declaring backend -> its limit
        self._cond = threading.Condition()

    def declare(self, holder: object, limit: int) -> None:
        with self._cond:
            self._declared[id(holder)] = limit
            self._settle()

    def release(self, holder: object) -> None:
        """`holder` closed: its limit no longer counts (with none open, the limit stays until the next declares)."""
        with self._cond:
            self._declared.pop(id(holder), None)
            self._settle()

    def _settle(self) -> None:
        if self._declared:
            self.limit = min(self._declared.values())
            self._cond.notify_all()  # a raised limit lets waiting requests start

    def __enter__(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self.in_flight -= 1
            self._cond.notify()


_LIMITS: dict[str, ServerLimit] = {}
_LIMITS_LOCK = threading.Lock()


def shared_limit(server: str, limit: int, holder: object) -> ServerLimit:
    """The process-wide limit of `server`: backends on one server share their requests in flight.

    Keyed by the server alone, and the smallest limit of the backends that declared one and are still open wins.
    Keyed by (server, limit), two backends with different limits got two semaphores and together exceeded both;
    the first caller's limit would make the outcome depend on which backend happened to start first. The smallest
    is the strictest capacity anyone declared for that server, whatever the order. `holder` (the backend) declares
    `limit` (again: its latest counts) until `release_limit` takes it back when the backend closes."""
    with _LIMITS_LOCK:
        shared = _LIMITS.get(server)
        if shared is None:
            shared = _LIMITS[server] = ServerLimit(limit)
        before = shared.limit
        shared.declare(holder, limit)
        if shared.limit < before:
            log.debug("%s: requests in flight lowered from %d to %d for every backend on it",
                      server, before, shared.limit)
        return shared


def release_limit(server: str, holder: object) -> None:
    """`holder` closed: the server's limit is the smallest of the backends still open."""
    with _LIMITS_LOCK:
        shared = _LIMITS.get(server)
    if shared is not None:
        shared.release(holder)


class RemoteBackend(Backend):
    """A backend whose model runs behind a server. Implement `attempt`; override `server` to name the server
    (requests to one server share its concurrency limit) and list the backend's own options in `OPTIONS`."""

    local_model = False  # the model (and adapter) are names the server knows
    #: The backend's own options, on top of RemoteOptions' fields and `batch_size`; any other is refused.
    OPTIONS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        known = self.OPTIONS | set(RemoteOptions.model_fields) | {"batch_size"}  # batch_size: Backend.batch_size
        unknown = sorted(k for k, _ in spec.options if k not in known)
        if unknown:
            raise WorkbenchError(f"unknown {self.name} backend option `{unknown[0]}`."
                                 f"{did_you_mean(unknown[0], known)} Known: {', '.join(sorted(known))}")
        self.remote = RemoteOptions.from_spec(spec)
        self.closed = False

    def server(self) -> str:
        """What the concurrency limit is shared by (a base URL); default: the backend's name."""
        return self.name

    @abc.abstractmethod
    def attempt(self, request: GenerationRequest) -> list[Completion]:
        """One try at one request: its `request.sampling.n` completions. Raise `Retryable` for a failure that may
        pass, WorkbenchError for one that will not. Called from several threads at once."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        self.start()
        self.closed = False
        completed: dict[int, list[Completion]] = {}
        failures: dict[int, str] = {}
        limit = shared_limit(self.server(), self.remote.max_concurrency, holder=self)
        # Threads, not asyncio: generate() is sync and may be called from a thread with a running loop.
        # Daemon threads, not a ThreadPoolExecutor: the interpreter joins executor threads at exit, so a
        # server that stopped answering would hold a finished (or stalled and abandoned) run for minutes.
        todo = queue.SimpleQueue[int]()
        for i in range(len(requests)):
            todo.put(i)
        lock = threading.Lock()

        def one(i: int) -> list[Completion]:
            def attempt() -> list[Completion]:
                with limit:  # held for one attempt, not through the backoff: a waiting retry frees its slot
                    return self.attempt(requests[i])

            return call_with_retries(attempt, self.remote, stopped=lambda: self.closed)

        def worker() -> None:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    out = one(i)
                    with lock:
                        completed[i] = out
                except WorkbenchError as e:
                    with lock:
                        failures[i] = str(e)

        threads = [threading.Thread(target=worker, daemon=True, name=f"{self.name}-{k}")
                   for k in range(min(self.remote.max_concurrency, len(requests)))]
        for t in threads:
            t.start()
        for t in threads:  # every request runs to its end before anything is raised
            t.join()
        if failures:
            raise PartialGenerationError(completed, failures)
        return [completed[i] for i in range(len(requests))]

    def close(self) -> None:
        """Requests still in flight (a stalled batch) stop retrying; this backend's limit on its server no longer
        counts."""
        self.closed = True
        release_limit(self.server(), self)

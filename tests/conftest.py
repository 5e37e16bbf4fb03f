"""Shared fixtures. Everything offline, CPU only, one torch thread (results are bitwise stable)."""

from __future__ import annotations

import os

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "OMP_NUM_THREADS": "1",
}.items():
    os.environ.setdefault(_k, _v)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The test-size synthetic world (tiny Llama trained from scratch), built once per session (tests/artifacts.py)."""
    from artifacts import world as shared_world

    return shared_world(tmp_path_factory)


@pytest.fixture(scope="session")
def w(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> object:
    """The fine-tuning world (tests/ftworld.py: the test world, its baseline run, attributions and fix set), built
    once per session for every fine-tuning test module."""
    from ftworld import setup

    return setup(request, tmp_path_factory.mktemp("ft"))


@pytest.fixture(scope="module")
def postgres() -> object:
    """A throwaway PostgreSQL cluster for a module (bench/store_load.py's `Postgres`: a Unix socket, no TCP port),
    stopped and deleted afterwards; skips naming what is missing (the server programs, psycopg2, a `postgres` user)."""
    from benchload import load_bench

    pg_class = load_bench("store_load").Postgres
    why = pg_class.missing()
    if why:
        pytest.skip(why)
    pg = pg_class()
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture(scope="session", autouse=True)
def _shutdown_vllm_engines() -> object:
    """vLLM engines log at interpreter exit into streams pytest has closed; shut them down first."""
    import sys

    yield
    module = sys.modules.get("workbench.backends.vllm")
    if module is not None:
        module.shutdown_engines()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Figures tests record as `record_property("summary", ...)` (the fuzz counts), shown in CI's log."""
    lines = [f"{rep.nodeid}: {value}" for rep in terminalreporter.stats.get("passed", [])
             for key, value in rep.user_properties if key == "summary"]
    if lines:
        terminalreporter.write_sep("-", "figures recorded by tests")
        for line in lines:
            terminalreporter.write_line(line)
    over = unmarked_slow(_TEST_SECONDS, _MARKED_SLOW)
    if over:  # on a loaded machine some of these are noise; on a quiet one, mark them
        terminalreporter.write_sep("-", f"unmarked tests over {SLOW_S:.0f} s (mark them slow if a quiet run agrees)")
        for test, seconds in over:
            terminalreporter.write_line(f"{seconds:6.1f} s  {test}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, modules in the order tests/schedule.py plans (longest first; readers of a shared artifact
    after its builder). Every worker computes the same order; a plain `pytest` run keeps the file order."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    from schedule import load_seconds, plan

    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::")[0], []).append(item)
    items[:] = [it for m in plan(list(by_module), load_seconds(), int(workers)) for it in by_module[m]]


_MODULE_SECONDS: dict[str, float] = {}


#: A test that takes longer on a quiet 2-core machine (its module's fixtures included, when it is the first to
#: need them) is marked `slow`, which leaves it out of `make test-fast`, the edit loop.
SLOW_S = 5.0
_TEST_SECONDS: dict[str, float] = {}
_MARKED_SLOW: set[str] = set()  # tests make test-fast leaves out: marked slow, vllm, browser or gpu
# the markers the Makefile's test-fast leaves out (`-m "not ..."`; tests/test_schedule.py keeps the two equal)
_OUT_OF_FAST = {"slow", "vllm", "browser", "gpu"}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::")[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration
    _TEST_SECONDS[report.nodeid] = _TEST_SECONDS.get(report.nodeid, 0.0) + report.duration
    if _OUT_OF_FAST & set(report.keywords):
        _MARKED_SLOW.add(report.nodeid)


def unmarked_slow(seconds: dict[str, float], marked: set[str], limit: float = SLOW_S) -> list[tuple[str, float]]:
    """The tests over `limit` seconds that `make test-fast` would run (not in `marked`), longest first."""
    return sorted(((t, s) for t, s in seconds.items() if s > limit and t not in marked), key=lambda ts: -ts[1])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """WORKBENCH_TIMINGS=FILE: each module's seconds (setup, call and teardown of its tests) as JSON, the input of
    tests/schedule.py (tests/module_seconds.json). The modules this run ran replace their entries; the others
    keep theirs, so a run of a few modules refreshes those without dropping the rest from the plan."""
    target = os.environ.get("WORKBENCH_TIMINGS")
    if target and not os.environ.get("PYTEST_XDIST_WORKER") and _MODULE_SECONDS:
        import json

        from schedule import load_seconds

        merged = {**load_seconds(Path(target)), **{m: round(s, 1) for m, s in _MODULE_SECONDS.items()}}
        ordered = dict(sorted(merged.items(), key=lambda kv: -kv[1]))
        Path(target).write_text(json.dumps(ordered, indent=1) + "\n")

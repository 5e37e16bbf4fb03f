"""tests/schedule.py: the order xdist hands test modules out in (longest first, readers of a shared artifact after
its builder)."""

from __future__ import annotations

from pathlib import Path

import pytest
import schedule
from schedule import UNKNOWN_S, plan


def test_longest_first_and_unknown_modules_count_as_short() -> None:
    seconds = {"a.py": 10.0, "b.py": 300.0, "c.py": 60.0}
    assert plan(["a.py", "b.py", "c.py", "new.py"], seconds, 2) == ["b.py", "c.py", "a.py", "new.py"]
    assert UNKNOWN_S < 10.0


def test_readers_of_a_shared_artifact_start_after_its_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule, "SHARED", {"chain": ("r1.py", ("r1.py", "r2.py"))})  # the build: r1's seconds
    seconds = {"r1.py": 210.0, "r2.py": 205.0, "x.py": 100.0, "y.py": 90.0, "z.py": 20.0}
    order = plan(list(seconds), seconds, 2)
    # r1 builds at 0 on one worker; r2 would wait 210 s on the other, so x, y and z go there first (0-210 s) and
    # r2 starts once the chain is done.
    assert order == ["r1.py", "x.py", "y.py", "z.py", "r2.py"]
    # The build's time is the measure module's: a 20 s build (z's) lets r2 start when x ends, before y.
    monkeypatch.setattr(schedule, "SHARED", {"chain": ("z.py", ("r1.py", "r2.py"))})
    assert plan(list(seconds), seconds, 2) == ["r1.py", "x.py", "r2.py", "y.py", "z.py"]
    # Without the shared artifact: the two longest first, side by side.
    monkeypatch.setattr(schedule, "SHARED", {})
    assert plan(list(seconds), seconds, 2)[:2] == ["r1.py", "r2.py"]


def test_the_timings_file_names_modules_that_exist() -> None:
    root = Path(__file__).parent.parent
    seconds = schedule.load_seconds()
    assert seconds, "tests/module_seconds.json is missing or empty"
    assert all((root / m).is_file() for m in seconds), [m for m in seconds if not (root / m).is_file()]


def test_a_malformed_timings_file_only_loses_the_order(tmp_path: Path) -> None:
    bad = tmp_path / "seconds.json"
    cases = (("{not json", {}), ("[1, 2]", {}), ('{"a.py": "slow", "b.py": 3, "c.py": true}', {"b.py": 3.0}))
    for text, expected in cases:
        bad.write_text(text)
        assert schedule.load_seconds(bad) == expected


def test_a_partial_run_refreshes_its_modules_and_keeps_the_others(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    target = tmp_path / "seconds.json"
    target.write_text('{"tests/test_elsewhere.py": 42.0, "tests/test_schedule.py": 999.0}')
    env = {**os.environ, "WORKBENCH_TIMINGS": str(target)}
    env.pop("PYTEST_XDIST_WORKER", None)  # the run below is its own session, not a worker of this one
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "longest_first",
                           str(Path(__file__))], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    seconds = schedule.load_seconds(target)
    assert seconds["tests/test_elsewhere.py"] == 42.0
    assert seconds["tests/test_schedule.py"] < 999.0


def test_unmarked_tests_over_the_limit_are_listed_longest_first() -> None:
    from conftest import SLOW_S, unmarked_slow

    seconds = {"a.py::t1": SLOW_S + 1, "a.py::t2": SLOW_S + 9, "a.py::t3": SLOW_S - 1, "b.py::t4": 60.0}
    assert unmarked_slow(seconds, {"b.py::t4"}) == [("a.py::t2", SLOW_S + 9), ("a.py::t1", SLOW_S + 1)]


def test_the_markers_left_out_of_the_fast_list_are_those_make_test_fast_leaves_out() -> None:
    import re

    from conftest import _OUT_OF_FAST

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    (expr,) = re.findall(r'^test-fast:.*\n\t.*-m "([^"]+)"', makefile, flags=re.M)
    assert set(re.findall(r"not (\w+)", expr)) == _OUT_OF_FAST

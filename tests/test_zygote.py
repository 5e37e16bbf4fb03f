"""The test zygote (tests/zygote.py) runs a command as a fresh interpreter does: same output, exit code, working
directory and environment; a command over its time limit is killed with what it started; what a store leaves
at exit is what a real exit leaves."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clirun import ENV, workbench

from workbench import procstat


@pytest.mark.parametrize("args", [["--version"], ["runs", "--json"], ["show", "nope"], ["eval", "--samples", "-1"],
                                  ["no-such-command"]])
def test_a_forked_command_prints_and_exits_as_a_fresh_one(tmp_path: Path, args: list[str]) -> None:
    ws = ["--workspace", str(tmp_path / "ws")] if args[0] in ("runs", "show") else []
    forked = workbench(*args, *ws, timeout=120)
    fresh = workbench(*args, *ws, timeout=120, fresh=True)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_cwd_and_the_runtime_environment_reach_the_command(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"question": "q?", "answers": ["a"]}\n')
    done = workbench("validate", "p.jsonl", "--json", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n"] == 1
    bad = workbench("runs", "--workspace", str(tmp_path / "ws"), env={**ENV, "WORKBENCH_LOG_LEVEL": "LOUD"})
    assert bad.returncode == 2 and "LOUD" in bad.stderr, bad.stderr


SCRIPT = """
import os, sys
from helper_beside_it import WORD
print(WORD, sys.argv[1:], os.getcwd(), os.environ.get("WORKBENCH_X"), flush=True)
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def test_a_forked_script_runs_as_python_script_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python SCRIPT ARGS` (tests/jobworker.py's way): argv, the script's folder first on sys.path, cwd, environment,
    output and exit code as a fresh interpreter gives them."""
    from clirun import start_script

    (tmp_path / "s.py").write_text(SCRIPT)
    (tmp_path / "helper_beside_it.py").write_text("WORD = 'imported'\n")
    (tmp_path / "cwd").mkdir()
    monkeypatch.setenv("WORKBENCH_X", "seen")
    forked = start_script(tmp_path / "s.py", ["3", "b c"], cwd=tmp_path / "cwd")
    monkeypatch.setenv("WORKBENCH_TEST_FRESH", "1")
    fresh = start_script(tmp_path / "s.py", ["3", "b c"], cwd=tmp_path / "cwd")
    assert type(forked).__name__ == "Forked" and isinstance(fresh, subprocess.Popen)
    got = [(p.wait(timeout=60), *p.communicate(timeout=60)) for p in (forked, fresh)]
    assert got[0] == got[1] == (3, f"imported ['3', 'b c'] {tmp_path / 'cwd'} seen\n", "to stderr\n")


@pytest.mark.slow  # over 5 s on 2 cores: the session world's build, when it is the first to need it
def test_a_store_is_closed_at_exit(world: Any, tmp_path: Path) -> None:
    """SQLite folds its write-ahead log back when the last connection closes: a real exit closes it."""
    ws = tmp_path / "ws"
    done = workbench("eval", "--model", str(world.model), "--probes", str(world.probes), "--workspace", str(ws),
                     "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in ws.iterdir() if p.name.startswith("store")) == ["store.sqlite"]


@pytest.mark.slow  # the session world, as above
def test_over_its_limit_a_command_is_killed(world: Any, tmp_path: Path) -> None:
    """subprocess.run's contract: TimeoutExpired once the command is gone, here with its whole process group."""
    import clirun

    workbench("--version")  # the zygote is up
    assert clirun._zygote is not None
    with pytest.raises(subprocess.TimeoutExpired):
        workbench("eval", "--model", str(world.model), "--probes", str(world.probes), "--workspace",
                  str(tmp_path / "ws"), "--samples", "1000", timeout=1.0)  # 20 samples end within 1 s on AVX-512
    assert procstat.descendants(clirun._zygote.proc.pid) == []


def test_the_startup_bench_refuses_no_repeats(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from benchload import run_main

    code, err = run_main("cli_startup", ["--repeats", "0"], monkeypatch, capsys)
    assert code == 2 and "--repeats: must be at least 1, got 0" in err
    code, err = run_main("cli_startup", ["--entities", "3"], monkeypatch, capsys)
    assert code == 2 and "--entities: a world needs at least 8 entities, got 3" in err


def test_a_zygote_that_cannot_start_leaves_the_commands_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    import clirun

    def broken(env: dict[str, str]) -> None:
        raise RuntimeError("the test zygote did not start (exit 1): ImportError")

    monkeypatch.setattr(clirun, "Zygote", broken)
    monkeypatch.setattr(clirun, "_zygote", None)
    monkeypatch.setattr(clirun, "_no_zygote", None)
    with pytest.warns(UserWarning, match="commands run fresh: the test zygote did not start"):
        done = workbench("--version", timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("workbench ")
    assert workbench("--version", timeout=120).returncode == 0  # no second try, no second warning

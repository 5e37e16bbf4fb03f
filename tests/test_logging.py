"""How much the project logs: `--verbose` / `--quiet` and WORKBENCH_LOG_LEVEL set the level of the project's own
loggers (workbench.logconfig); the command's output stays on stdout, a bad level is refused naming the variable."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import ENV, assert_refused, workbench

from workbench.errors import WorkbenchError
from workbench.logconfig import LEVEL_ENV, PROJECT_LOGGERS, level_from_env, resolve_level, setup_logging

#: The debug line `Store.open` logs: `workbench runs` on an empty workspace logs nothing else.
STORE_OPENED = "debug: workbench.store.db: store "


def _runs(ws: Path, *flags: str, level: str | None = None) -> tuple[str, str]:
    env = {k: v for k, v in ENV.items() if k != LEVEL_ENV}
    if level is not None:
        env[LEVEL_ENV] = level
    proc = workbench(*flags, "runs", "--workspace", str(ws), env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def test_the_flags_and_the_variable_set_what_a_module_logs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    out, err = _runs(ws)
    assert STORE_OPENED not in err and "run" in out  # INFO by default: no debug detail, the table on stdout
    _, err = _runs(ws, level="debug")  # any case
    assert f"{STORE_OPENED}{ws / 'store.sqlite'} opened" in err
    out_v, err = _runs(ws, "--verbose", level="ERROR")  # a flag wins over the variable (--quiet too: below)
    assert STORE_OPENED in err and STORE_OPENED not in out_v  # detail never mixes into the output


@pytest.mark.parametrize("argv", [["-v", "runs"], ["runs", "-v"], ["runs", "--verbose"],
                                  ["reports", "list", "-v"], ["reports", "-v", "list"]],
                         ids=" ".join)
def test_verbose_before_or_after_the_command(argv: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in ENV.items() if k != LEVEL_ENV}
    proc = workbench(*argv, "--workspace", str(tmp_path / "ws"), env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert STORE_OPENED in proc.stderr


def test_quiet_after_the_command_wins_over_the_variable_and_excludes_verbose(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    quiet = workbench("runs", "--workspace", ws, "-q", env={**ENV, LEVEL_ENV: "DEBUG"}, timeout=120)
    assert quiet.returncode == 0 and STORE_OPENED not in quiet.stderr, quiet.stderr[-2000:]
    for argv in (["-v", "runs", "-q"], ["runs", "-q", "--verbose"]):  # one on each side, or both after it
        both = workbench(*argv, "--workspace", ws, timeout=120)
        assert both.returncode == 2 and "not allowed with argument" in both.stderr, (argv, both.stderr[-2000:])
        assert "Traceback" not in both.stderr


def test_a_command_s_help_shows_the_flags_and_imports_no_torch() -> None:
    import subprocess
    import sys

    code = ("import contextlib, sys\nfrom hallucination_workbench import main\n"
            "with contextlib.suppress(SystemExit): main(['eval', '--help'])\n"
            "print('torch' in sys.modules, 'gradio' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "-v, --verbose" in proc.stdout and "-q, --quiet" in proc.stdout
    assert proc.stdout.split()[-2:] == ["False", "False"], proc.stdout[-500:]


def test_an_unknown_level_is_refused_naming_the_variable(tmp_path: Path) -> None:
    env = {**ENV, LEVEL_ENV: "LOUD"}
    proc = workbench("runs", "--workspace", str(tmp_path / "ws"), env=env, timeout=120)
    assert_refused(proc, f"{LEVEL_ENV}='LOUD' is not a log level", "DEBUG, INFO, WARNING, ERROR")
    assert not (tmp_path / "ws").exists()  # refused before the command did anything
    both = workbench("--verbose", "--quiet", "runs", "--workspace", str(tmp_path / "ws"), timeout=120)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_python_app_py_refuses_an_unknown_level_before_it_starts(tmp_path: Path) -> None:
    """`python app.py` is an entry point of its own: the same log set-up as `workbench app`, so the same refusal."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "app.py"), "--workspace", str(tmp_path / "ws")],
                          capture_output=True, text=True, env={**ENV, LEVEL_ENV: "LOUD"}, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=root)
    assert_refused(proc, f"{LEVEL_ENV}='LOUD' is not a log level")
    assert not (tmp_path / "ws").exists()  # refused before the app built anything


def test_the_level_resolves_flag_then_variable_then_info() -> None:
    assert level_from_env({}) is None and level_from_env({LEVEL_ENV: " "}) is None
    assert level_from_env({LEVEL_ENV: "warning"}) == logging.WARNING
    assert resolve_level(environ={}) == logging.INFO
    assert resolve_level(environ={LEVEL_ENV: "ERROR"}) == logging.ERROR
    assert resolve_level(verbose=True, environ={LEVEL_ENV: "ERROR"}) == logging.DEBUG
    assert resolve_level(quiet=True, environ={LEVEL_ENV: "DEBUG"}) == logging.WARNING
    with pytest.raises(WorkbenchError, match=f"{LEVEL_ENV}='verbose' is not a log level"):
        resolve_level(verbose=True, environ={LEVEL_ENV: "verbose"})  # a typo is reported even under a flag


@pytest.fixture
def restored() -> Iterator[None]:
    """The logging state and the variable as they were (setup_logging changes process-wide state)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {n: logging.getLogger(n).level for n in PROJECT_LOGGERS}
    env = os.environ.get(LEVEL_ENV)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for n, lv in levels.items():
        logging.getLogger(n).setLevel(lv)
    if env is None:
        os.environ.pop(LEVEL_ENV, None)
    else:
        os.environ[LEVEL_ENV] = env


def test_plain_lines_read_as_the_project_s_messages(restored: None, capsys: pytest.CaptureFixture[str]) -> None:
    mod, other = logging.getLogger("workbench.backends.vllm"), logging.getLogger("httpx")
    setup_logging(logging.INFO)
    setup_logging(logging.INFO)  # again: still one handler of ours
    assert sum(getattr(h, "_workbench_handler", False) for h in logging.getLogger().handlers) == 1
    mod.info("vllm: engine for m started in 3 s")
    mod.warning("the method trains on 1 of 47 targets")
    mod.debug("hidden at INFO")
    other.info("HTTP Request: POST http://x")  # a third-party INFO line stays hidden
    other.warning("a third-party warning")  # its warnings show
    err = capsys.readouterr().err
    assert err.splitlines() == ["vllm: engine for m started in 3 s", "warning: the method trains on 1 of 47 targets",
                                "warning: a third-party warning"]
    setup_logging(logging.DEBUG, export=True)
    mod.debug("shown now")
    other.debug("not theirs")
    assert capsys.readouterr().err == "debug: workbench.backends.vllm: shown now\n"
    assert os.environ[LEVEL_ENV] == "DEBUG"  # what a job process started now inherits
    setup_logging(logging.WARNING)
    mod.info("progress detail")
    assert capsys.readouterr().err == ""


def test_a_terminal_gets_rich_lines(restored: None, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.logging import RichHandler

    from workbench import logconfig

    monkeypatch.setattr(logconfig, "_is_terminal", lambda stream: True)
    setup_logging(logging.INFO)
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_workbench_handler", False)]
    assert len(ours) == 1 and isinstance(ours[0], RichHandler)
    logging.getLogger("workbench.runner").warning("a warning for a person")
    err = capsys.readouterr().err
    assert "WARNING" in err and "a warning for a person" in err

"""bench/guard_flow.py without the real model: its argument contract as a user runs it (a subprocess with a hard time
limit): the levers' flags in `--help`, and `--baseline` refused for more than one set before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from clirun import ENV

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "guard_flow.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, env=ENV, timeout=60,
                          stdin=subprocess.DEVNULL, cwd=ROOT)


def test_help_names_the_levers() -> None:
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    for option in ("--fix-arg", "--baseline", "--baseline-only", "--label", "--strategy", "--guard-pool", "--rescale",
                   "--rescale-only"):
        assert option in proc.stdout


def test_one_baseline_run_serves_one_set(tmp_path: Path) -> None:
    proc = _run("--workspace", str(tmp_path / "ws"), "--sets", "nq,tqa", "--baseline", "run-x")
    assert proc.returncode == 2
    assert "--baseline names the run of one set" in proc.stderr
    assert not (tmp_path / "ws").exists()  # refused before any workspace or model


def test_bad_scales_are_refused_before_anything_runs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for scales, needle in (("0.5,1.5", "--rescale: every scale must be in (0, 1], got `0.5,1.5`"),
                           ("0,1", "--rescale: every scale must be in (0, 1]"),
                           ("half", "--rescale: scales are numbers in (0, 1] separated by commas, got `half`")):
        proc = _run("--workspace", str(ws), "--rescale", scales)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    proc = _run("--workspace", str(ws), "--rescale-only", str(tmp_path / "results.json"))
    assert proc.returncode == 2 and "--rescale-only needs --rescale S,..." in proc.stderr, proc.stderr
    assert not ws.exists()


def test_a_results_file_that_is_not_this_benchs_is_a_clear_error(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (tmp_path / "other.json").write_text('{"rows": []}')
    (tmp_path / "broken.json").write_text("{not json")
    for name in ("missing.json", "other.json", "broken.json"):
        proc = _run("--workspace", str(ws), "--rescale", "0.5", "--rescale-only", str(tmp_path / name))
        assert proc.returncode == 2 and "is not a results file of this bench" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    (tmp_path / "one.json").write_text('{"results": [{"run": "run-x", "method": "sft", "strategy": "auto", '
                                       '"seed": 0, "label": "defaults"}]}')
    proc = _run("--workspace", str(ws), "--rescale", "0.5", "--rescale-only", str(tmp_path / "one.json"))
    assert proc.returncode == 1 and "--rescale-only: cannot read the run's fix set or job in" in proc.stderr
    assert "Traceback" not in proc.stderr

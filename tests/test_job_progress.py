"""Training jobs print progress (step of the total, loss, elapsed, ETA) by the clock while they train, as a user runs
them (`workbench train`, `workbench fix --train`: subprocesses with a time limit, the interval shortened through
$WORKBENCH_PROGRESS_EVERY); `--json` prints the JSON object only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clirun import ENV, assert_refused, workbench
from ftworld import FtWorld

from finetune.job.progress import TrainingProgress
from workbench.cli._cadence import PROGRESS_ENV, duration, progress_every
from workbench.errors import WorkbenchError

LINE = re.compile(r"^(sft|dpo|grpo): step (\d+)/(\d+), loss (\d[\d.e+-]*), (\d+ s|\d+ min \d\d s) elapsed, ETA (.+)$")
EVERY_STEP = {**ENV, PROGRESS_ENV: "0"}


def _progress(stdout: str) -> list[re.Match[str]]:
    return [m for line in stdout.splitlines() if (m := LINE.match(line))]


def test_the_line_and_its_durations() -> None:
    lines: list[str] = []
    p = TrainingProgress(lines.append, label="sft", every=0)
    p.first_step, p.loss = 100, 0.4312
    assert p.line(120, 800, 65.0) == "sft: step 120/800, loss 0.4312, 1 min 05 s elapsed, ETA 36 min 50 s"
    assert p.line(100, 800, 3.0).endswith("ETA unknown")  # no step ran yet in this process (a resumed job)
    assert [duration(s) for s in (0.4, 59.6, 3599, 3720)] == ["0 s", "1 min 00 s", "59 min 59 s", "1 h 02 min"]


def test_an_evaluation_or_guard_build_off_a_terminal_prints_lines_by_the_clock() -> None:
    """`progress_bar` off a terminal (a log file): a line at most every `every` seconds, the first only after
    `every` (a short step prints nothing), one when a pass ends, and a new pass when the count starts again."""
    from workbench.cli._cadence import ProgressLines

    now, lines = [0.0], []
    p = ProgressLines("guard", lines.append, every=30, clock=lambda: now[0])
    for done in range(1, 5):
        now[0] += 10
        p(done * 25, 100)
    assert lines == ["guard: 75 of 100 (75%), 30 s elapsed, ETA 10 s", "guard: 100 of 100 (100%), 40 s elapsed"]
    p(100, 100)  # the end again: said once
    now[0] += 100
    p(10, 40)  # the next question, on the facts that passed the first: no pace yet
    now[0] += 30
    p(20, 40)
    assert lines[2:] == ["guard: pass 2, 10 of 40 (25%), 2 min 20 s elapsed",
                         "guard: pass 2, 20 of 40 (50%), 2 min 50 s elapsed, ETA 1 min 00 s"]
    quick: list[str] = []
    q = ProgressLines("generating", quick.append, every=30, clock=lambda: now[0])
    q(5, 5)
    assert quick == []
    cached: list[str] = []  # 900 of 1,000 answers found in the cache: the pace is what comes after them
    c = ProgressLines("generating", cached.append, every=0, clock=lambda: now[0])
    c(-1, 1000)
    c(900, 1000)
    now[0] += 10
    c(910, 1000)
    assert cached == ["generating: 900 of 1000 (90%), 0 s elapsed",
                      "generating: 910 of 1000 (91%), 10 s elapsed, ETA 1 min 30 s"]
    unknown: list[str] = []
    ProgressLines("screen", unknown.append, every=0, clock=lambda: now[0])(7, 0)
    assert unknown == ["screen: 7 done, 0 s elapsed"]


@pytest.mark.slow  # over 20 s on 2 cores
def test_workbench_train_prints_progress_and_json_stays_json(w: FtWorld, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: {w.fixset}\noutput_dir: {tmp_path / 'job'}\nworkspace: {w.store.workspace}\n"
                   "trainer: {max_steps: 4}\n")
    proc = workbench("train", str(job), "--force", env=EVERY_STEP, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = _progress(proc.stdout)
    assert [(m[1], int(m[2]), int(m[3])) for m in lines] == [("sft", s, 4) for s in range(1, 5)], proc.stdout
    assert all(float(m[4]) > 0 for m in lines) and lines[-1][6] == "0 s"
    assert proc.stdout.index(lines[-1][0]) < proc.stdout.index("adapter"), proc.stdout  # then the summary

    job.write_text(job.read_text().replace(str(tmp_path / "job"), str(tmp_path / "job2")))
    quiet = workbench("train", str(job), "--force", "--json", env=EVERY_STEP, timeout=300)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert json.loads(quiet.stdout)["steps"] == 4  # one JSON object, no progress line around it
    assert not _progress(quiet.stderr)


@pytest.mark.slow  # over 5 s on 2 cores
def test_workbench_fix_train_prints_progress(w: FtWorld, tmp_path: Path) -> None:
    proc = workbench("fix", w.run_id, "--out", str(tmp_path / "fix"), "--workspace", str(w.store.workspace),
                     "--train", "--method", "sft", "--steps", "2", env=EVERY_STEP, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [(int(m[2]), int(m[3])) for m in _progress(proc.stdout)] == [(1, 2), (2, 2)], proc.stdout


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_bad_interval_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(PROGRESS_ENV, value)
    with pytest.raises(WorkbenchError, match=f"must be a number of seconds >= 0, got `{value}`"):
        progress_every()


def test_a_bad_interval_is_refused_before_the_job_starts(w: FtWorld, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: {w.fixset}\noutput_dir: {tmp_path / 'job'}\ntrainer: {{max_steps: 2}}\n")
    proc = workbench("train", str(job), "--force", "--workspace", str(tmp_path / "ws"),
                     env={**ENV, PROGRESS_ENV: "soon"}, timeout=120)
    assert_refused(proc, f"${PROGRESS_ENV} must be a number of seconds >= 0, got `soon`")
    assert not (tmp_path / "job" / "job_id").exists()  # no job recorded
    proc = workbench("fix", w.run_id, "--out", str(tmp_path / "fix"), "--train", "--workspace", str(w.store.workspace),
                     env={**ENV, PROGRESS_ENV: "-1"}, timeout=120)
    assert_refused(proc, f"${PROGRESS_ENV} must be a number of seconds >= 0, got `-1`")
    assert not (tmp_path / "fix").exists()  # refused before the fix set is built

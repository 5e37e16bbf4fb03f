"""Outputs that cannot hurt the user: a closed pipe ends a command quietly (exit 141, as Unix tools on SIGPIPE), a full
stdout is a clean error, output files are checked before any work (directories, FIFOs, a chain of missing folders,
read-only places refused) and written atomically, and CSV cells a spreadsheet would run as formulas are quoted."""

from __future__ import annotations

import csv
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from clirun import ENV, assert_refused, without_write_access, workbench
from diskfull import fill, tmpfs

from workbench.cli import atomic_output, check_output_dir, check_output_file
from workbench.cli.export import spreadsheet_safe
from workbench.errors import WorkbenchError

LIMIT_S = 60


def _into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write: every write fails with EPIPE
    try:
        return subprocess.run([sys.executable, "-m", "hallucination_workbench", *args], stdout=w,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=ENV, timeout=LIMIT_S)
    finally:
        os.close(w)


@pytest.mark.parametrize("args", [["runs", "--json"], ["--help"], ["history", "--help"]])
def test_a_closed_pipe_ends_the_command_quietly(args: list[str], tmp_path: Path) -> None:
    proc = _into_closed_pipe(*args, *(["--workspace", str(tmp_path)] if args[0] == "runs" else []))
    assert (proc.returncode, proc.stderr) == (141, "")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["runs", "--json"], ["--help"]])
def test_a_full_stdout_is_a_clean_error(args: list[str], tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "hallucination_workbench", *args,
                               *(["--workspace", str(tmp_path)] if args[0] == "runs" else [])],
                              stdout=full, stderr=subprocess.PIPE, text=True, env=ENV, timeout=LIMIT_S)
    assert_refused(proc, "cannot write to standard output: No space left on device")
    assert "Exception ignored" not in proc.stderr


def test_output_files_are_checked_before_any_work(tmp_path: Path) -> None:
    assert check_output_file(str(tmp_path / "new" / "r.html"), "--report") == tmp_path / "new" / "r.html"
    assert not (tmp_path / "new").exists()  # checked, not created: it is made when the file is written
    with pytest.raises(WorkbenchError, match=r"--report .*: folder .*a.* does not exist \(only the last folder"):
        check_output_file(str(tmp_path / "a" / "b" / "r.html"), "--report")
    assert not (tmp_path / "a").exists()
    with pytest.raises(WorkbenchError, match="is a directory; give a file name"):
        check_output_file(str(tmp_path), "--out")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(WorkbenchError, match="is not a regular file"):
        check_output_file(str(tmp_path / "fifo"), "--out")
    (tmp_path / "file").write_text("x")
    with pytest.raises(WorkbenchError, match="exists and is not a folder"):
        check_output_dir(str(tmp_path / "file"), "--out")
    with pytest.raises(WorkbenchError, match="is not a folder"):
        check_output_file(str(tmp_path / "file" / "r.html"), "--report")
    assert check_output_dir(str(tmp_path / "fixnew"), "--out") == tmp_path / "fixnew"


def test_atomic_output_keeps_the_old_file_when_the_write_fails(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "new" / "r.jsonl"
    with atomic_output(out, "--out") as tmp:
        tmp.write_text("one\n")
    assert out.read_text() == "one\n"  # the one missing folder was made at write time

    def full(*_: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with (pytest.raises(WorkbenchError, match=r"--out .*: cannot write \(No space left on device\)"),
          atomic_output(out, "--out") as tmp):
        tmp.write_text("two\n")
    assert out.read_text() == "one\n"
    assert [p.name for p in out.parent.iterdir()] == ["r.jsonl"]  # no temporary left behind


@pytest.mark.slow  # over 5 s on 2 cores
def test_read_only_places_are_refused_before_any_work(tmp_path: Path) -> None:
    prefix = without_write_access()
    if prefix is None:
        pytest.skip("permission bits cannot be enforced here")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        proc = workbench("runs", "--workspace", str(tmp_path / "ws"), timeout=LIMIT_S)  # makes the store
        assert proc.returncode == 0, proc.stderr
        proc = workbench("export", "latest", "--out", str(ro / "x.csv"), "--workspace", str(tmp_path / "ws"),
                         prefix=prefix, timeout=LIMIT_S)
        assert_refused(proc, "--out", "cannot write there (Permission denied)")
        proc = workbench("fix", "latest", "--out", str(ro / "fix"), "--workspace", str(tmp_path / "ws"),
                         prefix=prefix, timeout=LIMIT_S)
        assert_refused(proc, "--out", "cannot write there (Permission denied)")
    finally:
        ro.chmod(0o755)


def test_csv_cells_that_would_run_as_formulas_are_quoted() -> None:
    df = pd.DataFrame({"answer": ["=cmd|' /C calc'!A0", "+1", "-2", "@SUM(A1)", "\tx", "\rx", "Paris", "a=b"],
                       "mean_logprob": [-0.5] * 8})
    got = spreadsheet_safe(df)
    assert list(got["answer"]) == ["'=cmd|' /C calc'!A0", "'+1", "'-2", "'@SUM(A1)", "'\tx", "'\rx", "Paris", "a=b"]
    assert list(got["mean_logprob"]) == [-0.5] * 8  # numbers are numbers, not text


@pytest.fixture(scope="module")
def hostile_run(world: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run of the world model over a probe whose id carries an ESC sequence and whose question is a formula."""
    d = tmp_path_factory.mktemp("hostile-run")
    probes = d / "p.jsonl"
    probes.write_text(json.dumps({"id": "evil\x1b[2J", "question": "=HYPERLINK(\"http://x\")",
                                  "answers": ["a"]}) + "\n")
    ws = d / "ws"
    proc = workbench("eval", "--model", str(world.model), "--probes", str(probes), "--workspace", str(ws), "--json",
                     timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return ws, json.loads(proc.stdout)["run_id"]


@pytest.mark.slow  # an eval on the world model: about 20 s on 2 busy cores
def test_export_csv_quotes_a_hostile_question(hostile_run: tuple[Path, str], tmp_path: Path) -> None:
    ws, run = hostile_run
    out = tmp_path / "exports" / "run.csv"  # one missing folder: created
    proc = workbench("export", run, "--format", "csv", "--out", str(out), "--workspace", str(ws), timeout=LIMIT_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    assert rows and all(r["question"] == "'=HYPERLINK(\"http://x\")" for r in rows)
    proc = workbench("export", run, "--out", str(tmp_path / "x" / "y" / "run.csv"), "--workspace", str(ws),
                     timeout=LIMIT_S)
    assert_refused(proc, "does not exist (only the last folder of the path is created)")
    assert not (tmp_path / "x").exists()


@pytest.mark.slow  # shares the eval above
def test_stored_text_reaches_the_terminal_escaped(hostile_run: tuple[Path, str], tmp_path: Path) -> None:
    """A review reason typed with an ESC sequence and a newline (as the app stores it) and a probe id with an ESC
    sequence: `review`, `show` and `history` print them as escapes, never as bytes a terminal acts on. A reviewer
    name with one is refused (a name is an identity, compared by its text)."""
    ws, run = hostile_run
    reason = "looks fine\x1b[31m\nFORGED LINE\u202e"
    review = ["review", run, "--target", "verdict", "--probe", "evil\x1b[2J", "--value", "correct", "--reason", reason,
              "--workspace", str(ws)]
    assert_refused(workbench(*review, "--reviewer", "eve\x1b]0;pwned\x07", timeout=LIMIT_S),
                   "`reviewer` `eve\\x1b]0;pwned\\x07` holds a control or formatting character")
    proc = workbench(*review, "--reviewer", "eve", timeout=LIMIT_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for args in (["review", run], ["show", run], ["history"], ["runs"]):
        proc = workbench(*args, "--workspace", str(ws), timeout=LIMIT_S)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout and "\x07" not in proc.stdout, proc.stdout
    listed = workbench("review", run, "--workspace", str(ws), timeout=LIMIT_S).stdout
    assert "looks fine\\x1b[31m\\nFORGED LINE\\u202e" in listed and "eve" in listed
    assert len(listed.strip().splitlines()) == 1  # the newline did not forge a second line
    assert json.loads(workbench("review", run, "--json", "--workspace", str(ws), timeout=LIMIT_S).stdout)[0][
        "reason"] == reason  # stored as typed; only the terminal view escapes


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    from workbench.printable import printable

    assert printable("Paris, 東京 café") == "Paris, 東京 café"
    assert printable("a\x1b[2Jb\nc\td\x7f\x9b\u202e\u2028") == "a\\x1b[2Jb\\nc\\td\\x7f\\x9b\\u202e\\u2028"
    assert printable(None) == "" and printable(3) == "3"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: a real ENOSPC (tests/diskfull.py)."""
    with tmpfs(tmp_path / "small", "1m") as mnt:
        yield mnt


def test_a_full_disk_is_a_clean_error_for_index_and_reports(full_disk: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"Entity {i} is the capital of Land {i}, founded by Person {i}.\n"
                              for i in range(40_000)))  # 2.6 MB: the index cannot fit in 1 MiB
    proc = workbench("index", str(corpus), "--workspace", str(full_disk / "ws"), "--batch-size", "2000",
                     timeout=LIMIT_S)
    assert_refused(proc, "database or disk is full", "run the same command again to resume")
    fill(full_disk)  # what the index left
    report = full_disk / "ws" / "r.html"
    with pytest.raises(WorkbenchError, match="No space left on device"), atomic_output(report, "--report") as tmp:
        tmp.write_bytes(b"x" * 100_000)
    assert not report.exists()


@pytest.mark.slow  # the fine-tuning world's fix set, so the job resolves as far as its output_dir
def test_train_refuses_an_unwritable_output_dir_before_the_job_starts(w: Any, tmp_path: Path) -> None:
    prefix = without_write_access()
    if prefix is None:
        pytest.skip("permission bits cannot be enforced here")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: {w.fixset}\noutput_dir: {ro / 'job'}\ntrainer: {{max_steps: 1}}\n")
    try:
        proc = workbench("train", str(job), "--workspace", str(tmp_path / "ws"), prefix=prefix, timeout=300)
        assert_refused(proc, f"output_dir `{ro / 'job'}`: cannot write there (Permission denied)")
    finally:
        ro.chmod(0o755)

"""One output rule for every sink, and the last hostile inputs, through the real CLI.

A workspace is seeded with hostile text where users, models and files put it (a probe file's ids, questions, answers
and tags; a reviewer's reasons; imported user reports and a reviewer's note on one): terminal escapes (colour, window
title, clear screen), NUL, backspaces, a right-to-left override, bare CR and LF, CSV formulas and HTML. Every
command that lists, shows or exports stored text is then run on it as a user runs it, and each sink is checked: a
terminal only gets text through the printable filter (no byte a terminal acts on, no forged line), a spreadsheet only
quoted cells, HTML and Markdown only escaped text, XML only text a parser reads.

The hostile inputs below it are refused with exit 2 and one line naming the problem, and leave nothing behind outside
what the user named.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import diskfull
import pytest
from clirun import assert_refused, workbench

pytestmark = pytest.mark.slow  # every test reads the seeded workspace: two evaluations and a dozen commands, ~15 s

#: Each class of text a terminal acts on, and what a spreadsheet or a browser would run.
HOSTILE = ("ok\x1b[31m red\x1b]0;pwned\x07\x1b[2J\x00nul\x08\x08bs \u202eevil\u202c\rCR\nFORGED LINE "
           "<script>alert(1)</script>")
FORMULA = "=HYPERLINK(\"http://x\")"
#: What must never reach a terminal raw.
ACTIVE = ("\x1b", "\x00", "\x08", "\x07", "\u202e", "\r")
LIMIT_S = 120


def _ws_args(ws: Path) -> list[str]:
    return ["--workspace", str(ws)]


def _ok(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = workbench(*args, cwd=cwd, timeout=LIMIT_S)
    assert proc.returncode in (0, 1, 3), (args, proc.returncode, proc.stderr[-2000:])  # a gate may fail
    return proc


@pytest.fixture(scope="module")
def seeded(world: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs of the world model over probes carrying hostile ids, questions, answers and tags; the hostile probe's
    verdicts overridden with hostile reasons (right in the baseline, wrong in the candidate: the gate lists it
    broken); a recorded gate, a release block, imported user reports with hostile turns and a decision with a
    hostile note."""
    d = tmp_path_factory.mktemp("sinks")
    ws = d / "ws"
    rows = [json.loads(x) for x in Path(world.probes).read_text().splitlines()[:4]]
    rows[1]["id"] = "evil\x1b[2J"
    rows[1]["tags"] = ["tag\x1b[31m<b>"]
    rows[1]["question"] = FORMULA + " " + HOSTILE
    rows[1]["answers"] = [*rows[1]["answers"], "@SUM(A1) <img src=x onerror=alert(1)>"]
    (d / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = [json.loads(_ok("eval", "--model", str(world.model), "--probes", str(d / "p.jsonl"), "--json",
                           *_ws_args(ws)).stdout)["run_id"] for _ in range(2)]
    for run, verdict in zip(runs, ("correct", "incorrect"), strict=True):  # the hostile probe breaks
        _ok("review", run, "--target", "verdict", "--probe", rows[1]["id"], "--value", verdict, "--reason", HOSTILE,
            "--reviewer", "ann", *_ws_args(ws))
    gate = json.loads(_ok("regress", "--baseline", runs[0], "--candidate", runs[1], "--no-guard", "--no-field",
                          "--json", *_ws_args(ws)).stdout)
    _ok("review", runs[1], "--target", "release", "--value", "block", "--reason", HOSTILE, "--reviewer", "ann",
        *_ws_args(ws))
    reports = d / "reports.jsonl"
    reports.write_text("".join(json.dumps({
        "conversation_id": f"c{i}", "messages": [{"role": "user", "content": f"{q} {HOSTILE}"},
                                                 {"role": "assistant", "content": f"{FORMULA} {HOSTILE}"}],
        "comment": HOSTILE, "rating": -1}) + "\n" for i, q in enumerate(("Who?", "=1+1 where?"))))
    _ok("reports", "import", str(reports), *_ws_args(ws))
    report_ids = [r["id"] for r in json.loads(_ok("reports", "list", "--json", *_ws_args(ws)).stdout)["reports"]]
    _ok("reports", "decide", report_ids[0], "--decision", "hallucinated", "--answer", "=2+2 " + HOSTILE, "--note",
        HOSTILE, "--reviewer", "ann", "--only", *_ws_args(ws))
    return {"dir": d, "ws": ws, "runs": runs, "gate": gate, "reports": report_ids, "probes": rows}


def _terminal_problems(proc: subprocess.CompletedProcess[str], what: list[str]) -> list[str]:
    """What in a command's stdout and stderr a terminal would act on: raw active characters, a forged line."""
    found = []
    for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        raw = [c for c in ACTIVE if c in stream]
        forged = [line for line in stream.splitlines() if line.lstrip().startswith("FORGED LINE")]
        if raw or forged:
            line = next((x for x in stream.splitlines() if any(c in x for c in ACTIVE) or x in forged), "")
            found.append(f"{what[:2]} {name}: raw {raw}, forged {len(forged)}: {line!r}")
    return found


def test_every_sink_encodes_hostile_text(seeded: dict[str, Any], tmp_path: Path) -> None:
    ws, (a, b), gate = seeded["ws"], seeded["runs"], seeded["gate"]
    out = tmp_path / "out"
    out.mkdir()
    listings = [
        ["runs"], ["show", a], ["show", b], ["history"], ["review", b], ["reports", "list"],
        *[["reports", "show", r] for r in seeded["reports"]],
        ["regress", "--baseline", a, "--candidate", b, "--no-guard", "--no-field", "--report", str(out / "r.html")],
        ["regress", "--baseline", a, "--candidate", b, "--no-guard", "--no-field", "--report", str(out / "r.md"),
         "--junit", str(out / "j.xml")],
        ["export", b, "--format", "csv", "--out", str(out / "a.csv")],
        ["export", b, "--format", "lm-eval", "--out", str(out / "lm")],
        ["reports", "export", "--suite", str(out / "field")],
        ["attribute", b], ["fix", b, "--out", str(out / "fx"), "--guard-pool", "none", "--allow-unguarded"],
        ["validate", str(seeded["dir"] / "p.jsonl")], ["validate", str(seeded["dir"] / "p.jsonl"), "--json"],
    ]
    seen, problems = "", []
    for args in listings:
        proc = _ok(*args, *_ws_args(ws))
        problems += _terminal_problems(proc, args)
        seen += proc.stdout
    assert not problems, "\n".join(problems)
    # what was escaped is still shown, as escapes: the reader sees exactly what is stored
    assert "\\x1b[31m" in seen and "\\u202e" in seen and "\\x00" in seen and "\\n" in seen
    # a spreadsheet: a cell that would run as a formula is quoted
    with (out / "a.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    texts = [v for r in rows for k, v in r.items() if k not in ("mean_logprob", "sample_index", "variant")]
    assert not [v for v in texts if v[:1] in ("=", "+", "@")], texts
    assert any(v.startswith("'=HYPERLINK") for v in texts)
    # HTML: every user text autoescaped (the gate's report as written, and the one recorded in the workspace)
    for page in (out / "r.html", Path(gate["reports"]["html"])):
        text = page.read_text()
        assert "<script>alert" not in text and "<img src=x" not in text and "[31m<b>" not in text
        assert "&lt;script&gt;" in text
    md = (out / "r.md").read_text()
    assert "<script>" not in md and "<img" not in md and not [c for c in ACTIVE if c in md]
    # XML (JUnit for CI): well-formed, so no raw control character, the text kept as escapes
    tree = ElementTree.parse(out / "j.xml")
    assert "evil\\x1b[2J" in ElementTree.tostring(tree.getroot(), encoding="unicode")
    # the app's HTML: the gate's evidence and the probe detail (plain functions, as the tabs call them)
    from workbench import decisions, views
    from workbench.store import Store

    store = Store.open(ws)
    for html in (decisions.evidence_html(store, gate["gate_id"]),
                 views.probe_detail(store, seeded["probes"][1]["id"], [a, b])):
        assert "<script>alert" not in html and "<img src=x" not in html and "&lt;script&gt;" in html


# -- the hostile inputs --------------------------------------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Any]:
    """`mount(size, ro)`: a small tmpfs (a real ENOSPC, or a real read-only file system: tests/diskfull.py)."""
    numbers = itertools.count()
    with contextlib.ExitStack() as stack:

        def mount(size: str = "64k", ro: bool = False) -> Path:
            return stack.enter_context(diskfull.tmpfs(tmp_path / f"mnt{next(numbers)}", size, ro=ro))

        yield mount


def test_lm_eval_export_refuses_places_it_cannot_write(seeded: dict[str, Any], tmpfs: Any, tmp_path: Path) -> None:
    ws, run = seeded["ws"], seeded["runs"][0]
    ro, full = tmpfs(ro=True), tmpfs("32k")
    diskfull.fill(full)
    for dest, needle in ((ro / "lm", "Read-only file system"), (tmp_path / "no" / "such" / "lm", "does not exist"),
                         (full / "lm", "No space left on device"), (Path("/dev/null"), "is not a folder")):
        assert_refused(workbench("export", run, "--format", "lm-eval", "--out", str(dest), *_ws_args(ws)),
                       f"--out `{dest}`", needle)
    assert sorted(p.name for p in full.iterdir()) == ["filler"] and not (tmp_path / "no").exists()


def test_regress_refuses_a_missing_folder_and_an_unknown_report_format(seeded: dict[str, Any],
                                                                       tmp_path: Path) -> None:
    ws, (a, b) = seeded["ws"], seeded["runs"]
    before = workbench("history", "--json", *_ws_args(ws)).stdout
    for dest, needle in ((tmp_path / "missing" / "dir" / "x.html", "folder `" + str(tmp_path / "missing")),
                         (tmp_path / "x.exe", "`.exe` is no report format")):
        assert_refused(workbench("regress", "--baseline", a, "--candidate", b, "--no-guard", "--no-field", "--report",
                                 str(dest), *_ws_args(ws)), f"--report `{dest}`", needle)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "x.exe").exists()
    assert workbench("history", "--json", *_ws_args(ws)).stdout == before  # no gate recorded


def test_a_reviewer_name_with_control_characters_is_refused(seeded: dict[str, Any]) -> None:
    ws, b = seeded["ws"], seeded["runs"][1]
    before = [workbench(*c, "--json", *_ws_args(ws)).stdout for c in (["review", b], ["reports", "list"])]
    assert_refused(workbench("review", b, "--target", "release", "--value", "block", "--reason", "x", "--reviewer",
                             "eve\x1b]0;pwned\x07", *_ws_args(ws)), "`reviewer` `eve\\x1b]0;pwned\\x07`",
                   "control or formatting character")
    assert_refused(workbench("reports", "decide", seeded["reports"][1], "--decision", "not-factual", "--reviewer",
                             "eve\u202e", *_ws_args(ws)), "reviewer (--reviewer)", "\\u202e")
    assert [workbench(*c, "--json", *_ws_args(ws)).stdout for c in (["review", b], ["reports", "list"])] == before


@pytest.fixture(scope="module")
def fixset(seeded: dict[str, Any]) -> Path:
    """A fix set of the seeded baseline run (attributed first), built without a guard set."""
    ws, run = seeded["ws"], seeded["runs"][0]
    _ok("attribute", run, *_ws_args(ws))
    out = seeded["dir"] / "fix"
    _ok("fix", run, "--out", str(out), "--guard-pool", "none", "--allow-unguarded", *_ws_args(ws))
    return out


def test_fix_on_a_full_disk_leaves_nothing_behind(seeded: dict[str, Any], fixset: Path, tmpfs: Any) -> None:
    full = tmpfs("16k")
    assert_refused(workbench("fix", seeded["runs"][0], "--out", str(full / "fx"), "--guard-pool", "none",
                             "--allow-unguarded", *_ws_args(seeded["ws"])),
                   f"--out `{full / 'fx'}`", "No space left on device", "nothing was left there")
    assert list(full.iterdir()) == []


def test_train_refuses_unknown_target_modules_and_a_truncated_fix_set(seeded: dict[str, Any], fixset: Path,
                                                                      tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(fixset, damaged)
    arrow = damaged / "sft" / "data-00000-of-00001.arrow"
    os.truncate(arrow, arrow.stat().st_size // 2)
    for name, fix, lora, needles in (
            ("typo", fixset, "lora: {target_modules: [q_proj, q_prj]}\n",
             ["`lora.target_modules` names `q_prj`, which is no module of", "Did you mean `q_proj`?"]),
            ("truncated", damaged, "", [f"fix set `{damaged}`: split `sft` cannot be read ({arrow}",
                                        "damaged or truncated"])):
        job = tmp_path / f"{name}.yaml"
        job.write_text(f"fixset: {fix}\noutput_dir: {tmp_path / name}\nmethod: sft\n{lora}trainer: {{max_steps: 1}}\n")
        assert_refused(workbench("train", str(job), *_ws_args(seeded["ws"])), *needles)
        assert not (tmp_path / name).exists()  # refused before the job was recorded or its folder made


def test_guard_pool_names_a_fifo_and_a_device(seeded: dict[str, Any], world: Any, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pool.jsonl")
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    for pool, needle in (("pool.jsonl", "is a FIFO (named pipe), not a regular file"),
                         ("zero.jsonl", "is a character device, not a regular file")):
        assert_refused(workbench("guard", "build", "--model", str(world.model), "--guard-pool", str(tmp_path / pool),
                                 *_ws_args(seeded["ws"]), timeout=60), f"--guard-pool {tmp_path / pool}", needle)

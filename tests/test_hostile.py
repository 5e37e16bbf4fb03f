"""Every hostile input of the hardening review, through the real CLI: exit 2 with a message naming the file, line and
field (or the option), never a traceback, and nothing recorded or half-written on the way."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from clirun import ENV, assert_refused, without_write_access, workbench
from wscopy import copy_workspace

BOMB = "\n".join(f"  {k}: &{k} [{', '.join(['*' + p] * 9 if p else ['x'] * 9)}]"
                 for k, p in zip("abcdef", ["", *"abcde"], strict=True))


@pytest.fixture(scope="module")
def files(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Hostile probe, suite and corpus files beside three good probes of the world."""
    d = tmp_path_factory.mktemp("hostile")
    probes = Path(world.probes).read_text().splitlines()[:3]
    (d / "p.jsonl").write_text("\n".join(probes) + "\n")
    rows = {
        "deep.jsonl": '{"question": "q", "answers": ["a"], "x": ' + "[" * 5000 + "]" * 5000 + "}\n",
        "bigint.jsonl": '{"question": "q", "answers": ["a"], "x": ' + "9" * 5000 + "}\n",
        "surrogate.jsonl": '{"question": "q\\ud800", "answers": ["a"]}\n',
        "dupkey.jsonl": probes[0] + "\n" + '{"question": "q", "question": "r", "answers": ["a"]}\n',
        "dupkey.yaml": "name: w\ndata: p.jsonl\ngrader: match\ngrader: judge\n",
        "bomb.yaml": f"name: w\ndata: p.jsonl\ngrader_options:\n{BOMB}\n",
        "tpl_spec.yaml": 'name: w\ndata: p.jsonl\ntemplate: "{question:>100000000}"\n',
        "tpl_attr.yaml": 'name: w\ndata: p.jsonl\ntemplate: "{question.__class__.__mro__}"\n',
        "tpl_index.yaml": 'name: w\ndata: p.jsonl\ntemplate: "{0}"\n',
        "tpl_other.yaml": 'name: w\ndata: p.jsonl\ntemplate: "Q: {question} {other}"\n',
        "bigint.yaml": "name: w\ndata: p.jsonl\nmax_tokens: " + "9" * 5000 + "\n",
        "c_deep.jsonl": '{"id": "a", "text": "t"}\n{"id": "b", "text": "t", "x": ' + "[" * 5000 + "]" * 5000 + "}\n",
        "c_surrogate.jsonl": '{"id": "a", "text": "t\\ud800"}\n',
        "c_empty.jsonl": "",
        "c_allbad.jsonl": '{"id": "a"}\n{"id": "b", "text": 3}\n',
        "c_notparquet.parquet": "hello, I am not Parquet",
        "sft_bad.jsonl": '{"question": 5, "answer": "x"}\n{"prompt": "q"}\n',
        "same_question.jsonl": "".join(json.dumps({**json.loads(probes[0]), "id": f"copy{i}"}) + "\n"
                                       for i in range(3)),
        "policy_deep.yaml": "gates: " + "[" * 5000 + "]" * 5000 + "\n",
    }
    for name, text in rows.items():
        (d / name).write_text(text, encoding="utf-8")
    (d / "policy_latin1.yaml").write_bytes("gates: [{type: mcnemar, description: caf\u00e9}]\n".encode("latin-1"))
    return d


@pytest.mark.parametrize(("name", "needles"), [
    ("deep.jsonl", ["deep.jsonl, line 1", "nested deeper than 32 levels"]),
    ("bigint.jsonl", ["bigint.jsonl, line 1", "5000 digits"]),
    ("surrogate.jsonl", ["surrogate.jsonl, line 1", "`question`", "lone surrogate"]),
    ("dupkey.jsonl", ["dupkey.jsonl, line 2", "duplicate key `question`"]),
    ("dupkey.yaml", ["dupkey.yaml, line 4", "duplicate key `grader` (first on line 3)"]),
    ("bomb.yaml", ["bomb.yaml, line 3", "expands to more than 100,000 values", "grader_options"]),
    ("tpl_spec.yaml", ["tpl_spec.yaml, line 3", "`template`", "no format spec"]),
    ("tpl_attr.yaml", ["tpl_attr.yaml, line 3", "`template`", "unknown placeholder"]),
    ("tpl_index.yaml", ["tpl_index.yaml, line 3", "`template`", "unknown placeholder `{0}`"]),
    ("tpl_other.yaml", ["tpl_other.yaml, line 3", "`template`", "unknown placeholder `{other}`"]),
    ("bigint.yaml", ["bigint.yaml, line 3", "5000 digits"]),
])
def test_validate_refuses_hostile_files(files: Path, name: str, needles: list[str]) -> None:
    assert_refused(workbench("validate", name, cwd=files, timeout=60), *needles)


@pytest.mark.parametrize(("args", "needles"), [
    (["--probes", "bomb.yaml"], ["bomb.yaml, line 3", "expands to more than"]),
    (["--probes", "surrogate.jsonl"], ["surrogate.jsonl, line 1", "`question`"]),
    (["--template", "{question:>100000000}"], ["argument --template", "no format spec"]),
    (["--template", "{question.__class__.__mro__}"], ["argument --template", "unknown placeholder"]),
    (["--samples", "100000000"], ["argument --samples", "between 0 and 1000"]),
    (["--samples", "-1"], ["argument --samples"]),
    (["--temperature", "-1"], ["argument --temperature", ">= 0"]),
    (["--temperature", "nan"], ["argument --temperature"]),
    (["--seed", "9" * 40], ["argument --seed"]),
    (["--dtype", "int3"], ["argument --dtype", "invalid choice: 'int3'"]),
    (["--backend-option", "x=" + "[" * 5000 + "]" * 5000], ["--backend-option x", "nested deeper"]),
])
def test_eval_refuses_hostile_input(world: Any, files: Path, tmp_path: Path, args: list[str],
                                    needles: list[str]) -> None:
    base = ["eval", "--model", str(world.model), "--probes", "p.jsonl", "--workspace", str(tmp_path / "ws")]
    assert_refused(workbench(*base, *args, cwd=files, timeout=120), *needles)
    if (tmp_path / "ws" / "store.sqlite").exists():  # nothing left running
        listed = json.loads(workbench("runs", "--json", "--workspace", str(tmp_path / "ws")).stdout)
        assert [r["status"] for r in listed if r["status"] == "running"] == []


@pytest.mark.parametrize(("args", "needles"), [
    (["--model", "/etc"], ["/etc", "config.json"]),
    (["--adapter", "/etc"], ["/etc", "adapter_config.json"]),
])
def test_eval_refuses_a_directory_that_is_no_model(world: Any, files: Path, tmp_path: Path, args: list[str],
                                                   needles: list[str]) -> None:
    base = {"--model": str(world.model), "--probes": "p.jsonl", "--workspace": str(tmp_path / "ws")}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    assert_refused(workbench("eval", *[x for kv in base.items() for x in kv], cwd=files), *needles)


@pytest.mark.parametrize(("corpus", "extra", "needles"), [
    ("c_deep.jsonl", [], ["c_deep.jsonl, line 2", "nested deeper than 32 levels"]),
    ("c_surrogate.jsonl", [], ["c_surrogate.jsonl, line 1", "`text`", "lone surrogate"]),
    ("c_empty.jsonl", [], ["c_empty.jsonl", "no documents to index"]),
    ("c_allbad.jsonl", ["--skip-bad"], ["c_allbad.jsonl", "no documents to index (2 bad rows skipped)"]),
    ("c_notparquet.parquet", [], ["c_notparquet.parquet", "not a readable Parquet file"]),
])
def test_index_refuses_hostile_corpora(files: Path, tmp_path: Path, corpus: str, extra: list[str],
                                       needles: list[str]) -> None:
    ws = str(tmp_path / "ws")
    assert_refused(workbench("index", corpus, "--workspace", ws, *extra, cwd=files, timeout=60), *needles)
    # an empty corpus stays refused on the next call too (no "up to date, 0 rows" success)
    assert_refused(workbench("index", corpus, "--workspace", ws, *extra, cwd=files, timeout=60))


@pytest.mark.parametrize(("command", "args", "needles"), [
    ("screen", ["--model", "/etc"], ["`/etc` is not a model directory (no config.json in it)"]),
    ("screen", ["--model", "MODEL", "--adapter", "/etc"], ["`/etc` is not a peft adapter directory"]),
    ("regress", ["--baseline", "/etc", "--candidate", "/etc", "--probes", "p.jsonl"], ["`/etc`", "config.json"]),
    ("regress", ["--baseline", "MODEL", "--candidate", "MODEL", "--candidate-adapter", "/etc", "--probes",
                 "p.jsonl"], ["`/etc` is not a peft adapter directory"]),
])
@pytest.mark.slow  # over 20 s on 2 cores
def test_a_directory_that_is_no_model_is_refused(world: Any, files: Path, tmp_path: Path, command: str,
                                                 args: list[str], needles: list[str]) -> None:
    argv = [command, *(["p.jsonl"] if command == "screen" else []),
            *[str(world.model) if a == "MODEL" else a for a in args], "--workspace", str(tmp_path / "ws")]
    assert_refused(workbench(*argv, cwd=files), *needles)


@pytest.mark.slow  # over 5 s on 2 cores
def test_screen_refuses_a_file_without_a_usable_row(world: Any, files: Path, tmp_path: Path) -> None:
    args = ["screen", "sft_bad.jsonl", "--model", str(world.model), "--workspace", str(tmp_path / "ws")]
    assert_refused(workbench(*args, cwd=files), "sft_bad.jsonl, line 1", "`question`")
    assert_refused(workbench(*args, "--skip-bad", cwd=files), "no usable row to screen (2 bad rows skipped)")


# -- workspaces and stores ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evaluated(world: Any, files: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A workspace with two finished runs of the world model (the second from the cache)."""
    ws = tmp_path_factory.mktemp("evaluated") / "ws"
    ids = []
    for _ in range(2):
        out = workbench("eval", "--model", str(world.model), "--probes", "p.jsonl", "--workspace", str(ws),
                        "--json", cwd=files)
        assert out.returncode == 0, out.stderr[-2000:]
        ids.append(json.loads(out.stdout)["run_id"])
    return ws, ids


def _copy(src: Path, dest: Path) -> Path:
    return copy_workspace(src, dest, "reports")


def test_a_workspace_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    for ws in (str(tmp_path / "afile"), "/dev/null"):
        assert_refused(workbench("runs", "--workspace", ws), f"workspace `{ws}` is not a directory")
        assert_refused(workbench("index", "x.jsonl", "--workspace", ws), "is not a directory")
    assert_refused(workbench("runs", "--workspace", str(tmp_path / "afile" / "sub")), "cannot create workspace")


def test_an_empty_store_file_is_refused_not_started_over(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "store.sqlite").write_bytes(b"")
    for cmd in (["runs"], ["show", "latest"]):
        assert_refused(workbench(*cmd, "--workspace", str(tmp_path / "ws")), "store.sqlite is empty (0 bytes)")
    assert (tmp_path / "ws" / "store.sqlite").stat().st_size == 0  # left as it was, for the user to inspect


@pytest.mark.slow  # over 20 s on 2 cores
def test_a_damaged_store_is_a_clear_error(evaluated: tuple[Path, list[str]], tmp_path: Path) -> None:
    ws = _copy(evaluated[0], tmp_path / "ws")
    run = evaluated[1][0]
    con = sqlite3.connect(ws / "store.sqlite")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'answers'").fetchone()[0]
    con.close()
    with open(ws / "store.sqlite", "r+b") as f:  # overwrite the answers table's root page
        f.seek((root - 1) * page)
        f.write(b"\xab" * page)
    assert workbench("runs", "--workspace", str(ws)).returncode == 0  # the runs table is intact
    for cmd in (["show", run], ["export", run, "--out", str(tmp_path / "x.jsonl")], ["attribute", run]):
        assert_refused(workbench(*cmd, "--workspace", str(ws)), "store.sqlite", "malformed", ".recover")


@pytest.mark.slow  # over 20 s on 2 cores
def test_eval_of_probes_asking_the_same_question(world: Any, files: Path, tmp_path: Path) -> None:
    """Probes with equal questions share one generation per sample (found by the fuzz test: eval crashed)."""
    out = workbench("eval", "--model", str(world.model), "--probes", "same_question.jsonl", "--samples", "2",
                    "--workspace", str(tmp_path / "ws"), "--json", cwd=files)
    assert out.returncode == 0, out.stderr[-2000:]
    exported = workbench("export", "latest", "--workspace", str(tmp_path / "ws"), "--out", str(tmp_path / "a.jsonl"))
    assert exported.returncode == 0, exported.stderr[-2000:]
    answers = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    by_probe: dict[str, list[str]] = {}
    for a in sorted(answers, key=lambda a: (a["kind"], a["sample_index"])):
        by_probe.setdefault(a["probe_id"], []).append(a["answer"])
    assert len(by_probe) == 3 and len({tuple(v) for v in by_probe.values()}) == 1  # the same three answers


@pytest.mark.slow  # over 5 s on 2 cores
@pytest.mark.parametrize(("policy", "needles"), [
    ("policy_latin1.yaml", ["policy_latin1.yaml", "not valid UTF-8"]),
    ("policy_deep.yaml", ["policy_deep.yaml", "nested deeper than 32 levels"]),
])
def test_regress_refuses_hostile_policies(evaluated: tuple[Path, list[str]], files: Path, policy: str,
                                          needles: list[str]) -> None:
    a, b = evaluated[1]
    assert_refused(workbench("regress", "--baseline", a, "--candidate", b, "--policy", policy, "--workspace",
                             str(evaluated[0]), cwd=files), *needles)


@pytest.mark.slow  # over 5 s on 2 cores
def test_an_ambiguous_run_prefix_lists_the_matches(evaluated: tuple[Path, list[str]]) -> None:
    ws, ids = evaluated
    err = assert_refused(workbench("show", "run-", "--workspace", str(ws)), "run prefix `run-` matches 2 runs")
    assert all(i in err for i in ids) and "Did you mean" not in err
    assert workbench("show", ids[0][:-2], "--workspace", str(ws)).returncode == 0  # a unique prefix works


@pytest.mark.slow  # over 20 s on 2 cores
def test_regress_refuses_unwritable_reports_before_recording_the_gate(evaluated: tuple[Path, list[str]],
                                                                      tmp_path: Path) -> None:
    ws = _copy(evaluated[0], tmp_path / "ws")
    a, b = evaluated[1]
    (tmp_path / "adir").mkdir()
    for flag, dest in (("--report", "/proc/no/such/dir/r.md"), ("--junit", str(tmp_path / "adir"))):
        assert_refused(workbench("regress", "--baseline", a, "--candidate", b, "--workspace", str(ws), flag, dest),
                       f"{flag} `{dest}`")
    assert json.loads(workbench("history", "--json", "--workspace", str(ws)).stdout) == []  # nothing recorded
    ok = workbench("regress", "--baseline", a, "--candidate", b, "--workspace", str(ws),
                   "--report", str(tmp_path / "out" / "r.md"), "--junit", str(tmp_path / "out" / "j.xml"))
    assert ok.returncode in (0, 3), ok.stderr[-2000:]  # pass, or inconclusive: a few probes cannot fail a gate
    assert "Regression check" in (tmp_path / "out" / "r.md").read_text()
    assert (tmp_path / "out" / "j.xml").read_text().startswith("<?xml")
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow  # over 5 s on 2 cores
@pytest.mark.parametrize("dest", ["DIR", "/proc/no/such/dir/x.jsonl"])
def test_export_refuses_an_unwritable_out(evaluated: tuple[Path, list[str]], tmp_path: Path, dest: str) -> None:
    out = str(tmp_path) if dest == "DIR" else dest
    assert_refused(workbench("export", evaluated[1][0], "--out", out, "--workspace", str(evaluated[0])),
                   f"--out `{out}`")


@pytest.mark.slow  # over 5 s on 2 cores
def test_a_read_only_workspace_can_be_read(evaluated: tuple[Path, list[str]], files: Path, tmp_path: Path) -> None:
    prefix = without_write_access()
    if prefix is None:
        pytest.skip("running as root without setpriv: permission bits cannot be enforced")
    ws = _copy(evaluated[0], tmp_path / "ws")
    run = evaluated[1][0]
    for p in [ws, *ws.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        out = tmp_path / "export.jsonl"
        for cmd in (["runs"], ["show", run], ["export", run, "--out", str(out)], ["history"]):
            proc = workbench(*cmd, "--workspace", str(ws), prefix=prefix)
            assert proc.returncode == 0, (cmd, proc.stderr[-2000:])
        assert len(out.read_text().splitlines()) == 3
        # a block (a sign-off would be refused earlier: this workspace has no recorded gate)
        assert_refused(workbench("review", run, "--target", "release", "--value", "block", "--reason", "ok",
                                 "--workspace", str(ws), prefix=prefix), "read-only", "not writable")
        assert_refused(workbench("index", "c_empty.jsonl", "--workspace", str(ws), prefix=prefix, cwd=files),
                       "is not writable, and the corpus index is written into it")
        assert sorted(p.name for p in ws.iterdir()) == ["store.sqlite"]  # nothing created in it
    finally:
        for p in [ws, *ws.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)


# -- the app's users file ----------------------------------------------------------------------------------------


def test_add_user_refusals_and_file_mode(tmp_path: Path) -> None:
    users = tmp_path / "users"
    no_password = {k: v for k, v in ENV.items() if k != "WORKBENCH_PASSWORD"}
    assert_refused(workbench("app", "--add-user", "bob", "--auth-file", str(users), env=no_password),
                   "--add-user needs a password", "WORKBENCH_PASSWORD")
    assert not users.exists()
    users.write_text("")
    os.chmod(users, 0o644)
    with_password = {**ENV, "WORKBENCH_PASSWORD": "pw"}
    assert workbench("app", "--add-user", "bob", "--auth-file", str(users), env=with_password).returncode == 0
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    before = users.read_text()
    for name in ("eve\n", "eve\nmallory", "a:b", ""):
        assert_refused(workbench("app", "--add-user", name, "--auth-file", str(users), env=with_password),
                       "bad username")
    assert users.read_text() == before  # nothing written: the app still starts on this file
    from workbench.auth import load_users

    assert list(load_users(users)) == ["bob"]

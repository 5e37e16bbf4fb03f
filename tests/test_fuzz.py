"""Fuzz the readers of every user file through the CLI: seeded hostile probe rows (JSONL, CSV), suite,
job and policy YAML, and corpus rows. Every command exits 0 or 2, with a message on stderr when it refuses,
never a traceback, within a hard timeout and a memory cap.

Cases run in batches through `fuzzdriver.py` (the `workbench` entry point's `main`, one process per batch, so
torch and datasets are imported once); one case of each batch also runs as its own `python -m workbench`.
`WORKBENCH_FUZZ_SEED` picks another seed (default 11) to explore further; a failure prints the case.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clirun import ENV, workbench
from fuzzgen import Gen

SEED = int(os.environ.get("WORKBENCH_FUZZ_SEED", "11"))
DRIVER = Path(__file__).with_name("fuzzdriver.py")
#: The cap is on the data segment (RLIMIT_DATA: heap and private writable mappings), not on the address space:
#: torch maps about 1.5 GiB of address space it never touches (VmPeak 1,542 MiB for an eval whose RSS peaks at
#: 600 MiB), and CUDA builds reserve far more, so RLIMIT_AS would fail healthy runs. Measured: `workbench eval`
#: of the world model fails at a 500 MiB data cap and passes at 800 MiB; the anchor bomb took more
#: than 3 GB. 2 GiB leaves room for a loaded machine and stops any blow-up.
MEMORY_CAP = 2 << 30
TIMEOUT = 240  # per batch; a hang (or an expansion that outruns the cap slowly) fails instead of stalling CI


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))


def _run_batch(cases: list[dict[str, Any]], cwd: Path) -> list[dict[str, Any]]:
    spec = cwd / f"cases-{cases[0]['id']}.json"
    spec.write_text(json.dumps(cases))
    proc = subprocess.run([sys.executable, str(DRIVER), str(spec)], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=TIMEOUT, preexec_fn=_cap, stdin=subprocess.DEVNULL)
    got = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"id"')]
    done = {g["id"] for g in got}
    missing = [c for c in cases if c["id"] not in done]
    assert not missing, (f"the batch died (exit {proc.returncode}) at case {missing[0]}", proc.stderr[-3000:])
    return got


def _check(cases: list[dict[str, Any]], results: list[dict[str, Any]], record: Callable[[str, object], None]) -> None:
    argv = {c["id"]: c["argv"] for c in cases}
    bad = [(r["id"], argv[r["id"]], r["rc"], r["stderr"][-1500:]) for r in results
           if r["rc"] not in (0, 2) or "Traceback" in r["stderr"] or (r["rc"] == 2 and not r["stderr"].strip())]
    assert not bad, f"seed {SEED}: {len(bad)} of {len(results)} cases failed; first: {bad[0]}"
    refused = sum(r["rc"] == 2 for r in results)
    record("summary", f"seed {SEED}: {len(results)} cases, {refused} refused with a message, "
                      f"{len(results) - refused} ok")  # printed at the end of the session (conftest)


def _one_real_process(case: dict[str, Any], cwd: Path) -> None:
    """The same case through the real entry point: the exit code and stderr of a process."""
    proc = workbench(*case["argv"], cwd=cwd, timeout=TIMEOUT)
    assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr, (case, proc.stderr[-2000:])
    assert proc.returncode == 0 or proc.stderr.strip()


@pytest.fixture(scope="module")
def base(world: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three good probes of the world and a workspace holding one finished run of them."""
    d = tmp_path_factory.mktemp("fuzz")
    (d / "good.jsonl").write_text("\n".join(Path(world.probes).read_text().splitlines()[:3]) + "\n")
    out = workbench("eval", "--model", str(world.model), "--probes", "good.jsonl", "--workspace", "ws", "--json",
                    cwd=d)
    assert out.returncode == 0, out.stderr[-2000:]
    return {"dir": d, "model": str(world.model), "run": json.loads(out.stdout)["run_id"]}


@pytest.mark.slow  # over 5 s on 2 cores
def test_fuzz_probe_files(base: dict[str, Any], record_property: Callable[[str, object], None]) -> None:
    g, d = Gen(SEED), base["dir"]
    cases = []
    for i in range(12):
        name = f"probes{i}.jsonl" if i % 3 else f"probes{i}.csv"
        (d / name).write_bytes(g.probes_jsonl(25) if i % 3 else g.probes_csv(25))
        cases += [{"id": f"p{i}", "argv": ["validate", name]},
                  {"id": f"p{i}-skip", "argv": ["validate", name, "--skip-bad", "--json"]}]
        if i < 4:  # generation with the world model over whatever survived
            cases.append({"id": f"p{i}-eval", "argv": ["eval", "--model", base["model"], "--probes", name,
                                                        "--skip-bad", "--workspace", f"ws-p{i}", "--json"]})
    _check(cases, _run_batch(cases, d), record_property)
    _one_real_process(cases[0], d)


@pytest.mark.slow  # over 5 s on 2 cores
def test_fuzz_suites(base: dict[str, Any], record_property: Callable[[str, object], None]) -> None:
    g, d = Gen(SEED + 1), base["dir"]
    cases = []
    for i in range(16):
        data = "good.jsonl" if i % 4 else "probes1.jsonl"
        (d / f"suite{i}.yaml").write_bytes(g.suite_yaml(data))
        cases.append({"id": f"s{i}", "argv": ["validate", f"suite{i}.yaml"]})
        if i < 4:
            cases.append({"id": f"s{i}-eval", "argv": ["eval", "--model", base["model"], "--probes", f"suite{i}.yaml",
                                                        "--skip-bad", "--workspace", f"ws-s{i}", "--json"]})
    (d / "probes1.jsonl").write_bytes(g.probes_jsonl(10))
    _check(cases, _run_batch(cases, d), record_property)
    _one_real_process(cases[0], d)


@pytest.mark.slow  # over 5 s on 2 cores
def test_fuzz_corpus_rows(base: dict[str, Any], record_property: Callable[[str, object], None]) -> None:
    g, d = Gen(SEED + 2), base["dir"]
    cases = []
    for i in range(8):
        (d / f"corpus{i}.jsonl").write_bytes(g.corpus_jsonl(30))
        cases += [{"id": f"c{i}", "argv": ["index", f"corpus{i}.jsonl", "--workspace", f"ws-c{i}"]},
                  {"id": f"c{i}-skip", "argv": ["index", f"corpus{i}.jsonl", "--workspace", f"ws-c{i}-s",
                                                "--skip-bad", "--json"]}]
    _check(cases, _run_batch(cases, d), record_property)
    _one_real_process(cases[0], d)


@pytest.mark.slow  # over 5 s on 2 cores
def test_fuzz_job_specs(base: dict[str, Any], record_property: Callable[[str, object], None]) -> None:
    """`train --force` up to validation: the fix set never exists, so a valid spec stops there (exit 2)."""
    g, d = Gen(SEED + 3), base["dir"]
    cases = []
    for i in range(12):
        (d / f"job{i}.yaml").write_bytes(g.job_yaml(f"no-fixset-{i}"))
        cases.append({"id": f"j{i}", "argv": ["train", f"job{i}.yaml", "--force", "--workspace", "ws-jobs"]})
    _check(cases, _run_batch(cases, d), record_property)
    _one_real_process(cases[0], d)


@pytest.mark.slow  # over 5 s on 2 cores
def test_fuzz_policies(base: dict[str, Any], record_property: Callable[[str, object], None]) -> None:
    g, d = Gen(SEED + 4), base["dir"]
    cases = []
    for i in range(12):
        (d / f"policy{i}.yaml").write_bytes(g.policy_yaml())
        cases.append({"id": f"g{i}", "argv": ["regress", "--policy", f"policy{i}.yaml", "--baseline", base["run"],
                                              "--candidate", base["run"], "--workspace", "ws", "--json"]})
    results = _run_batch(cases, d)
    for r in results:  # a valid policy gates for real: pass (0) or fail (1) are both answers here
        if r["rc"] == 1 and "Traceback" not in r["stderr"]:
            r["rc"] = 0
    _check(cases, results, record_property)
    _one_real_process(cases[0], d)


@pytest.mark.slow  # over 5 s on 2 cores
def test_fuzz_hostile_files_outputs_and_damaged_stores(base: dict[str, Any],
                                                       record_property: Callable[[str, object], None]) -> None:
    """Non-regular and oversized inputs in every input role, unwritable outputs, damaged store rows: each one
    refused (exit 2, a message), within the memory cap and the timeout (a FIFO would hang a plain open)."""
    import shutil
    import sqlite3

    from fuzzgen import HOSTILE_FILES, make_hostile_file

    g, d = Gen(SEED + 5), base["dir"]
    run, model = base["run"], base["model"]
    roles: dict[str, tuple[str, Callable[[str], list[str]]]] = {
        "probes": (".jsonl", lambda f: ["validate", f]),
        "corpus": (".jsonl", lambda f: ["index", f, "--workspace", "ws-hostile"]),
        "job": (".yaml", lambda f: ["train", f, "--workspace", "ws-hostile"]),
        "policy": (".yaml", lambda f: ["regress", "--policy", f, "--baseline", run, "--candidate", run,
                                       "--workspace", "ws"]),
        "auth": ("", lambda f: ["app", "--host", "0.0.0.0", "--auth-file", f]),
        "sft": (".jsonl", lambda f: ["screen", f, "--model", model, "--workspace", "ws-hostile"]),
    }
    must_refuse: list[dict[str, Any]] = []
    for i in range(24):
        kind, role = HOSTILE_FILES[i % len(HOSTILE_FILES)], g.r.choice(sorted(roles))
        suffix, argv = roles[role]
        name = f"hostile{i}-{kind}{suffix}"
        make_hostile_file(kind, d / name, i)
        must_refuse.append({"id": f"h{i}-{role}-{kind}", "argv": argv(name)})
    outputs = ["adir", "fifo-out", "null-out", "no/such/dir/x.jsonl", "/proc/no/such/x.jsonl", "good.jsonl/x"]
    (d / "adir").mkdir(exist_ok=True)
    if not (d / "fifo-out").exists():
        os.mkfifo(d / "fifo-out")
    if not (d / "null-out").is_symlink():
        (d / "null-out").symlink_to("/dev/null")
    must_refuse += [{"id": f"o{i}", "argv": ["export", run, "--out", out, "--workspace", "ws"]}
                    for i, out in enumerate(outputs)]
    results = _run_batch(must_refuse, d)
    wrong = [(r["id"], r["rc"], r["stderr"][-500:]) for r in results
             if r["rc"] != 2 or "Traceback" in r["stderr"] or not r["stderr"].strip()]
    assert not wrong, f"seed {SEED}: {len(wrong)} of {len(results)} hostile inputs and outputs not refused: {wrong[0]}"
    damaged = []
    for i in range(8):  # a copy of the workspace with one run field overwritten by seeded junk
        ws = d / f"ws-damaged{i}"
        shutil.rmtree(ws, ignore_errors=True)
        shutil.copytree(d / "ws", ws)
        column = g.r.choice(["options_json", "metrics_json", "suite_json"])
        con = sqlite3.connect(ws / "store.sqlite")
        con.execute(f"UPDATE runs SET {column} = ?", (g.text(),))
        con.commit()
        con.close()
        damaged += [{"id": f"d{i}-{cmd}", "argv": [cmd, *([run] if cmd != "runs" else []), "--workspace", ws.name]}
                    for cmd in ("runs", "show", "export")]
    _check(damaged, _run_batch(damaged, d), record_property)  # junk that parses as an object is a fine answer
    refused = len(results)
    record_property("summary", f"seed {SEED}: {refused} hostile files and outputs, all refused with a message; "
                               f"{len(damaged)} reads of damaged stores, none a traceback")


@pytest.mark.slow  # over 5 s on 2 cores
def test_fuzz_control_characters_never_reach_the_terminal(base: dict[str, Any], tmp_path: Path,
                                                          record_property: Callable[[str, object], None]) -> None:
    import shutil

    from fuzzgen import control_text

    g, d = Gen(SEED + 6), base["dir"]
    ws = tmp_path / "ws"
    shutil.copytree(d / "ws", ws)
    probe = json.loads((d / "good.jsonl").read_text().splitlines()[0])["id"]
    cases = [{"id": f"r{i}", "argv": ["review", base["run"], "--target", "verdict", "--probe", probe, "--value",
                                      g.r.choice(["correct", "incorrect"]), "--reason", control_text(g.r),
                                      "--reviewer", control_text(g.r).replace("\n", "") or "eve",
                                      "--workspace", str(ws)]} for i in range(12)]
    results = _run_batch(cases, tmp_path)
    _check(cases, results, record_property)
    recorded = sum(r["rc"] == 0 for r in results)
    listed = workbench("review", base["run"], "--workspace", str(ws), timeout=TIMEOUT)
    assert listed.returncode == 0, listed.stderr[-2000:]
    raw = [c for c in listed.stdout if c != "\n" and (ord(c) < 32 or 0x7f <= ord(c) < 0xa0 or c == "\u202e")]
    assert not raw, f"seed {SEED}: control characters reached the terminal: {raw[:5]}"
    assert len(listed.stdout.splitlines()) == recorded  # one line per review: no newline forged a line
    record_property("summary", f"seed {SEED}: {recorded} reviews with control characters, listed escaped")

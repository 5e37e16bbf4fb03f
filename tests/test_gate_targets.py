"""The gate says whether the fix worked, end to end on the test world: real LoRA jobs on the fix set of the world's
baseline run, each gated by `workbench regress` as a subprocess with a hard time limit.

- A job that fixes none of its targets (trained at a learning rate that moves nothing) breaks nothing either: before
  the `targets_fixed` gate it passed; now it cannot pass (FAIL, exit 1), and the sign-off the gate prints asks for
  an override reason.
- A job that fixes its targets passes that gate, whatever the other gates say.
- On a team's own questions (a probe set the model answers right 3 times: McNemar cannot fail on it), the guard set's
  known facts, evaluated beside them, decide in McNemar's place, and the verdict line says so and what to add;
  without the guard set the verdict is inconclusive and the line says what would decide it.

Every count asserted is read from the runs the gate compared, never assumed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import workbench
from ftworld import ALL_LINEAR, FtWorld
from wscopy import copy_workspace

pytestmark = pytest.mark.slow  # trains two LoRA jobs and gates them (about 30 s on 2 cores)

#: Seconds a command may take on two busy cores: the tiny world answers in seconds, a hang still fails.
LIMIT = 300


def _ok(*args: str, codes: tuple[int, ...] = (0,)) -> Any:
    proc = workbench(*args, timeout=LIMIT)
    assert proc.returncode in codes, (args[:2], proc.returncode, proc.stderr[-3000:])
    return proc


def _train(w: FtWorld, ws: Path, out: Path, steps: int, lr: float) -> Path:
    """`workbench train` of an SFT job on the world's fix set (LoRA on every linear layer, the known-facts stop
    off); the adapter it wrote."""
    spec = out.with_suffix(".yaml")
    spec.write_text(f"fixset: {w.fixset}\noutput_dir: {out}\nmethod: sft\n"
                    f"lora: {{target_modules: {json.dumps(ALL_LINEAR)}}}\n"
                    f"trainer: {{max_steps: {steps}, learning_rate: {lr}}}\nearly_stop: {{known_every: 0}}\n")
    _ok("train", str(spec), "--workspace", str(ws))
    assert (out / "adapter" / "adapter_config.json").is_file()
    return out / "adapter"


@pytest.fixture(scope="module")
def gated(w: FtWorld, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A private copy of the world's workspace (its answers cached), a job that fixes nothing and one that fixes."""
    root = tmp_path_factory.mktemp("gate-targets")
    ws = copy_workspace(w.store.workspace, root / "ws")
    return {"ws": ws, "root": root,
            "nothing": _train(w, ws, root / "nothing", steps=2, lr=1e-9),
            "fixes": _train(w, ws, root / "fixes", steps=100, lr=3e-3)}


def _regress(w: FtWorld, ws: Path, baseline: str, adapter: Path, *extra: str, codes: tuple[int, ...]) -> Any:
    proc = _ok("regress", "--baseline", baseline, "--candidate", str(w.paths.model), "--candidate-adapter",
               str(adapter), "--workspace", str(ws), "--json", *extra, codes=codes)
    out = json.loads(proc.stdout)
    assert out["exit_code"] == proc.returncode
    return out


def _targets(w: FtWorld) -> set[str]:
    manifest = json.loads((w.fixset / "fixset.json").read_text())
    return {t["probe_id"] for t in manifest["targets"]} | set(manifest["heldout_probe_ids"])


def _fixed(out: dict[str, Any], ids: set[str]) -> int:
    """Probes of `ids` whose change the gate recorded as a fix: hallucinated -> right or refused, refused -> right."""
    fixed = {("incorrect", "correct"), ("incorrect", "not_attempted"), ("not_attempted", "correct")}
    return sum((c["baseline_verdict"], c["candidate_verdict"]) in fixed for c in out["changes"] if c["probe_id"] in ids)


def test_a_candidate_that_fixes_none_of_its_targets_cannot_pass(w: FtWorld, gated: dict[str, Any]) -> None:
    ws, targets = gated["ws"], _targets(w)
    out = _regress(w, ws, w.run_id, gated["nothing"], "--no-guard", codes=(1,))
    gates = {g["name"]: g for g in out["gates"]}
    assert _fixed(out, targets) == 0
    assert gates["targets_fixed"]["status"] == "fail", gates["targets_fixed"]
    assert gates["targets_fixed"]["message"].startswith("fix targets: 0 of ")
    # it broke nothing either: the targets gate is what fails it, and the verdict line says so
    assert [g["name"] for g in out["gates"] if g["status"] == "fail"] == ["targets_fixed"]
    assert out["verdict"] == "fail" and out["verdict_line"].startswith("FAIL (exit 1): targets_fixed failed")

    # The terminal output names the runs a release decision needs, and the sign-off it prints is refused without
    # an override (the gate failed), then recorded with one.
    proc = _ok("regress", "--baseline", w.run_id, "--candidate", out["candidate_run"], "--workspace", str(ws),
               "--no-guard", codes=(1,))
    cand = out["candidate_run"]
    assert f"baseline run {w.run_id}, candidate run {cand}" in proc.stdout
    hint = next(line for line in proc.stdout.splitlines() if line.startswith("sign off: "))
    assert hint.startswith(f"sign off: workbench review {cand} --target release --value signoff --reason TEXT "
                           "--override-reason TEXT")
    review = ["review", cand, "--target", "release", "--value", "signoff", "--reason", "checked", "--workspace",
              str(ws)]
    refused = workbench(*review, timeout=LIMIT)
    assert refused.returncode == 2 and "FAIL" in refused.stderr, refused.stderr[-2000:]
    _ok(*review, "--override-reason", "a test of the sign-off path")
    history = json.loads(_ok("history", "--workspace", str(ws), "--json").stdout)
    signed = [h for h in history if h["candidate_run"] == cand and h["signoff"]]
    assert signed and signed[-1]["verdict"] == "fail"


def test_a_candidate_that_fixes_its_targets_passes_that_check(w: FtWorld, gated: dict[str, Any]) -> None:
    out = _regress(w, gated["ws"], w.run_id, gated["fixes"], "--no-guard", codes=(0, 1, 3))
    gate = next(g for g in out["gates"] if g["name"] == "targets_fixed")
    fixed = _fixed(out, _targets(w))
    assert fixed >= 1, "the 100-step job fixed none of its targets"
    assert gate["status"] == "pass" and gate["observed"] == fixed, gate
    assert "targets_fixed" not in out["verdict_line"]


def _few(w: FtWorld, root: Path, right_n: int = 3) -> tuple[Path, Path]:
    """A team's own questions: `right_n` probes the world model gets right and every fix target; and a guard pool
    of the world's other probes (the shipped pool is in languages the world model cannot read)."""
    from workbench.results import load_results
    from workbench.types import Verdict

    results = load_results(w.store, w.run_id).probes
    right = [r.probe.id for r in results if r.verdict == Verdict.CORRECT][:right_n]
    keep = set(right) | _targets(w)
    rows = [json.loads(line) for line in w.paths.probes.read_text().splitlines()]
    (root / "few.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] in keep))
    suite = root / "few.yaml"
    suite.write_text(w.paths.suite.read_text().replace("data: probes.jsonl", "data: few.jsonl"))
    pool = root / "pool.jsonl"
    pool.write_text("".join(json.dumps({**r, "id": "pool-" + r["id"]}) + "\n" for r in rows if r["id"] not in keep))
    return suite, pool


def test_the_guard_set_decides_where_the_teams_probes_cannot(w: FtWorld, gated: dict[str, Any]) -> None:
    ws, root = gated["ws"], gated["root"]
    suite, pool = _few(w, root)
    base = json.loads(_ok("eval", "--model", str(w.paths.model), "--probes", str(suite), "--workspace", str(ws),
                          "--json").stdout)["run_id"]

    blind = _regress(w, ws, base, gated["fixes"], "--no-guard", codes=(1, 3))
    mc = next(g for g in blind["gates"] if g["name"] == "not_significantly_worse")
    known = blind["headline"]["rows"][0]["baseline_count"]
    assert known < 6 and mc["detectable"]["needed"] == 6 and not mc["detectable"]["adequate"]
    assert "not_significantly_worse" in blind["inconclusive_gates"]
    assert f"could not have failed on this probe set ({known} baseline-correct probes, it needs >= 6): add >= " \
           f"{6 - known} probes the baseline answers right, or evaluate the guard set beside them (not checked: left " \
           "out with --no-guard)" in blind["verdict_line"]

    out = _regress(w, ws, base, gated["fixes"], "--guard-pool", "none", "--guard-pool", str(pool), codes=(0, 1))
    guard = next(k for k in out["known_facts"] if k["scope"] == "guard")
    assert guard["known"] >= 6
    by = f"the guard set's {guard['known']} known facts (guard_facts_kept)"
    decided = [g["name"] for g in out["gates"] if g["detectable"] and g["detectable"]["decided_by"] == by]
    # every gate the probes left blind is decided on the guard set: the verdict is conclusive
    assert set(decided) == set(blind["inconclusive_gates"]) and not out["inconclusive_gates"]
    assert (f"{', '.join(decided)} decided on {by}, your probes holding {known} baseline-correct (McNemar needs >= "
            f"6): add >= {6 - known} probes the baseline answers right to decide on your own") in out["verdict_line"]
    kept = next(g for g in out["gates"] if g["name"] == "guard_facts_kept")
    assert kept["status"] == ("pass" if guard["broken"] <= 0.02 * guard["known"] else "fail")
    assert (out["verdict"] == "fail") == any(g["status"] == "fail" for g in out["gates"])

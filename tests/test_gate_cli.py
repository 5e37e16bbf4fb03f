"""`workbench regress`, `watch` and `history` over real runs of the world model."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from clirun import workbench
from worldkit import eval_world

from hallucination_workbench import main


@pytest.fixture(scope="module")
def damaging_adapter(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random (untrained) LoRA adapter: it scrambles answers, so it must fail the gate."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(world.model))
    peft_model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj", "o_proj"],
                                                  init_lora_weights=False, lora_alpha=64))
    out = tmp_path_factory.mktemp("adapters") / "run1" / "adapter"
    peft_model.save_pretrained(out)
    return out


def test_noop_candidate_passes_with_zero_flips(world: Any, workspace: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    a = eval_world(world, workspace, capsys)
    b = eval_world(world, workspace, capsys)
    junit = workspace / "junit.xml"
    code = main(["regress", "--baseline", a, "--candidate", b, "--workspace", str(workspace), "--json",
                 "--junit", str(junit)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "pass"
    flips = out["overall"]["transitions"]["flips"]
    assert flips["fixed"] == 0 and flips["broken"] == 0
    cases = ET.parse(junit).getroot().iter("testcase")
    assert all(c.find("failure") is None for c in cases)


def test_damaging_adapter_fails_the_gate(world: Any, workspace: Path, damaging_adapter: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    base = eval_world(world, workspace, capsys)
    report = workspace / "gate.html"
    junit = workspace / "junit.xml"
    # the candidate is a model + adapter: evaluated on the baseline run's probes with its settings
    code = main(["regress", "--baseline", base, "--candidate", str(world.model), "--candidate-adapter",
                 str(damaging_adapter), "--workspace", str(workspace), "--report", str(report),
                 "--junit", str(junit)])
    assert code == 1
    assert "broken-probes" in report.read_text()
    failures = [c for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None]
    assert failures
    capsys.readouterr()
    assert main(["history", "--workspace", str(workspace), "--json"]) == 0
    (gate,) = json.loads(capsys.readouterr().out)
    assert gate["verdict"] == "fail" and gate["adapter"] == str(damaging_adapter)


def test_runs_with_different_settings_are_refused(world: Any, workspace: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    a = eval_world(world, workspace, capsys)
    b = eval_world(world, workspace, capsys, "--samples", "2")
    assert main(["regress", "--baseline", a, "--candidate", b, "--workspace", str(workspace)]) == 2
    assert "different settings" in capsys.readouterr().err


def test_watch_gates_only_complete_adapters_once(world: Any, workspace: Path, damaging_adapter: Path,
                                                 capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import shutil

    base = eval_world(world, workspace, capsys)
    folder = tmp_path / "train-out"
    shutil.copytree(damaging_adapter, folder / "checkpoint-10")
    shutil.copytree(damaging_adapter, folder / "checkpoint-20")  # still being written: no marker
    (folder / "checkpoint-10" / "COMPLETE").write_text("")
    args = ["watch", str(folder), "--baseline", base, "--workspace", str(workspace), "--once", "--json"]
    assert main(args) == 1  # the one complete adapter fails the gate
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [Path(x["adapter"]).name for x in lines] == ["checkpoint-10"]
    assert main(args) == 0  # nothing new
    assert capsys.readouterr().out == ""


def _few_known_facts(world: Any, workspace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                     right_n: int = 3) -> str:
    """A probe file the world model gets right on only `right_n` probes (plus 12 it gets wrong), evaluated: McNemar
    over 3 known facts can never reach p < 0.05, so the built-in policy's verdict is inconclusive."""
    from workbench.results import load_results
    from workbench.store import Store
    from workbench.types import Verdict

    full = eval_world(world, workspace, capsys)
    results = load_results(Store.open(workspace), full).probes
    right = [r.probe.id for r in results if r.verdict == Verdict.CORRECT][:right_n]
    wrong = [r.probe.id for r in results if r.verdict != Verdict.CORRECT][:12]
    assert len(right) == right_n and len(wrong) == 12
    keep = set(right + wrong)
    rows = [line for line in Path(world.probes).read_text().splitlines() if json.loads(line)["id"] in keep]
    (tmp_path / "few.jsonl").write_text("\n".join(rows) + "\n")
    suite = Path(world.suite).read_text().replace("data: probes.jsonl", "data: few.jsonl")
    (tmp_path / "few.yaml").write_text(suite)
    return str(tmp_path / "few.yaml")


@pytest.mark.slow  # over 5 s on 2 cores
def test_inconclusive_gate_exits_3_in_regress_watch_and_history(
    world: Any, workspace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    probes = _few_known_facts(world, workspace, capsys, tmp_path)
    a = eval_world(world, workspace, capsys, "--probes", probes)
    b = eval_world(world, workspace, capsys, "--probes", probes)
    junit = tmp_path / "junit.xml"
    proc = workbench("regress", "--baseline", a, "--candidate", b, "--workspace", str(workspace), "--json",
                     "--junit", str(junit), timeout=300)
    assert proc.returncode == 3, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["verdict"] == "inconclusive" and out["exit_code"] == 3
    # 3 known facts: McNemar cannot fail; 3 answers that could turn hallucinated cannot lift the CI off zero
    assert {"not_significantly_worse", "hallucination_not_significantly_up"} <= set(out["inconclusive_gates"])
    assert out["headline"]["rows"][0] == {**out["headline"]["rows"][0], "label": "correct", "baseline_count": 3}
    skipped = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase") if c.find("skipped") is not None]
    assert set(skipped) == {*out["inconclusive_gates"], *out["not_checked_gates"]}  # no field suite here
    assert {"field_fixes_kept", "field_failures_fixed"} <= set(out["not_checked_gates"])
    proc = workbench("regress", "--baseline", a, "--candidate", b, "--workspace", str(workspace), timeout=300)
    assert proc.returncode == 3 and "INCONCLUSIVE (exit 3)" in proc.stdout and "could not fail" in proc.stdout
    from workbench.store import Store
    from workbench.views import compare_runs

    view = compare_runs(Store.open(workspace), a, b)  # the app's Compare tab renders the new verdict
    assert view.verdict == "inconclusive" and "gate: INCONCLUSIVE" in view.summary_html

    # watch --once: an identity adapter (LoRA B = 0) changes nothing; its gate is inconclusive, so is the scan
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(world.model)),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))  # fmt: skip
    folder = tmp_path / "train-out"
    model.save_pretrained(folder / "adapter")
    (folder / "adapter" / "COMPLETE").write_text("")
    args = ["watch", str(folder), "--baseline", a, "--workspace", str(workspace), "--once", "--json"]
    assert main(args) == 3
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["verdict"] == "inconclusive" and line["exit_code"] == 3
    assert main(["history", "--workspace", str(workspace), "--json"]) == 0
    gates = json.loads(capsys.readouterr().out)
    assert [(g["verdict"], g["exit_code"]) for g in gates] == [("inconclusive", 3)] * 3


def _world_pool(world: Any, tmp_path: Path) -> Path:
    """The world's own facts as a user's guard pool file (the shipped pool is in languages the world model cannot
    read): `--guard-pool none --guard-pool FILE`, the file without the shipped pool."""
    rows = [json.loads(line) for line in Path(world.probes).read_text().splitlines()]
    path = tmp_path / "world-pool.jsonl"
    path.write_text("".join(json.dumps({**r, "id": "pool-" + r["id"]}) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_guard_fails_a_damaging_candidate_the_probe_set_cannot_judge(
    world: Any, workspace: Path, damaging_adapter: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A team's own failures: a probe set the model answers none of right leaves the probe set's gates blind
    (inconclusive, exit 3); the guard set, evaluated beside it, sees the damage: FAIL (exit 1), the guard gate
    naming the guard set."""
    probes = _few_known_facts(world, workspace, capsys, tmp_path, right_n=0)
    base = eval_world(world, workspace, capsys, "--probes", probes)
    pool = _world_pool(world, tmp_path)
    args = ["regress", "--baseline", base, "--candidate", str(world.model), "--candidate-adapter",
            str(damaging_adapter), "--workspace", str(workspace), "--json"]
    assert main([*args, "--no-guard"]) == 3
    blind = json.loads(capsys.readouterr().out)
    gate = next(g for g in blind["gates"] if g["name"] == "guard_facts_kept")
    assert gate["status"] == "not_checked" and "not checked" in gate["message"] and blind["guard"] is None

    assert main([*args, "--guard-pool", "none", "--guard-pool", str(pool)]) == 1
    out = json.loads(capsys.readouterr().out)
    gate = next(g for g in out["gates"] if g["name"] == "guard_facts_kept")
    assert out["verdict"] == "fail" and gate["status"] == "fail" and gate["message"].startswith("guard set:")
    guard = next(k for k in out["known_facts"] if k["scope"] == "guard")
    assert guard["known"] >= 20 and guard["broken"] / guard["known"] > 0.02
    assert guard["replayed"] is None  # a random adapter has no fix-set lineage: said, not guessed
    assert len([c for c in out["guard"]["changes"] if c["flip"] == "broken"]) == guard["broken"]
    from workbench.store import Store
    from workbench.views import compare_runs

    summary = compare_runs(Store.open(workspace), base, out["candidate_run"]).summary_html  # the app's Compare tab
    assert f"guard set: {guard['broken']} of {guard['known']} known facts broken" in summary
    assert f"(gate {out['gate_id']})" in summary


@pytest.mark.slow
def test_guard_passes_a_candidate_that_changes_nothing(
    world: Any, workspace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Baseline against itself with the guard: every guard fact kept, the guard gate passes, and the terminal
    report prints the known-facts lines of both scopes."""

    a = eval_world(world, workspace, capsys)
    pool = _world_pool(world, tmp_path)
    proc = workbench("regress", "--baseline", a, "--candidate", a, "--workspace", str(workspace), "--guard-pool",
                     "none", "--guard-pool", str(pool), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "guard set: 0 of" in proc.stdout and "probes: 0 of" in proc.stdout
    assert "guard_facts_kept" in proc.stdout

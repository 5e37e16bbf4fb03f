"""`workbench regress`, `watch` and `history` over real runs of the world model."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

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


def _eval(world: Any, ws: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(ws),
                 "--json", *extra]) == 0
    return str(json.loads(capsys.readouterr().out)["run_id"])


def test_noop_candidate_passes_with_zero_flips(world: Any, workspace: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    a = _eval(world, workspace, capsys)
    b = _eval(world, workspace, capsys)
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
    base = _eval(world, workspace, capsys)
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
    a = _eval(world, workspace, capsys)
    b = _eval(world, workspace, capsys, "--samples", "2")
    assert main(["regress", "--baseline", a, "--candidate", b, "--workspace", str(workspace)]) == 2
    assert "different settings" in capsys.readouterr().err


def test_watch_gates_only_complete_adapters_once(world: Any, workspace: Path, damaging_adapter: Path,
                                                 capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import shutil

    base = _eval(world, workspace, capsys)
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

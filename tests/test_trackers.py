"""`report_to`: the job's curves in the tracker a team uses, read back with the tracker's own reader, equal to the
store's records; a tracker that is not installed is refused with its pip line before anything is written."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from clirun import assert_refused, workbench
from ftworld import FtWorld

from finetune import records
from finetune.job import JobSpec, TrainerSpec, from_dict, run_job
from finetune.job.trackers import TENSORBOARD_DIR, TRACKERS, pip_line
from workbench.errors import MissingDependencyError, WorkbenchError

STEPS = 3
#: A tracker this environment lacks (the refusal tests need one); None when all are installed.
MISSING = next((t for t in TRACKERS if importlib.util.find_spec(t) is None
                and not (t == "tensorboard" and importlib.util.find_spec("tensorboardX"))), None)


def _losses(w: FtWorld, job_id: str) -> dict[int, float]:
    return {step: value for step, _, value in records.metrics(w.store, job_id, "loss")}


def test_spec_report_to_values() -> None:
    base = {"fixset": "f", "output_dir": "o"}
    assert from_dict(base).report_to == []
    assert from_dict({**base, "report_to": "none"}).report_to == []
    assert from_dict({**base, "report_to": "tensorboard"}).report_to == ["tensorboard"]
    assert from_dict({**base, "report_to": ["mlflow", "trackio"]}).report_to == ["mlflow", "trackio"]
    with pytest.raises(WorkbenchError, match=r"`report_to\[0\]` must be one of .*Did you mean `tensorboard`"):
        from_dict({**base, "report_to": ["tensorbord"]})
    with pytest.raises(WorkbenchError, match=r"`report_to`.*`none` cannot be listed with a tracker"):
        from_dict({**base, "report_to": ["none", "mlflow"]})


@pytest.mark.slow  # over 5 s on 2 cores
@pytest.mark.skipif(MISSING is None, reason="every tracker is installed: no refusal to test")
def test_missing_tracker_refused_before_anything_is_written(w: FtWorld, tmp_path: Path) -> None:
    assert MISSING is not None
    out = tmp_path / "job"
    spec = JobSpec(fixset=str(w.fixset), output_dir=str(out), report_to=[MISSING],  # type: ignore[list-item]
                   trainer=TrainerSpec(max_steps=STEPS))
    with pytest.raises(MissingDependencyError, match=f"`report_to: {MISSING}`") as e:
        run_job(spec, w.store)
    assert pip_line(MISSING) in str(e.value) and not out.exists()
    # the CLI: exit 2 with the pip line, no traceback (train overrides the spec; fix refuses before building)
    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: {w.fixset}\noutput_dir: {out}\ntrainer: {{max_steps: {STEPS}}}\n")
    ws = str(w.store.workspace)
    assert_refused(workbench("train", str(job), "--report-to", MISSING, "--workspace", ws, timeout=120),
                   f"`report_to: {MISSING}`", f"pip install 'hallucination-workbench[{MISSING}]'")
    assert_refused(workbench("fix", w.run_id, "--out", str(tmp_path / "fix"), "--report-to", MISSING, "--train",
                             "--workspace", ws, timeout=120), pip_line(MISSING))
    assert_refused(workbench("fix", w.run_id, "--out", str(tmp_path / "fix"), "--report-to", "tensorboard",
                             "--workspace", ws, timeout=120), "--report-to needs --train")
    # eval and regress refuse before evaluating anything
    assert_refused(workbench("regress", "--baseline", w.run_id, "--candidate", w.run_id, "--report-to", MISSING,
                             "--workspace", ws, timeout=120), pip_line(MISSING))
    assert_refused(workbench("eval", "--model", str(w.paths.model), "--probes", str(w.paths.suite), "--report-to",
                             "tensorbord", "--workspace", ws, timeout=120), "Did you mean `tensorboard`")
    assert not out.exists() and not (tmp_path / "fix").exists()


def test_tensorboard_curves_equal_the_store(w: FtWorld, tmp_path: Path) -> None:
    if importlib.util.find_spec("tensorboard") is None:
        pytest.skip(f"tensorboard is not installed ({pip_line('tensorboard')})")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    plain = run_job(JobSpec(fixset=str(w.fixset), output_dir=str(tmp_path / "plain"),
                            trainer=TrainerSpec(max_steps=STEPS)), w.store)
    out = tmp_path / "tb"
    res = run_job(JobSpec(fixset=str(w.fixset), output_dir=str(out), report_to=["tensorboard"],
                          trainer=TrainerSpec(max_steps=STEPS)), w.store)
    assert res.status == "done" and res.steps == STEPS
    stored = _losses(w, res.job_id)
    assert sorted(stored) == list(range(1, STEPS + 1))
    # the workbench's own records are what they are without a tracker (same seed, same losses)
    assert stored == _losses(w, plain.job_id)

    acc = EventAccumulator(str(out / TENSORBOARD_DIR))
    acc.Reload()
    curve = {e.step: e.value for e in acc.Scalars("train/loss")}
    assert sorted(curve) == sorted(stored)
    for step, value in stored.items():
        assert curve[step] == pytest.approx(value, rel=1e-6)  # event files hold float32
    # named after the job, tagged with its lineage
    texts = {tag: acc.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in acc.Tags()["tensors"]}
    lineage = next(v for k, v in texts.items() if k.startswith("lineage"))
    assert f"workbench.baseline_run: {w.run_id}" in lineage and "workbench.method: sft" in lineage
    assert f"workbench.job_id: {res.job_id}" in lineage
    args = next(v for k, v in texts.items() if k.startswith("args"))
    assert f'"run_name": "{res.job_id}"' in args


def test_mlflow_local_store_curves_equal_the_store(w: FtWorld, tmp_path: Path) -> None:
    if importlib.util.find_spec("mlflow") is None:
        pytest.skip(f"mlflow is not installed ({pip_line('mlflow')})")
    from mlflow.tracking import MlflowClient

    from finetune.job.trackers import mlflow_uri

    out = tmp_path / "mlf"
    res = run_job(JobSpec(fixset=str(w.fixset), output_dir=str(out), report_to=["mlflow"],
                          trainer=TrainerSpec(max_steps=STEPS)), w.store)
    client = MlflowClient(tracking_uri=mlflow_uri(out))
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert len(runs) == 1 and runs[0].info.run_name == res.job_id
    assert runs[0].data.tags["workbench.baseline_run"] == w.run_id
    curve = {m.step: m.value for m in client.get_metric_history(runs[0].info.run_id, "loss")}
    assert curve == pytest.approx(_losses(w, res.job_id), rel=1e-6)


@pytest.mark.slow  # 27 s on 2 cores: an evaluation (from the cache) and a gate, each a CLI subprocess
def test_eval_and_gate_metrics_to_trackers(w: FtWorld, tmp_path: Path) -> None:
    """`eval --report-to` and `regress --report-to`: the run's overall metrics and the gate's deltas, read back with
    each installed tracker's reader, equal what the store holds."""
    installed = [t for t in ("tensorboard", "mlflow") if importlib.util.find_spec(t) is not None]
    if not installed:
        pytest.skip(f"neither tensorboard nor mlflow is installed ({pip_line('tensorboard')})")
    ws = w.store.workspace
    proc = workbench("eval", "--model", str(w.paths.model), "--probes", str(w.paths.suite), "--samples", "4",
                     "--paraphrases", "--report-to", ",".join(installed), "--workspace", str(ws), "--json",
                     timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = json.loads(proc.stdout)["run_id"]
    overall = w.store.get_run(run_id).metrics["overall"]
    gate = workbench("regress", "--baseline", w.run_id, "--candidate", run_id, "--no-guard", "--report-to",
                     ",".join(installed), "--workspace", str(ws), "--json", timeout=300)
    assert gate.returncode in (0, 1, 3), gate.stderr[-2000:]
    g = json.loads(gate.stdout)
    delta = g["overall"]["metrics"]["correct"]["delta"]
    if "tensorboard" in installed:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        acc = EventAccumulator(str(ws / "tensorboard" / run_id))
        acc.Reload()
        for m in ("correct", "incorrect", "not_attempted", "f_score"):
            (event,) = acc.Scalars(f"eval/{m}")
            assert event.step == 0 and event.value == pytest.approx(overall[m], rel=1e-6)
        acc = EventAccumulator(str(ws / "tensorboard" / g["gate_id"]))
        acc.Reload()
        assert acc.Scalars("gate/correct_delta")[0].value == pytest.approx(delta, abs=1e-6)
        assert acc.Scalars("gate/exit_code")[0].value == g["exit_code"]
    if "mlflow" in installed:
        from mlflow.tracking import MlflowClient

        from workbench.trackers import mlflow_uri

        client = MlflowClient(tracking_uri=mlflow_uri(ws))
        runs = {r.info.run_name: r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])}
        assert runs[run_id].data.metrics["eval/correct"] == pytest.approx(overall["correct"])
        assert runs[run_id].data.tags["workbench.model"] == str(w.paths.model)
        assert runs[g["gate_id"]].data.tags["workbench.verdict"] == g["verdict"]
        assert runs[g["gate_id"]].data.metrics["gate/correct_delta"] == pytest.approx(delta)

"""Experiment trackers (`--report-to`): the names, the pip line of a missing one, and evaluation and gate metrics
logged to them.

Training jobs report through trl's own `report_to` (finetune/job/trackers.py); an evaluation run or a gate has no
trainer, so its metrics are logged here with each tracker's own client, one tracker run per workbench run or gate,
named after it and tagged with what it compared. Without a server a tracker writes into the workspace: TensorBoard
event files under `WORKSPACE/tensorboard/NAME`, an MLflow SQLite store `WORKSPACE/mlflow.db` (unless
`MLFLOW_TRACKING_URI` is set); trackio and wandb follow their own settings (`TRACKIO_PROJECT` / `WANDB_PROJECT`,
default project `hallucination-workbench`). The store stays the source of truth: these are copies.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from workbench.errors import MissingDependencyError, WorkbenchError, did_you_mean

Tracker = Literal["tensorboard", "mlflow", "trackio", "wandb"]
TRACKERS: tuple[Tracker, ...] = ("tensorboard", "mlflow", "trackio", "wandb")
TENSORBOARD_DIR = "tensorboard"
MLFLOW_DB = "mlflow.db"
PROJECT = "hallucination-workbench"
#: The modules each tracker's client needs (any one of them for tensorboard, as transformers accepts).
_MODULES: dict[str, tuple[str, ...]] = {"tensorboard": ("tensorboard", "tensorboardX"), "mlflow": ("mlflow",),
                                        "trackio": ("trackio",), "wandb": ("wandb",)}


def pip_line(tracker: str) -> str:
    return f"pip install 'hallucination-workbench[{tracker}]'   # or: pip install {tracker}"


def split_names(text: str) -> list[str]:
    """`--report-to tensorboard,mlflow` as a list (`none`: the empty list is the spec's business, not here)."""
    return [n.strip() for n in text.split(",") if n.strip()]


def require(report_to: Sequence[str]) -> None:
    """MissingDependencyError (with the pip line) for the first tracker of `report_to` that is not installed."""
    for name in report_to:
        if not any(importlib.util.find_spec(m) is not None for m in _MODULES.get(name, (name,))):
            raise MissingDependencyError(f"`report_to: {name}`", pip_line(name))


def parse_report_to(text: str | None, flag: str = "--report-to") -> list[Tracker]:
    """A `--report-to` value checked: known names (with "Did you mean"), `none` alone, each one installed."""
    names = split_names(text or "none")
    if names == ["none"]:
        return []
    out: list[Tracker] = []
    for n in names:
        if n not in TRACKERS:
            raise WorkbenchError(f"{flag}: unknown tracker `{n}`.{did_you_mean(n, TRACKERS)} Known: "
                                 f"{', '.join(TRACKERS)}, or none")
        out.append(n)
    require(out)
    return out


def mlflow_uri(folder: Path) -> str:
    """MLflow's store when no server is configured: SQLite in `folder` (MLflow 3 refuses its old file store)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(folder / MLFLOW_DB).resolve()}"


def log_metrics(report_to: Sequence[str], *, workspace: Path, name: str, prefix: str,
                metrics: Mapping[str, float], tags: Mapping[str, str]) -> None:
    """One tracker run per tracker named `name`, tagged with `tags`, holding `prefix/metric` values at step 0."""
    values = {f"{prefix}/{k}": float(v) for k, v in metrics.items()}
    for tracker in report_to:
        if tracker == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter(log_dir=str(workspace / TENSORBOARD_DIR / name))
            for k, v in values.items():
                writer.add_scalar(k, v, 0)
            writer.add_text("lineage", "\n".join(f"    {k}: {v}" for k, v in tags.items()))
            writer.close()
        elif tracker == "mlflow":
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri=mlflow_uri(workspace))
            exp_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "Default")
            exp = client.get_experiment_by_name(exp_name)
            exp_id = exp.experiment_id if exp is not None else client.create_experiment(exp_name)
            run = client.create_run(exp_id, run_name=name, tags=dict(tags))
            for k, v in values.items():
                client.log_metric(run.info.run_id, k, v, step=0)
            client.set_terminated(run.info.run_id)
        elif tracker == "trackio":
            import trackio

            trackio.init(project=os.environ.get("TRACKIO_PROJECT", PROJECT), name=name, config=dict(tags))
            trackio.log(values)
            trackio.finish()
        elif tracker == "wandb":
            import wandb

            run = wandb.init(project=os.environ.get("WANDB_PROJECT", PROJECT), name=name, config=dict(tags),
                             tags=[prefix])
            run.log(values)
            run.finish()


REPORT_TO_HELP = ("tensorboard, mlflow, trackio, wandb (comma-separated) or none (default): where the metrics also go "
                  "(a tracker run named after the run or gate, in the workspace without a server)")


def report_run(report_to: Sequence[str], workspace: Path, run_id: str, metrics: Mapping[str, object],
               tags: Mapping[str, str]) -> None:
    """An evaluation run's overall metrics (`eval/correct`, `eval/incorrect`, ...) as a tracker run `run_id`."""
    if report_to:
        values = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        log_metrics(report_to, workspace=workspace, name=run_id, prefix="eval", metrics=values, tags=tags)


def report_gate(report_to: Sequence[str], workspace: Path, gate_id: str, result: Mapping[str, object]) -> None:
    """A gate's verdict (`gate/exit_code`, tag `workbench.verdict`) and each metric's baseline, candidate and delta
    (`gate/correct_delta`, ...) as a tracker run `gate_id`; `result` is `ComparisonResult.to_dict()`."""
    if not report_to:
        return
    overall = result.get("overall")
    metrics = overall.get("metrics", {}) if isinstance(overall, Mapping) else {}
    values = {"exit_code": float(str(result.get("exit_code", 0))), "n_probes": float(str(result.get("n_probes", 0)))}
    for name, m in metrics.items():
        for part in ("baseline", "candidate", "delta"):
            values[f"{name}_{part}"] = float(m[part])
    base, cand = result.get("baseline"), result.get("candidate")
    tags = {"workbench.gate_id": gate_id, "workbench.verdict": str(result.get("verdict")),
            "workbench.baseline_run": str(base.get("run_id") if isinstance(base, Mapping) else ""),
            "workbench.candidate_run": str(cand.get("run_id") if isinstance(cand, Mapping) else "")}
    log_metrics(report_to, workspace=workspace, name=gate_id, prefix="gate", metrics=values, tags=tags)

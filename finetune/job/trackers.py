"""Training curves to the experiment tracker a team already uses (`report_to`, as TRL and transformers do).

The job spec's `report_to` goes to every method's trl config unchanged; the store's records are written as
before (trackers are views of them, the store stays the source of truth). What this module adds around the
trainer:

- a clear error, with the exact pip line, when a named tracker is not installed (before anything is loaded);
- the run named after the job (`run_name` = the job id, as the store knows it) and tagged with its lineage
  (baseline run, fix set, method, base model): MLflow through `MLFLOW_TAGS`, Weights & Biases through
  `WANDB_TAGS`, TensorBoard as a `lineage` text entry beside transformers' own `args` entry;
- local defaults where a tracker would otherwise write outside the job: TensorBoard event files under
  `output_dir/runs`, an MLflow SQLite store `output_dir/mlflow.db` (unless `MLFLOW_TRACKING_URI` is set: MLflow 3
  refuses its old file store `./mlruns` unless told to, and recommends a database for local use).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.trackers import TRACKERS, Tracker, mlflow_uri, pip_line, require, split_names

__all__ = ["TENSORBOARD_DIR", "TRACKERS", "Tracker", "lineage", "mlflow_uri", "pip_line", "require", "split_names",
           "tensorboard_lineage", "tracker_env"]

#: Where a job's TensorBoard event files go, under its output_dir (MLflow: `mlflow_uri(output_dir)`).
TENSORBOARD_DIR = "runs"


def lineage(*, job_id: str, method: str, run_id: str | None, fixset: str, fixset_sha256: str,
            base_model: str) -> dict[str, str]:
    """The tags every tracker's run carries: where the job comes from, as the store records it."""
    return {"workbench.job_id": job_id, "workbench.method": method, "workbench.baseline_run": run_id or "",
            "workbench.fixset": fixset, "workbench.fixset_sha256": fixset_sha256, "workbench.base_model": base_model}


@contextlib.contextmanager
def tracker_env(report_to: Sequence[str], output_dir: Path, tags: Mapping[str, str]) -> Iterator[None]:
    """The environment transformers' tracker callbacks read (they take no arguments), set for the job's
    construction and training and put back after: a user's own MLFLOW_TRACKING_URI / WANDB_TAGS win."""
    env: dict[str, str] = {}
    if "tensorboard" in report_to:
        env["TENSORBOARD_LOGGING_DIR"] = str(output_dir / TENSORBOARD_DIR)
    if "mlflow" in report_to:
        env["MLFLOW_TAGS"] = json.dumps(dict(tags))
        env["MLFLOW_TRACKING_URI"] = mlflow_uri(output_dir)  # the user's URI when set
    if "wandb" in report_to and not os.environ.get("WANDB_TAGS"):
        # wandb tags are short labels: the method and the baseline run (the rest is in the run's config)
        env["WANDB_TAGS"] = ",".join(v for k, v in tags.items() if k in ("workbench.method", "workbench.baseline_run")
                                     and v)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def tensorboard_lineage(tags: Mapping[str, str]) -> Any:
    """A trainer callback that writes the lineage as a `lineage` text entry into the TensorBoard run (after
    transformers' TensorBoardCallback has opened its writer: user callbacks come after the reporting ones)."""
    from transformers import TrainerCallback
    from transformers.integrations.integration_utils import TensorBoardCallback

    class _Lineage(TrainerCallback):
        def __init__(self) -> None:
            self.trainer: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.trainer is None or not state.is_world_process_zero:
                return
            for cb in self.trainer.callback_handler.callbacks:
                writer = getattr(cb, "tb_writer", None) if isinstance(cb, TensorBoardCallback) else None
                if writer is not None:
                    writer.add_text("lineage", "\n".join(f"    {k}: {v}" for k, v in tags.items()))
                    writer.flush()

    return _Lineage()

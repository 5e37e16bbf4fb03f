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
import importlib.util
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from workbench.errors import MissingDependencyError

Tracker = Literal["tensorboard", "mlflow", "trackio", "wandb"]
TRACKERS: tuple[Tracker, ...] = ("tensorboard", "mlflow", "trackio", "wandb")
#: Where a job's TensorBoard event files and MLflow file store go, under its output_dir.
TENSORBOARD_DIR = "runs"
MLFLOW_DB = "mlflow.db"
#: The module each tracker's transformers callback imports (what must be importable).
_MODULES: dict[Tracker, tuple[str, ...]] = {"tensorboard": ("tensorboard", "tensorboardX"), "mlflow": ("mlflow",),
                                            "trackio": ("trackio",), "wandb": ("wandb",)}


def pip_line(tracker: str) -> str:
    return f"pip install 'hallucination-workbench[{tracker}]'   # or: pip install {tracker}"


def split_names(text: str) -> list[str]:
    """`--report-to tensorboard,mlflow` as the spec's list (validated by the spec, which names the field)."""
    return [n.strip() for n in text.split(",") if n.strip()]


def require(report_to: Sequence[str]) -> None:
    """MissingDependencyError (with the pip line) for the first tracker of `report_to` that is not installed."""
    for name in report_to:
        modules = _MODULES.get(name, (name,))  # type: ignore[call-overload]
        if not any(importlib.util.find_spec(m) is not None for m in modules):
            raise MissingDependencyError(f"`report_to: {name}`", pip_line(name))


def lineage(*, job_id: str, method: str, run_id: str | None, fixset: str, fixset_sha256: str,
            base_model: str) -> dict[str, str]:
    """The tags every tracker's run carries: where the job comes from, as the store records it."""
    return {"workbench.job_id": job_id, "workbench.method": method, "workbench.baseline_run": run_id or "",
            "workbench.fixset": fixset, "workbench.fixset_sha256": fixset_sha256, "workbench.base_model": base_model}


def mlflow_uri(output_dir: Path) -> str:
    """The job's own MLflow store when no server is configured: SQLite beside its adapter."""
    return f"sqlite:///{(output_dir / MLFLOW_DB).resolve()}"


@contextlib.contextmanager
def tracker_env(report_to: Sequence[str], output_dir: Path, tags: Mapping[str, str]) -> Iterator[None]:
    """The environment transformers' tracker callbacks read (they take no arguments), set for the job's
    construction and training and put back after: a user's own MLFLOW_TRACKING_URI / WANDB_TAGS win."""
    env: dict[str, str] = {}
    if "tensorboard" in report_to:
        env["TENSORBOARD_LOGGING_DIR"] = str(output_dir / TENSORBOARD_DIR)
    if "mlflow" in report_to:
        env["MLFLOW_TAGS"] = json.dumps(dict(tags))
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            env["MLFLOW_TRACKING_URI"] = mlflow_uri(output_dir)
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

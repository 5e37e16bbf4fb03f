"""What a candidate is called: by what made it, read from the files its job left, e.g. `SmolLM2 + sft fix of
run-20261128-0912 step 120`. Pickers, headlines, reports, the gate history and the decision queue all name a run
through `candidate_name`, so SFT, DPO and GRPO candidates of one fix set read apart without their paths.

Read from the job's own records (an adapter's folder -> `job.yaml` -> the fix set's `fixset.json`, and the job's
`result.json`), as plain YAML/JSON through the safe readers (a FIFO in an adapter's folder must not hang a page):
`workbench` does not import `finetune`. The method word is the job's own `method` (with its `stages`' methods when it
has them), whatever the method is; nothing here lists the methods.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workbench.cards import FIXSET_FILE, JOB_FILE, RESULT_FILE
from workbench.errors import WorkbenchError
from workbench.safeload import MAX_SPEC_BYTES, json_loads, yaml_load
from workbench.safeopen import read_input_text

_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
_JOB_DEPTH = 3  # OUT/adapter, OUT/checkpoints/checkpoint-N: the job.yaml is at most this many folders up


@dataclass(frozen=True)
class MadeBy:
    """What made an adapter, from its job's records.

    Attributes:
        method: The job's method word (`sft`, `dpo`, `grpo`, or `staged (sft→dpo)` for a job with stages).
        source_run: The run whose failures the fix set was built from ("" when the fix set's record is gone).
        step: The training step the adapter holds (a checkpoint's, the step a job rolled back to, else its last);
            None while the job has no result.
        job_dir: The job's folder.
    """

    method: str
    source_run: str
    step: int | None
    job_dir: Path

    def text(self) -> str:
        """`sft fix of run-... step 120`."""
        fix = f"{self.method} fix" + (f" of {self.source_run}" if self.source_run else "")
        return fix + (f" step {self.step}" if self.step is not None else "")


def model_name(model: str) -> str:
    """A base model's short name: its folder's name (a hub id's last part)."""
    return Path(model.rstrip("/")).name or model


def candidate_name(model: str, adapter: str | None) -> str:
    """`base + what made the adapter` (`made_by`), `base + adapter folder` for an adapter made elsewhere, or the
    base model's name alone."""
    base = model_name(model)
    if not adapter:
        return base
    made = made_by(adapter)
    return f"{base} + {made.text() if made else Path(adapter.rstrip('/')).name}"


def series_key(model: str, adapter: str | None) -> str:
    """Runs of one series share this key: the same model with no adapter, or with adapters of one job (its
    checkpoints and its final adapter), or with one adapter made elsewhere. Only runs of one series form a line on a
    chart; sibling candidates of one baseline do not."""
    if not adapter:
        return model
    made = made_by(adapter)
    return f"{model} + {made.job_dir if made else Path(adapter).resolve()}"


def made_by(adapter: str | Path) -> MadeBy | None:
    """What made `adapter`, read from the job folder holding it; None for an adapter no workbench job wrote (or
    whose job.yaml cannot be read)."""
    path = Path(adapter)
    job_dir = next((p for p in (path.parent, *path.parents[1:_JOB_DEPTH]) if (p / JOB_FILE).is_file()), None)
    if job_dir is None:
        return None
    try:
        spec = yaml_load(read_input_text(job_dir / JOB_FILE, max_bytes=MAX_SPEC_BYTES, what="job file"))
    except (OSError, ValueError, yaml.YAMLError, WorkbenchError):
        return None
    if not isinstance(spec, dict):
        return None
    return MadeBy(_method(spec), _source_run(job_dir, spec), _step(path, job_dir), job_dir)


def _method(spec: dict[str, Any]) -> str:
    method = str(spec.get("method") or "").strip() or "fix"
    stages = spec.get("stages")
    names = [str(s.get("method") or "") if isinstance(s, dict) else str(s) for s in stages] \
        if isinstance(stages, list) else []
    if names and all(names):  # a job of several stages: each stage's method, in order
        order = "→".join(names)
        return order if order == method else f"{method} ({order})"
    return method


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json_loads(read_input_text(path, what=what), max_bytes=None)
    except (OSError, ValueError, WorkbenchError):
        return {}
    return data if isinstance(data, dict) else {}


def _source_run(job_dir: Path, spec: dict[str, Any]) -> str:
    fixset = spec.get("fixset")
    if not isinstance(fixset, str) or not fixset:
        return ""
    manifest = _read_json(job_dir / fixset / FIXSET_FILE, "fix-set manifest")  # relative to the job.yaml
    return str(manifest.get("run_id") or "")


def _step(adapter: Path, job_dir: Path) -> int | None:
    found = _CHECKPOINT.fullmatch(adapter.name)
    if found:
        return int(found.group(1))
    result = _read_json(job_dir / RESULT_FILE, "job result")
    step = result.get("kept_step") if result.get("kept_step") is not None else result.get("steps")
    return int(step) if isinstance(step, int) else None

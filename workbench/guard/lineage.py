"""Which probes a candidate adapter's fix set replayed: a gate counts replayed and unreplayed known facts apart,
since a fact the job trained on dozens of times says nothing about the facts it never saw.

Read from the files a job leaves (adapter -> `job.yaml` beside it -> the fix set's `fixset.json`), as plain
JSON/YAML: `workbench` does not import `finetune`."""

from __future__ import annotations

from pathlib import Path

import yaml

from workbench.errors import WorkbenchError
from workbench.safeload import MAX_SPEC_BYTES, json_loads, yaml_load
from workbench.safeopen import read_input_text


def _manifest(adapter: str | None) -> dict[str, object] | None:
    """The fix-set manifest of the job that made `adapter`, or None when the lineage cannot be read."""
    if not adapter:
        return None
    job_yaml = Path(adapter).parent / "job.yaml"
    try:  # the safe reader: a FIFO or a link to /dev/zero in the adapter's folder must not hang a gate
        spec = yaml_load(read_input_text(job_yaml, max_bytes=MAX_SPEC_BYTES, what="job file"))
        fixset = job_yaml.parent / str(spec["fixset"])  # relative to the YAML, as the job spec reads it
        manifest = json_loads(read_input_text(fixset / "fixset.json", what="fix-set manifest"), max_bytes=None)
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError, WorkbenchError):
        return None
    return manifest if isinstance(manifest, dict) else None


def target_probe_ids(adapter: str | None) -> frozenset[str] | None:
    """The probe ids the adapter's fix set was made to fix: its trained targets and its held-out ones; None when the
    lineage is not there to read."""
    manifest = _manifest(adapter)
    if manifest is None:
        return None
    targets = manifest.get("targets")
    held = manifest.get("heldout_probe_ids")
    ids = [t.get("probe_id") for t in targets if isinstance(t, dict)] if isinstance(targets, list) else []
    ids += list(held) if isinstance(held, list) else []
    return frozenset(str(i) for i in ids if i is not None)


def replayed_probe_ids(adapter: str | None) -> frozenset[str] | None:
    """The probe ids (run probes and guard facts) the adapter's fix set trained on as replay or anchors; None when
    the lineage is not there to read (no adapter, an adapter made elsewhere, a fix set moved away)."""
    if not adapter:
        return None
    job_yaml = Path(adapter).parent / "job.yaml"
    try:  # the safe reader: a FIFO or a link to /dev/zero in the adapter's folder must not hang a gate
        spec = yaml_load(read_input_text(job_yaml, max_bytes=MAX_SPEC_BYTES, what="job file"))
        fixset = job_yaml.parent / str(spec["fixset"])  # relative to the YAML, as the job spec reads it
        manifest = json_loads(read_input_text(fixset / "fixset.json", what="fix-set manifest"), max_bytes=None)
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError, WorkbenchError):
        return None
    ids = manifest.get("replayed_probe_ids")
    return frozenset(str(i) for i in ids) if isinstance(ids, list) else None

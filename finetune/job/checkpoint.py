"""Atomic checkpoints: a checkpoint directory either is complete or is never used.

The trainer writes a checkpoint into `checkpoints/.staging/checkpoint-N`; every file is fsynced,
the directory is renamed to `checkpoints/checkpoint-N` (atomic on one filesystem), and a `COMPLETE`
marker is written last. A kill at any moment leaves either a staging directory or a checkpoint
without its marker, and both are ignored (and cleaned up) on resume.

`AtomicCheckpointMixin` goes in front of a transformers `Trainer` subclass (trl's SFTTrainer, DPOTrainer,
GRPOTrainer; `atomic(cls)` makes one) and replaces its `_save_checkpoint`; `last_complete_checkpoint` finds
where to resume.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.compat.transformers import TRAINER_SAVE_CHECKPOINT, check_overrides

COMPLETE = "COMPLETE"
STAGING = ".staging"
_CKPT = re.compile(r"^checkpoint-(\d+)$")


def _fsync_tree(path: Path) -> None:
    for root, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(root))


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def complete_checkpoints(folder: str | Path) -> list[Path]:
    """Complete checkpoints (with their COMPLETE marker), oldest step first."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        m = _CKPT.match(p.name)
        if m and p.is_dir() and (p / COMPLETE).is_file():
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def last_complete_checkpoint(folder: str | Path) -> Path | None:
    ckpts = complete_checkpoints(folder)
    return ckpts[-1] if ckpts else None


def clean_incomplete(folder: str | Path) -> list[str]:
    """Remove the staging area and checkpoints without a marker; returns what was removed."""
    root = Path(folder)
    removed = []
    if (root / STAGING).exists():
        shutil.rmtree(root / STAGING)
        removed.append(STAGING)
    if root.is_dir():
        for p in root.iterdir():
            if _CKPT.match(p.name) and p.is_dir() and not (p / COMPLETE).is_file():
                shutil.rmtree(p)
                removed.append(p.name)
    return sorted(removed)


def rotate(folder: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` complete checkpoints."""
    for p in complete_checkpoints(folder)[:-keep] if keep > 0 else []:
        (p / COMPLETE).unlink()  # unmark first: a kill mid-delete leaves an ignored directory
        shutil.rmtree(p)


class AtomicCheckpointMixin:
    """Replaces `Trainer._save_checkpoint` with stage + fsync + rename + COMPLETE marker.

    Set `keep_checkpoints` on the instance (default 2), `on_checkpoint(step, path)` to be told of each
    complete checkpoint, `save_extra(checkpoint_dir)` to add files to a checkpoint while it is staged (they are
    fsynced and committed with it), and `before_commit(step, staging_dir)` to run between the fsync and the
    rename that commits it (the kill tests stall a save there).
    """

    keep_checkpoints: int = 2
    on_checkpoint: Callable[[int, Path], None] | None = None
    before_commit: Callable[[int, Path], None] | None = None
    save_extra: Callable[[Path], None] | None = None

    # Private API (transformers 5.19.0): TRAINER_SAVE_CHECKPOINT in workbench/compat/transformers.py; `atomic`
    # checks that the trainer still has it, else this override would silently never run.
    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        args: Any = self.args  # type: ignore[attr-defined]
        state: Any = self.state  # type: ignore[attr-defined]
        root = Path(args.output_dir)
        staging = root / STAGING
        name = f"checkpoint-{state.global_step}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        args.output_dir = str(staging)
        try:
            super()._save_checkpoint(model, trial)  # type: ignore[misc]
        finally:
            args.output_dir = str(root)
        if self.save_extra is not None:
            self.save_extra(staging / name)
        _fsync_tree(staging / name)
        if self.before_commit is not None:
            self.before_commit(state.global_step, staging)
        final = root / name
        if final.exists():  # a stale unmarked one from a killed run at the same step
            shutil.rmtree(final)
        os.rename(staging / name, final)
        _fsync_dir(root)
        marker = final / COMPLETE
        with open(marker, "w") as f:
            f.write(f"step {state.global_step}\n")
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(final)
        shutil.rmtree(staging, ignore_errors=True)
        rotate(root, self.keep_checkpoints)
        if self.on_checkpoint is not None:
            self.on_checkpoint(state.global_step, final)


def atomic(trainer_class: type) -> type:
    """`trainer_class` with AtomicCheckpointMixin in front of its save (WorkbenchError if the installed
    transformers no longer has the save it wraps)."""
    cls = type(f"Atomic{trainer_class.__name__}", (AtomicCheckpointMixin, trainer_class), {})
    return check_overrides(cls, [TRAINER_SAVE_CHECKPOINT])

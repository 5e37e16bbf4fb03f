"""The private API of transformers, trl and datasets the workbench uses (workbench/compat/transformers.py) is still
there in the installed versions. When an upgrade removes or changes one, the failure names the installed version
and the one the shim was written against."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest

from workbench.compat.transformers import (
    DATASET_FINGERPRINT,
    PRIVATE_APIS,
    TRAINER_SAVE_CHECKPOINT,
    PrivateAPI,
    check_overrides,
    dataset_fingerprint,
    train_metrics,
)
from workbench.errors import WorkbenchError


@pytest.mark.slow  # over 5 s on 2 cores
@pytest.mark.parametrize("api", PRIVATE_APIS, ids=lambda a: a.name)
def test_the_installed_packages_still_have_it(api: PrivateAPI) -> None:
    problem = api.problem()
    assert problem is None, problem


def test_a_missing_or_changed_api_names_both_versions() -> None:
    installed = metadata.version("transformers")

    class Renamed:  # a Trainer whose save was renamed away
        def save_checkpoint(self, model: Any, trial: Any) -> None: ...

    class Changed:  # one whose save takes other parameters
        def _save_checkpoint(self, model: Any) -> None: ...

    gone = TRAINER_SAVE_CHECKPOINT.problem(Renamed)
    assert gone is not None
    assert gone.startswith(f"transformers {installed} (the workbench was written against 5.19.0): "
                           "`Trainer._save_checkpoint` is gone; atomic checkpoints")
    changed = TRAINER_SAVE_CHECKPOINT.problem(Changed)
    assert changed is not None and "takes (self, model), not (self, model, trial)" in changed
    assert "Install transformers==5.19.0 or update workbench/compat/transformers.py" in changed


def test_an_override_of_a_vanished_hook_is_refused_when_the_class_is_built() -> None:
    from finetune.job.checkpoint import atomic

    with pytest.raises(WorkbenchError, match=r"`Trainer._save_checkpoint` is gone"):
        atomic(object)  # nothing below the mixin saves: its override would never be called
    trainer = type("Trainer", (), {"_save_checkpoint": lambda self, model, trial: None, "__module__": "transformers.x"})
    cls = atomic(trainer)
    assert check_overrides(cls, [TRAINER_SAVE_CHECKPOINT]) is cls


@pytest.mark.slow  # over 5 s on 2 cores
def test_trl_trainers_pass_the_check() -> None:
    from trl import DPOTrainer, SFTTrainer

    from finetune.job.checkpoint import atomic
    from finetune.job.methods.grpo import guided_trainer_class

    for cls in (SFTTrainer, DPOTrainer):
        assert atomic(cls).__name__ == f"Atomic{cls.__name__}"
    assert guided_trainer_class().__name__ == "GuidedGRPOTrainer"


def test_shims() -> None:
    import datasets

    a = datasets.Dataset.from_dict({"text": ["x"]})
    b = datasets.Dataset.from_dict({"text": ["y"]})
    assert dataset_fingerprint(a) != dataset_fingerprint(b)
    assert dataset_fingerprint(a) == a._fingerprint
    with pytest.raises(WorkbenchError, match=r"`Dataset._fingerprint` is gone"):
        dataset_fingerprint(object())
    with pytest.raises(WorkbenchError, match=r"trl .*`GRPOTrainer._metrics` is gone"):
        train_metrics(object())
    assert DATASET_FINGERPRINT in PRIVATE_APIS

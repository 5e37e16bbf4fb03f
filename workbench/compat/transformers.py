"""Every private API of transformers, trl and datasets the workbench uses, in one place.

Private API (an underscore name, or a method the library documents nowhere) can change in any release. Each use is
declared here as a `PrivateAPI`, naming the version it was written against and what relies on it, and reached
through a shim below (a call) or checked by `check_overrides` (a method a subclass overrides: were it renamed, the
override would silently never run, so the class is refused when it is built). tests/test_compat.py checks every
entry against the installed packages and fails naming the installed version.

Why in `workbench` and not `finetune`, though the trainer hooks are finetune's: this module imports none of these
packages at import time and no trainer code at all (`check_overrides` is handed the class), so it sits in the bottom
layer that both halves may import, and an upgrade has one module to read.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class PrivateAPI:
    """One private name the workbench uses: `owner` ("module:Class") has `attr`, as in `package` `written_against`.

    `params`: the parameters a call or an override relies on, in order (None for a data attribute, which is looked
    for in the class source since it is set in `__init__`). `use`: what breaks without it."""

    package: str
    owner: str
    attr: str
    written_against: str
    params: tuple[str, ...] | None
    use: str

    @property
    def name(self) -> str:
        return f"{self.owner.partition(':')[2]}.{self.attr}"

    def installed(self) -> str:
        try:
            return metadata.version(self.package)
        except metadata.PackageNotFoundError:
            return "(not installed)"

    def owner_class(self) -> type:
        module, _, cls = self.owner.partition(":")
        found: type = getattr(importlib.import_module(module), cls)
        return found

    def problem(self, owner: type | None = None) -> str | None:
        """Why the installed package (or `owner`, a class standing for it) no longer offers this; None if it does."""
        cls = owner if owner is not None else self.owner_class()
        if self.params is None:
            try:
                present = hasattr(cls, self.attr) or f"self.{self.attr}" in inspect.getsource(cls)
            except (OSError, TypeError):  # no source to read: trust the attribute's absence
                present = False
            return None if present else self.broken("is gone")
        member = getattr(cls, self.attr, None)
        if not callable(member):
            return self.broken("is gone")
        got = tuple(inspect.signature(member).parameters)
        if got[: len(self.params)] != self.params:
            return self.broken(f"takes ({', '.join(got)}), not ({', '.join(self.params)})")
        return None

    def broken(self, what: str) -> str:
        return (f"{self.package} {self.installed()} (the workbench was written against {self.written_against}): "
                f"`{self.name}` {what}; {self.use}. Install {self.package}=={self.written_against} or update "
                "workbench/compat/transformers.py")


# -- the private API in use ------------------------------------------------------------------------------------------

#: workbench/backends/hf_decode.py drops finished rows from the KV cache and repeats a prompt's prefill per answer.
CACHE_SELECT_ROWS = PrivateAPI(
    "transformers", "transformers:DynamicCache", "batch_select_indices", "5.19.0", ("self", "indices"),
    "the hf backend's decode loop keeps the cache rows of live answers with it (without it, decode=generate)")
#: finetune/job/checkpoint.py makes checkpoints atomic around the trainer's own save.
TRAINER_SAVE_CHECKPOINT = PrivateAPI(
    "transformers", "transformers:Trainer", "_save_checkpoint", "5.19.0", ("self", "model", "trial"),
    "atomic checkpoints (staged, fsynced, renamed, marked complete) wrap it")
#: finetune/job/methods/grpo.py clips the advantage of guided completions after scoring.
GRPO_GENERATE_AND_SCORE = PrivateAPI(
    "trl", "trl.trainer.grpo_trainer:GRPOTrainer", "_generate_and_score_completions", "1.16.0", ("self", "inputs"),
    "GRPO's abstention guidance clips the guided completions' advantages after it")
#: finetune/job/methods/grpo.py replaces some completions by the abstention phrase.
GRPO_GENERATE_SINGLE_TURN = PrivateAPI(
    "trl", "trl.trainer.grpo_trainer:GRPOTrainer", "_generate_single_turn", "1.16.0",
    ("self", "prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
    "GRPO's abstention guidance puts the abstention phrase in place of some completions there")
#: finetune/job/methods/grpo.py logs the replay anchor's NLL beside trl's own metrics.
GRPO_METRICS = PrivateAPI(
    "trl", "trl.trainer.grpo_trainer:GRPOTrainer", "_metrics", "1.16.0", None,
    "the replay anchor's NLL is logged into it, beside trl's own GRPO metrics")
#: workbench/attribution/corpus.py detects a changed Hugging Face dataset corpus by its fingerprint.
DATASET_FINGERPRINT = PrivateAPI(
    "datasets", "datasets:Dataset", "_fingerprint", "5.2.0", None,
    "a corpus index built from a Hugging Face dataset is rebuilt when the dataset's fingerprint changes")

PRIVATE_APIS: tuple[PrivateAPI, ...] = (CACHE_SELECT_ROWS, TRAINER_SAVE_CHECKPOINT, GRPO_GENERATE_AND_SCORE,
                                        GRPO_GENERATE_SINGLE_TURN, GRPO_METRICS, DATASET_FINGERPRINT)


# -- shims -----------------------------------------------------------------------------------------------------------

def can_select_cache_rows(cache: Any) -> bool:
    """Whether `cache` (a model's past_key_values) can keep a subset (or repeats) of its batch rows."""
    return hasattr(cache, CACHE_SELECT_ROWS.attr)


def select_cache_rows(cache: Any, index: Any) -> None:
    """Keep the batch rows `index` (a 1-D long tensor, repeats allowed) of `cache`, in place."""
    cache.batch_select_indices(index)


def train_metrics(trainer: Any) -> Any:
    """trl's per-mode metric lists of a GRPOTrainer: `train_metrics(t)["train"][name].append(value)`."""
    metrics = getattr(trainer, GRPO_METRICS.attr, None)
    if metrics is None:
        raise WorkbenchError(GRPO_METRICS.broken("is gone"))
    return metrics


def dataset_fingerprint(dataset: Any) -> str:
    """The content fingerprint datasets keeps for a Dataset (it changes when the data does)."""
    value = getattr(dataset, DATASET_FINGERPRINT.attr, None)
    if not isinstance(value, str):
        raise WorkbenchError(DATASET_FINGERPRINT.broken("is gone"))
    return value


def check_overrides(cls: type, apis: Iterable[PrivateAPI]) -> type:
    """`cls` if every private method in `apis` that it overrides still exists, with the parameters the override
    takes, on a base class; else a WorkbenchError naming the installed version. Returns `cls` for chaining."""
    for api in apis:
        base = next((b for b in cls.__mro__[1:] if api.attr in vars(b) and b.__module__.split(".")[0] == api.package),
                    None)
        why = api.problem(base) if base is not None else api.broken("is gone")
        if why:
            raise WorkbenchError(why)
    return cls

"""The training methods behind the run skeleton (the contract: finetune/job/method.py), one module each."""

from __future__ import annotations

from finetune.job.method import Method
from finetune.job.methods.dpo import DPO
from finetune.job.methods.grpo import GRPO
from finetune.job.methods.sft import SFT

__all__ = ["DPO", "GRPO", "SFT", "method_class"]

_METHODS: dict[str, type[Method]] = {m.name: m for m in (SFT, DPO, GRPO)}


def method_class(name: str) -> type[Method]:
    """The method named by a job spec's `method` (the spec's Literal already refused any other name)."""
    return _METHODS[name]

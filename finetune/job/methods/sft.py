"""LoRA SFT (trl SFTTrainer, completion-only loss) on the fix set's `sft` split: injection, abstention and
replay rows. Held-out score: greedy accuracy on the held-out rows' completions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from finetune.job.method import SupervisedMethod


class SFT(SupervisedMethod):
    name = "sft"
    columns = ("prompt", "completion")
    heldout_metric = "heldout_accuracy"
    target = "completion"

    def config(self, checkpoint_dir: Path) -> Any:
        from trl.trainer.sft_config import SFTConfig

        return SFTConfig(**self.trainer_args(checkpoint_dir), max_length=self.job.spec.trainer.max_length,
                         completion_only_loss=True, packing=False)

    def trainer_class(self) -> type:
        from trl.trainer.sft_trainer import SFTTrainer

        return SFTTrainer

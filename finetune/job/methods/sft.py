"""LoRA SFT (trl SFTTrainer, completion-only loss) on the fix set's `sft` split: injection, abstention and
replay rows. Held-out score: greedy accuracy on the held-out rows' completions.

Two KL terms to the base model (the adapter disabled, finetune/job/methods/kl.py), each its weight x KL(base ||
adapted) over every position of a seeded batch of texts per step:
- `trainer.rehearsal_kl`: the rehearsal rows (corpus text), which then leave the cross-entropy rows (README
  "Unreplayed known facts");
- `trainer.replay_kl` (10 on a pretrained model by default, 20 on rows that inject facts): the replay rows, prompt
  and the model's own answer as one text, which stay in the cross-entropy rows too: cross-entropy keeps each replayed
  greedy answer, the KL term the whole distribution around it, which is what the known facts no row replays share
  with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from finetune.job.method import SupervisedMethod
from finetune.job.methods.kl import KL_COLUMN, BaseTopK, KLAnchor, kl_trainer, replay_anchor
from workbench.errors import WorkbenchError


class SFT(SupervisedMethod):
    name = "sft"
    columns = ("prompt", "completion")
    heldout_metric = "heldout_accuracy"
    target = "completion"

    def __init__(self, job: Any, tokenizer: Any, rows: Any, log: Any) -> None:
        t, fixset = job.spec.trainer, job.spec.fixset
        # the replay rows train in the batch: their KL term comes from the batch's own forward pass (kl.py)
        self.replay = replay_anchor(job, tokenizer, rows, "completion")
        self.anchors: list[KLAnchor] = []
        if t.rehearsal_kl > 0:
            texts = tuple(r["completion"] for r in rows if r["split"] == "train" and r["source"] == "rehearsal")
            if not texts:
                raise WorkbenchError(f"trainer.rehearsal_kl is {t.rehearsal_kl} but fix set `{fixset}` has "
                                     "no rehearsal rows; build it with `workbench fix --rehearsal INDEX`")
            self.anchors.append(KLAnchor("rehearsal", texts, t.rehearsal_kl))
            rows = rows.filter(lambda r: r["source"] != "rehearsal")
        super().__init__(job, tokenizer, rows, log)
        if self.replay is not None:  # the rows the in-batch term reads, in the order Method kept the train rows
            flags = [r["category"] == "replay" for r in rows if r["split"] == "train"]
            self.train = self.train.add_column(KL_COLUMN, flags)

    def config(self, checkpoint_dir: Path) -> Any:
        from trl.trainer.sft_config import SFTConfig

        return SFTConfig(**self.trainer_args(checkpoint_dir), max_length=self.job.spec.trainer.max_length,
                         completion_only_loss=True, packing=False)

    def trainer_class(self) -> type:
        from trl.trainer.sft_trainer import SFTTrainer

        if not self.anchors and self.replay is None:
            return SFTTrainer
        return kl_trainer(SFTTrainer, self.anchors, self.job.spec.trainer, inbatch=self.replay)

    def trainer(self, *, model: Any, args: Any, peft_config: Any, callbacks: Sequence[Any]) -> Any:
        trainer = super().trainer(model=model, args=args, peft_config=peft_config, callbacks=callbacks)
        if self.replay is not None:  # the prepared rows' token ids, as the batches carry them
            ds = trainer.train_dataset
            trainer.kl_rows = BaseTopK({tuple(ids) for ids, kl in zip(ds["input_ids"], ds[KL_COLUMN], strict=True)
                                        if kl})
        return trainer

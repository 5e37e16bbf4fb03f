"""What a job did: `JobResult`, also written as `output_dir/result.json` when the job ends.

Every launcher returns one: in-process from the run itself, subprocess and accelerate by reading the file
the child wrote (never JSON scraped from its stdout).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

RESULT_FILE = "result.json"
Status = Literal["done", "stopped", "failed"]


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """What a job did.

    Attributes:
        job_id: The `jobs` row id (also in output_dir/job_id).
        status: done | stopped (early stop or a watchdog; the adapter is saved) | failed (NaN: no adapter).
        output_dir: The job directory.
        adapter: The peft adapter directory (None when the job failed).
        steps: Optimizer steps taken in total (across resumes).
        final_loss: The last logged training loss.
        heldout_before: The held-out score of the base model (None: no held-out rows, or a resumed job):
            sft/dpo the accuracy on the fix set's heldout rows, grpo the mean reward of greedy answers on
            the held-out prompts.
        heldout_after: The same with the trained adapter.
        resumed_from: The checkpoint a resumed job started from.
        stop_reason: nan | early_stop | collapse | known_broken (grpo also reward_hacking | kl_blowup |
            collapsed_length) when a watchdog stopped the job.
        message: The watchdog's message, or a one-line summary.
        seconds: Wall time of this call.
        known_checked: Probes of the fix set's validation slice (known facts no training row holds) the
            model answered correctly before training (all of the slice for a resumed job); 0 without a slice.
        known_broken: Those of them the trained model answers wrongly, by id (finetune/job/scoring.py).
        known_right_before: The slice's probes counted as right before training, by id (a staged job's later
            stages take the first stage's: what the whole job breaks is counted against the base model).
        learning_rate: The learning rate the job trained with (decided by resolve when the spec left it out).
        max_steps_rule, learning_rate_rule: Which rule gave the job's max_steps and learning rate, with its
            figures (`60 (20 epochs x 96 rows / batch 32)`), or that the job spec gave them.
        size_rule: The size class whose defaults (batch, epochs and the steps' floor, adapter scale) the job took
            where its spec gave none, and why (`pretrained-size (width 576 > 128): ...`; the job defaults table's row).
        kept_step: The step whose weights the adapter holds when the job rolled back to a better evaluated
            state than its last (`early_stop.rollback`); None when it kept the last.
        kept_reason: Why, in words (known facts broken and targets fixed there and at the end).
        adapter_scale: The share of the trained LoRA delta the adapter holds (`trainer.adapter_scale`; 1.0: all).
        adapter_scale_reason: Why that scale (given by the spec, or the `auto` rule with its targets fixed).
        method: sft | dpo | grpo | staged.
        stages: A staged job's stages, in order, each its own result as a mapping (its method under `method`);
            empty for a job of one method.
    """

    job_id: str
    status: Status
    output_dir: str
    adapter: str | None
    steps: int
    final_loss: float | None
    heldout_before: float | None
    heldout_after: float | None
    resumed_from: str | None
    stop_reason: str | None
    message: str
    seconds: float
    known_checked: int = 0
    known_broken: list[str] = dataclasses.field(default_factory=list)
    learning_rate: float | None = None
    max_steps_rule: str | None = None
    learning_rate_rule: str | None = None
    size_rule: str | None = None
    kept_step: int | None = None
    kept_reason: str | None = None
    adapter_scale: float = 1.0
    adapter_scale_reason: str | None = None
    known_right_before: list[str] = dataclasses.field(default_factory=list)
    method: str | None = None
    stages: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def known_broken_fraction(self) -> float | None:
        """Broken known facts over those checked; None when none was checked."""
        return len(self.known_broken) / self.known_checked if self.known_checked else None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "known_broken_fraction": self.known_broken_fraction}

    def protection_notes(self) -> list[str]:
        """What the adapter holds when it is not simply the last step's weights (rollback, a scaled delta), in
        words: `workbench train` and the app's job view print these lines."""
        notes = []
        if self.kept_step is not None:
            notes.append(f"rolled back to step {self.kept_step}"
                         + (f": {self.kept_reason}" if self.kept_reason else ""))
        if self.adapter_scale != 1.0 or self.adapter_scale_reason:
            notes.append(f"adapter scale {self.adapter_scale:g}"
                         + (f": {self.adapter_scale_reason}" if self.adapter_scale_reason else ""))
        return notes

    def summary_lines(self) -> list[str]:
        """The job's summary as `workbench train` and `workbench fix --train` print it: status, the settings'
        rules (what the job took by default, and why), held-out scores, broken known facts by id, the protection
        notes, the adapter."""
        lines = [f"job {self.job_id}: {self.status} after {self.steps} steps ({self.seconds} s): {self.message}"]
        lines += [f"  stage {i} ({st.get('method')}): {st.get('status')} after {st.get('steps')} steps, "
                  f"{len(st.get('known_broken') or [])} of {st.get('known_checked', 0)} known facts broken: "
                  f"{st.get('message')}" for i, st in enumerate(self.stages, 1)]
        rules = [r for r in (self.size_rule, self.max_steps_rule and f"max_steps {self.max_steps_rule}",
                             self.learning_rate_rule and f"learning rate {self.learning_rate_rule}") if r]
        if rules:
            lines.append("  settings: " + "; ".join(rules))
        if self.heldout_before is not None or self.heldout_after is not None:
            lines.append(f"  held-out score {self.heldout_before} -> {self.heldout_after}")
        if self.known_checked:
            ids = ", ".join(self.known_broken[:10]) + (" ..." if len(self.known_broken) > 10 else "")
            lines.append(f"  known facts broken: {len(self.known_broken)} of {self.known_checked} "
                         f"({100 * (self.known_broken_fraction or 0):.1f}%)" + (f": {ids}" if ids else ""))
        elif self.adapter:  # said, never left out: a job that checked no known fact cannot say what it broke
            lines.append("  WARNING: no known fact was checked (the fix set holds out none the base model answers "
                         "right): gate the adapter with `workbench regress`, which evaluates the model's guard set")
        lines += [f"  {note}" for note in self.protection_notes()]
        if self.adapter:
            lines.append(f"  adapter: {self.adapter}")
        return lines


def write_result(result: JobResult, output_dir: str | Path) -> Path:
    """`output_dir/result.json`, replaced atomically (a reader never sees half of it)."""
    path = Path(output_dir) / RESULT_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    os.replace(tmp, path)
    return path


def read_result(output_dir: str | Path) -> JobResult | None:
    """The result a job wrote into `output_dir`, or None when it wrote none (it died or never ended)."""
    path = Path(output_dir) / RESULT_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    known = {f.name for f in dataclasses.fields(JobResult)}
    return JobResult(**{k: v for k, v in data.items() if k in known})

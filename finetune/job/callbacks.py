"""Watchdogs as transformers `TrainerCallback`s shared by every method: NaN/inf stop, loss spikes, early
stopping on a held-out score.

Each one reports through `report(kind, message, data)` (the job writes it to `job_events`) and
stops training by setting `control.should_training_stop`. `MetricsRecorder` writes every logged
value to `job_metrics`.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from workbench.grading.normalize import normalize
from workbench.textgen import cut_at_stop, greedy_generate

Report = Callable[[str, str, dict[str, Any]], None]
#: The early stop's state in a checkpoint (EarlyStopping.save), for --resume.
EARLY_STOP_FILE = "early_stop.json"


@dataclass
class StopReason:
    """Why a watchdog stopped training (kind: nan | early_stop | collapse | known_broken, or a method's own)."""

    kind: str
    message: str
    step: int


class MetricsRecorder(TrainerCallback):
    """Every numeric value of every log call, keyed by step."""

    def __init__(self, record: Callable[[int, Mapping[str, float]], None]) -> None:
        self.record = record

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs:
            self.record(state.global_step, {k: float(v) for k, v in logs.items()
                                            if isinstance(v, int | float) and not isinstance(v, bool)})


class TimedCheckpoints(TrainerCallback):
    """A checkpoint after every `minutes` of training (besides the step-based ones): asks the trainer to save at
    the end of the first step past the interval; any save, step-based or timed, starts the interval again. Never
    on the last step (the adapter is written then) nor on a step that stops training.

    Off under several processes (`WORLD_SIZE` > 1): each rank reads its own clock, ranks could decide on different
    steps, and a save is collective there (DeepSpeed gathers the weights), so it would hang; `checkpoint_every`,
    the same on every rank, applies there."""

    def __init__(self, minutes: float, clock: Callable[[], float] = time.monotonic,
                 world_size: int | None = None) -> None:
        ranks = int(os.environ.get("WORLD_SIZE", "1")) if world_size is None else world_size
        self.seconds, self.clock = (minutes * 60.0 if ranks <= 1 else 0.0), clock
        self.last = clock()

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        self.last = self.clock()  # model loading and the before-scores are not training time

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        if (self.seconds > 0 and self.clock() - self.last >= self.seconds and state.global_step < state.max_steps
                and not control.should_training_stop):
            control.should_save = True

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        self.last = self.clock()


class LossWatchdog(TrainerCallback):
    """NaN/inf loss or gradient norm -> `nan` event and stop; loss > factor x running median -> `spike`.

    Needs `logging_nan_inf_filter=False` in the training arguments, or the trainer hides NaN losses.
    """

    def __init__(self, report: Report, *, stop_on_nan: bool = True, spike_factor: float = 5.0,
                 window: int = 20, min_steps: int = 5) -> None:
        self.report, self.stop_on_nan = report, stop_on_nan
        self.spike_factor, self.min_steps = spike_factor, min_steps
        self.history: deque[float] = deque(maxlen=window)
        self.stopped: StopReason | None = None

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or "loss" not in logs:
            return
        step = state.global_step
        loss = float(logs["loss"])
        grad = logs.get("grad_norm")
        bad = [name for name, v in (("loss", loss), ("grad_norm", grad))
               if isinstance(v, int | float) and not math.isfinite(float(v))]
        if bad:
            msg = (f"non-finite {' and '.join(bad)} at step {step} (loss={loss}, grad_norm={grad}); "
                   "lower trainer.learning_rate, check the fix set for empty rows, or keep bf16 off on CPU")
            self.report("nan", msg, {"step": step, "loss": str(loss), "grad_norm": str(grad)})
            if self.stop_on_nan:
                self.stopped = StopReason("nan", msg, step)
                control.should_training_stop = True
                control.should_save = False  # a checkpoint of NaN weights would rotate a good one out
            return
        if self.spike_factor > 0 and len(self.history) >= self.min_steps:
            median = statistics.median(self.history)
            if median > 0 and loss > self.spike_factor * median:
                self.report("spike", f"loss {loss:.4g} at step {step} is {loss / median:.1f}x the running "
                            f"median {median:.4g}", {"step": step, "loss": loss, "median": median})
        self.history.append(loss)


@dataclass(frozen=True)
class HeldoutRow:
    """One held-out prompt and the answer the fix teaches for it (completion without its stop string)."""

    prompt: str
    target: str


def heldout_rows(rows: Sequence[Mapping[str, Any]], field: str, stop: Sequence[str]) -> list[HeldoutRow]:
    """Held-out rows with their target: the row's `field` (completion or chosen) as the evaluation would
    return it, without the leading space and the stop string."""
    return [HeldoutRow(str(r["prompt"]), cut_at_stop(str(r[field]).strip(), stop)[0].strip()) for r in rows]


def heldout_accuracy(model: Any, tokenizer: Any, rows: Sequence[HeldoutRow], stop: Sequence[str],
                     *, batch: int = 64) -> float:
    """Share of rows whose greedy completion, cut at the first stop string, matches the target
    (normalized), exactly as the evaluation grades a single accepted answer."""
    if not rows:
        return float("nan")
    hits = 0
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        longest = max(len(tokenizer(" " + r.target, add_special_tokens=False)["input_ids"]) for r in chunk)
        texts = greedy_generate(model, tokenizer, [r.prompt for r in chunk], longest + 2, batch=batch)
        hits += sum(normalize(cut_at_stop(text, stop)[0]) == normalize(r.target)
                    for r, text in zip(chunk, texts, strict=True))
    return hits / len(rows)


class EarlyStopping(TrainerCallback):
    """The held-out score (`score(model)`, logged as `metric`) every `eval_every` steps and at the start;
    stop after `patience` evaluations without improvement. For DPO, also stop when the logged chosen
    log-prob falls `collapse_nats` below its start (the model is pushing probability away from the right
    answers too). Each method gives its own score (finetune/job/method.py).

    The chosen log-prob is compared over `collapse_window` logged values (DPO: one epoch): the mean of the
    first window against the mean of the latest, at each window's end. A logged value is one batch's, summed
    over its chosen tokens, so it moves with the batch's rows (short "I don't know." or a sentence): on SmolLM2
    at batch 8 it swung 3-5 nats from batch to batch (seed 0: -14.1, -8.9, -12.0, -8.3, ... while it rose to
    about -3 by step 20), and seed 1's first two batches, -6.15 then -13.49, read step against step as a 7.3-nat
    collapse at step 2 of a healthy job. An epoch's batches hold every row once, so two epochs' means differ by
    what the model learned, not by which rows they drew."""

    def __init__(self, report: Report, record: Callable[[int, Mapping[str, float]], None], *,
                 score: Callable[[Any], float], metric: str, has_rows: bool, eval_every: int, patience: int,
                 min_delta: float, use_score: bool = True, collapse_nats: float | None = None) -> None:
        self.report, self.record, self.score, self.metric = report, record, score, metric
        self.has_rows = has_rows
        self.eval_every, self.patience, self.min_delta = eval_every, patience, min_delta
        self.use_score = use_score and eval_every > 0 and has_rows
        self.collapse_nats = collapse_nats
        self.collapse_window = 1
        self.collapse_hint = "lower trainer.learning_rate"
        self.logps: list[float] = []
        self.best = -math.inf
        self.bad_evals = 0
        self.history: list[tuple[int, float]] = []
        self.stopped: StopReason | None = None
        self.restored = False  # the state came from a checkpoint: training goes on from there

    def save(self, folder: Path) -> None:
        """The state a resumed job needs to decide as an uninterrupted one (the best score, the evaluations
        without improvement, the DPO log-probs): into a checkpoint being staged."""
        data = {"best": self.best if math.isfinite(self.best) else None, "bad_evals": self.bad_evals,
                "history": self.history, "logps": self.logps}
        (folder / EARLY_STOP_FILE).write_text(json.dumps(data) + "\n")

    def restore(self, folder: Path) -> bool:
        """The state `save` wrote into checkpoint `folder`; False where there is none (an older checkpoint)."""
        path = folder / EARLY_STOP_FILE
        if not path.is_file():
            return False
        data = json.loads(path.read_text())
        self.best = -math.inf if data["best"] is None else float(data["best"])
        self.bad_evals = int(data["bad_evals"])
        self.history = [(int(step), float(v)) for step, v in data["history"]]
        self.logps = [float(v) for v in data["logps"]]
        self.restored = True
        return True

    def evaluate(self, model: Any, step: int) -> float:
        value = self.score(model)
        self.history.append((step, value))
        self.record(step, {self.metric: value})
        return value

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       model: Any = None, **kwargs: Any) -> None:
        if self.use_score and model is not None and not self.restored:
            self.best = self.evaluate(model, state.global_step)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    model: Any = None, **kwargs: Any) -> None:
        step = state.global_step
        if not self.use_score or model is None or step % self.eval_every:
            return
        acc = self.evaluate(model, step)
        if acc > self.best + self.min_delta:
            self.best, self.bad_evals = acc, 0
            return
        self.bad_evals += 1
        if self.bad_evals >= self.patience:
            what = self.metric.replace("heldout_", "held-out ").replace("_", " ")
            msg = (f"{what} has not improved for {self.bad_evals} evaluations "
                   f"(best {self.best:.3f}, now {acc:.3f}) at step {step}")
            self.report("early_stop", msg, {"step": step, "best": self.best, "last": acc})
            self.stopped = StopReason("early_stop", msg, step)
            control.should_training_stop = True

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.collapse_nats is None or not logs or "logps/chosen" not in logs:
            return
        logp = float(logs["logps/chosen"])
        if not math.isfinite(logp):
            return
        self.logps.append(logp)
        w = self.collapse_window
        if len(self.logps) < 2 * w or len(self.logps) % w:  # whole epochs only
            return
        start, now = statistics.fmean(self.logps[:w]), statistics.fmean(self.logps[-w:])
        if now < start - self.collapse_nats:
            over = f" (mean of {w} logged batches)" if w > 1 else ""
            msg = (f"DPO chosen log-prob collapsed: {now:.2f} at step {state.global_step}{over}, "
                   f"{start - now:.2f} nats below its start {start:.2f} "
                   f"(limit {self.collapse_nats}); {self.collapse_hint}")
            self.report("collapse", msg, {"step": state.global_step, "start": start, "now": now, "window": w})
            self.stopped = StopReason("collapse", msg, state.global_step)
            control.should_training_stop = True

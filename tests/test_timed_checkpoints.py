"""Time-based checkpoints (`checkpoint_minutes`, finetune/job/callbacks.py TimedCheckpoints) on a fake clock: the
first step past the interval asks for a save, any save starts the interval again, the last step never does (the
adapter is written then), and 0 turns it off. The kill-and-resume from a timed checkpoint: tests/test_resume.py."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from transformers import TrainerControl, TrainerState, TrainingArguments

from finetune.job.callbacks import TimedCheckpoints
from finetune.job.spec import CHECKPOINT_MINUTES, JobSpec


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _steps(cb: TimedCheckpoints, clock: Clock, seconds_per_step: float, steps: int) -> list[int]:
    """The steps at which the callback asked for a save (the trainer then saves and calls on_save)."""
    args, state, saved = cast(TrainingArguments, None), TrainerState(), []  # the callback reads no argument
    state.max_steps = steps
    cb.on_train_begin(args, state, TrainerControl())
    for step in range(1, steps + 1):
        clock.now += seconds_per_step
        state.global_step = step
        control = TrainerControl()
        cb.on_step_end(args, state, control)
        if control.should_save:
            saved.append(step)
            cb.on_save(args, state, control)
    return saved


def test_a_save_after_each_interval_of_training_never_on_the_last_step() -> None:
    clock = Clock()
    assert _steps(TimedCheckpoints(1.0, clock), clock, 25.0, 12) == [3, 6, 9]  # 75 s >= 60 s, then again
    clock = Clock()
    assert _steps(TimedCheckpoints(1.0, clock), clock, 60.0, 2) == [1]  # step 2 is the last: the adapter is saved


def test_loading_before_training_is_not_counted_and_zero_is_off() -> None:
    clock = Clock()
    cb = TimedCheckpoints(1.0, clock)
    clock.now = 500.0  # model loading and the before-scores
    assert _steps(cb, clock, 10.0, 5) == []
    clock = Clock()
    assert _steps(TimedCheckpoints(0.0, clock), clock, 1000.0, 5) == []


def test_jobs_checkpoint_by_time_by_default() -> None:
    spec = JobSpec(fixset="f", output_dir="o")
    assert spec.checkpoint_every == 0 and spec.checkpoint_minutes == CHECKPOINT_MINUTES > 0
    assert "checkpoint_minutes: 10.0" in spec.to_yaml()


def test_no_timed_save_on_a_stopping_step_nor_under_several_processes() -> None:
    clock = Clock()
    cb = TimedCheckpoints(1.0, clock)
    state, control = TrainerState(), TrainerControl()
    state.max_steps, state.global_step = 10, 5
    cb.on_train_begin(cast(TrainingArguments, None), state, control)
    clock.now = 120.0
    control.should_training_stop = True  # a watchdog stopped it: the adapter (or the rollback) decides, not a save
    cb.on_step_end(cast(TrainingArguments, None), state, control)
    assert not control.should_save
    clock = Clock()  # ranks read their own clocks: a save decided on one would hang the others
    assert _steps(TimedCheckpoints(1.0, clock, world_size=2), clock, 100.0, 5) == []


def test_the_early_stop_state_travels_in_a_checkpoint(tmp_path: Path) -> None:
    """A job resumed from a checkpoint (timed ones are on by default) keeps its early stop's best score and patience
    instead of scoring again from the resumed weights: it stops where an uninterrupted job would."""
    from finetune.job.callbacks import EarlyStopping

    scores = iter([0.5, 0.4, 0.45])

    def make() -> EarlyStopping:
        return EarlyStopping(lambda *a: None, lambda *a: None, score=lambda m: next(scores), metric="heldout_acc",
                             has_rows=True, eval_every=1, patience=2, min_delta=0.0)

    args, state, control = cast(TrainingArguments, None), TrainerState(), TrainerControl()
    first = make()
    first.on_train_begin(args, state, control, model=object())
    state.global_step = 1
    first.on_step_end(args, state, control, model=object())  # 0.4: one evaluation without improvement
    first.save(tmp_path)
    resumed = make()
    assert resumed.restore(tmp_path) and (resumed.best, resumed.bad_evals) == (0.5, 1)
    resumed.on_train_begin(args, state, control, model=object())  # no fresh score: 0.45 is still to come
    state.global_step = 2
    resumed.on_step_end(args, state, control, model=object())  # 0.45 < best 0.5: the second, so it stops
    assert control.should_training_stop and resumed.stopped is not None
    assert not make().restore(tmp_path / "missing")

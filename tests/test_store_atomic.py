"""Ctrl-C or SIGTERM between a store write and its commit: the write completes, the interrupt is raised after it,
and no transaction is left open to lock out the writes of the code that handles the interrupt (a run marked
interrupted). Before, that mark waited out SQLite's 30 s busy timeout, and a SIGTERM'd `workbench eval` outlived
its own time to unwind."""

from __future__ import annotations

import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from sqlalchemy import event, func, select

from workbench.store import Store
from workbench.store.atomic import held_signals
from workbench.store.schema import answers, runs


class Stop(KeyboardInterrupt):
    """What this test's SIGTERM handler raises, as the CLI's raises `Terminated`."""


def _answer(i: int) -> dict[str, Any]:
    return {"probe_id": f"p{i}", "variant": "q", "kind": "greedy", "sample_index": 0, "prompt": "Q?", "text": "A",
            "verdict": "correct", "mean_logprob": None, "finish_reason": "stop", "engine": "e", "graded_by": None}


@pytest.fixture(autouse=True)
def ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C raising KeyboardInterrupt, as in a terminal: a process started in the background (`nohup`, `cmd &`)
    begins with SIGINT ignored, and then neither the hold nor the raise happens."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "ws")
    yield s
    s.engine.dispose()


def _run(store: Store) -> str:
    return store.create_run(model="m", adapter=None, backend="hf", fingerprint="f", suite="s", suite_config={},
                            options={}, n_probes=1, skipped_bad=0)


def _interrupt_after_each_insert(store: Store, signum: int) -> None:
    """Deliver `signum` to this process right after the driver ran an INSERT: inside the open transaction."""
    def fire(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            signal.raise_signal(signum)
    event.listen(store.engine, "after_cursor_execute", fire)


def _write_lock_is_free(store: Store) -> bool:
    """Whether another connection takes the write lock at once (an open transaction of ours would hold it)."""
    c = sqlite3.connect(store.workspace / "store.sqlite", timeout=0.2)
    try:
        c.execute("BEGIN IMMEDIATE")
        c.rollback()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        c.close()


def test_ctrl_c_inside_a_write_is_raised_after_its_commit(store: Store) -> None:
    run_id = _run(store)
    _interrupt_after_each_insert(store, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        store.add_answers(run_id, [_answer(i) for i in range(3)])
    with store.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(answers)).scalar_one() == 3  # the write completed
    assert _write_lock_is_free(store)
    # and so the handler's own write goes through at once, as the runner's `interrupted` mark does
    store.finish_run(run_id, status="interrupted", metrics=None, generated=0, cached=0)
    with store.engine.connect() as c:
        assert c.execute(select(runs.c.status)).scalar_one() == "interrupted"


def test_sigterm_runs_the_handler_in_place_after_the_write(store: Store) -> None:
    run_id = _run(store)
    seen: list[int] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)
        raise Stop()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        _interrupt_after_each_insert(store, signal.SIGTERM)
        with pytest.raises(Stop):
            store.add_answers(run_id, [_answer(0)])
        assert seen == [signal.SIGTERM]  # the handler that was in place, once
        assert signal.getsignal(signal.SIGTERM) is on_term  # and it is in place again
    finally:
        signal.signal(signal.SIGTERM, previous)
    with store.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(answers)).scalar_one() == 1
    assert _write_lock_is_free(store)


def test_a_nested_block_holds_once_and_the_outer_one_raises() -> None:
    outer = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with held_signals():
            with held_signals():
                signal.raise_signal(signal.SIGINT)
            inner_done = True  # the inner block's end raised nothing: the outer block holds it
        pytest.fail("the held Ctrl-C was not raised")  # pragma: no cover
    assert inner_done
    assert signal.getsignal(signal.SIGINT) is outer


def test_an_error_inside_rolls_back_and_the_signal_still_comes(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(KeyboardInterrupt) as raised, store.write() as c:
        c.execute(answers.insert().values(run_id=run_id, **_answer(0)))
        signal.raise_signal(signal.SIGINT)
        raise ValueError("the block failed")
    assert isinstance(raised.value.__context__, ValueError)  # the block's own error is not lost
    with store.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(answers)).scalar_one() == 0
    assert _write_lock_is_free(store)


def test_sigterm_wins_over_ctrl_c_and_a_second_ctrl_c_is_not_held() -> None:
    """Both held: SIGTERM is handled (its exit code, 143); Ctrl-C twice gets out of a block at once (a write whose
    lock never comes must stay escapable)."""
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise Stop()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        with pytest.raises(Stop), held_signals():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)
        reached = []
        with pytest.raises(KeyboardInterrupt), held_signals():
            signal.raise_signal(signal.SIGINT)
            reached.append("held")
            signal.raise_signal(signal.SIGINT)
            reached.append("past the second")  # pragma: no cover
        assert reached == ["held"]
        assert signal.getsignal(signal.SIGTERM) is on_term
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_write_off_the_main_thread_holds_nothing_and_commits(store: Store) -> None:
    """The app writes from worker threads, where Python can neither set a handler nor run one."""
    run_id = _run(store)
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    errors: list[BaseException] = []

    def write() -> None:
        try:
            store.add_answers(run_id, [_answer(7)])
        except BaseException as e:  # handed to the test's thread
            errors.append(e)

    t = threading.Thread(target=write)
    t.start()
    t.join(30)
    assert not errors and not t.is_alive()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    with store.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(answers)).scalar_one() == 1

"""Known third-party noise (workbench/quiet.py) is filtered where it comes from, and only there: each listed message
from its own package is dropped, the same words from the project (or another message of that package) still show.
A GRPO job, as a user runs it (`workbench fix --train`, and the job process of the subprocess launcher), prints no
TRL vLLM version notice."""

from __future__ import annotations

import importlib.util
import logging
import warnings
from pathlib import Path

import pytest
from clirun import ENV, workbench
from ftworld import FtWorld

from workbench.quiet import KNOWN_NOISE, quiet_known_noise

TRL_NOTICE = ("TRL currently supports vLLM versions from 0.22.0 to 0.31.0. You have version 0.32.0 installed. We "
              "recommend installing a supported version to avoid compatibility issues.")
TRITON = "Triton is installed, but doesn't include CPU backend. Disabling Triton."
#: (message as printed, the module it is attributed to) of every listed warning.
WARNED = [(TRL_NOTICE, "trl.generation.vllm_client"),
          ("'future.no_silent_downcasting' is deprecated, please refrain from using it.", "gradio.queueing"),
          ("The copy keyword is deprecated and will be removed in a future version.", "gradio.queueing")]


def _shown(message: str, module: str) -> bool:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_known_noise()
        warnings.warn_explicit(message, UserWarning, "x.py", 1, module=module)
    return bool(seen)


@pytest.mark.parametrize(("message", "module"), WARNED)
def test_each_known_warning_is_dropped_from_its_source_only(message: str, module: str) -> None:
    assert not _shown(message, module)
    assert _shown(message, "workbench.backends.vllm")  # the same words from the project still show
    assert _shown("something else went wrong", module)  # and the package's other warnings too


def test_the_listed_log_line_is_dropped_and_other_records_are_not() -> None:
    quiet_known_noise()
    quiet_known_noise()  # twice: still one filter
    logger = logging.getLogger("vllm.triton_utils.importing")
    assert len(logger.filters) == 1
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    # A handler on the logger itself: once vLLM is imported its loggers do not propagate to the root (caplog's).
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        logger.warning(TRITON)
        logger.warning("Triton failed to compile a kernel")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert seen == ["Triton failed to compile a kernel"]
    assert all(n.why and n.message and n.source for n in KNOWN_NOISE)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                    reason="without vLLM installed TRL prints no version notice to filter")
def test_a_grpo_job_prints_no_trl_vllm_notice(w: FtWorld, tmp_path: Path) -> None:
    ws = str(w.store.workspace)
    proc = workbench("fix", w.run_id, "--out", str(tmp_path / "fix"), "--workspace", ws, "--strategy", "rl",
                     "--train", "--steps", "1", timeout=300, fresh=True)  # the notice comes at import
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "TRL currently supports vLLM" not in proc.stderr and TRITON not in proc.stderr, proc.stderr[-2000:]

    job = tmp_path / "job.yaml"  # the job process of the subprocess launcher is an entry point of its own
    job.write_text(f"fixset: {tmp_path / 'fix'}\nmethod: grpo\noutput_dir: {tmp_path / 'job'}\nworkspace: {ws}\n"
                   "trainer: {max_steps: 1}\nlauncher: {kind: subprocess}\n")
    proc = workbench("train", str(job), "--force", env=ENV, timeout=300)  # the job process is fresh either way
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = (tmp_path / "job" / "job.log").read_text()
    assert "job " in log and "TRL currently supports vLLM" not in log and TRITON not in log, log[-2000:]

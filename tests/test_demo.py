"""`make demo` is the main job: the whole loop (world, eval, attribute, one staged fix job, its gate) run at a small
size through the CLI, checked by what it prints and leaves in the store; `--methods` compares the methods alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clirun import assert_refused, workbench

from workbench.gating import history
from workbench.store import Store


@pytest.mark.slow
def test_demo_runs_the_whole_loop(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    proc = workbench("demo", "--workspace", str(ws), "--entities", "24", "--samples", "2", "--steps", "3", "--threads",
                     "1", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # one candidate, one decision: the staged fix (sft then dpo on one adapter), gated, its fixes per category said
    assert "gate staged:" in proc.stdout and "gate sft:" not in proc.stdout
    assert re.search(r"staged: fixed \d+ of the \d+ failures a fix can reach \(", proc.stdout)
    gates = history(Store.open(ws))
    assert len(gates) == 1 and gates[0]["adapter"] and Path(gates[0]["report"]).is_file()
    job = Path(gates[0]["adapter"]).parent
    assert job.name == "staged" and [p.name for p in sorted((job / "stages").iterdir())] == ["1-sft", "2-dpo"]
    # the lines the quickstart shows, as this run printed them
    from docshow import DOCS, assert_shows, fenced, sections

    (shown,) = fenced(sections(DOCS / "getting-started" / "quickstart.md")["The synthetic world: `make demo`"], "text")
    assert_shows(shown.splitlines(), proc.stdout, {".workbench": str(ws)}, wrapped=True)


@pytest.mark.parametrize(("args", "needle"), [
    (["--methods", "sft,sfd"], "`--methods` (method) must be one of sft, dpo, grpo, staged, got `sfd`"),
    (["--steps", "0"], "`--steps` (trainer.max_steps) must be >= 1"),
])
def test_demo_refuses_a_bad_fix_job_option_before_the_world(tmp_path: Path, args: list[str], needle: str) -> None:
    """Refused up front, by the job spec's own checks: at step 4 a typo cost the world's training, the evaluation and
    the attribution first (5 min at the default size). The limit is far below that."""
    ws = tmp_path / "ws"
    proc = workbench("demo", "--workspace", str(ws), *args, timeout=60)
    assert_refused(proc, "demo, the fix job: ", needle)
    assert not ws.exists()  # nothing built


def test_demo_compares_the_methods_alone_on_request() -> None:
    """`--methods sft,dpo,grpo`: one job per method (the comparison the staged default replaced), each a valid job."""
    import argparse

    from hallucination_workbench.demo import _check_jobs

    _check_jobs(argparse.Namespace(methods="sft,dpo,grpo,staged", steps=None))

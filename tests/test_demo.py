"""`make demo` is the main job: the whole loop (world, eval, attribute, the three fix jobs, gates) run at a
small size through the CLI, checked by what it leaves in the store."""

from __future__ import annotations

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
    for method in ("sft", "dpo", "grpo"):
        assert f"gate {method}:" in proc.stdout
    gates = history(Store.open(ws))
    assert len(gates) == 3 and len({g["adapter"] for g in gates}) == 3
    assert all(g["adapter"] and Path(g["report"]).is_file() for g in gates)
    assert {Path(g["adapter"]).parent.name for g in gates} == {"sft", "dpo", "grpo"}
    # the lines the quickstart shows, as this run printed them
    from docshow import DOCS, assert_shows, fenced, sections

    (shown,) = fenced(sections(DOCS / "getting-started" / "quickstart.md")["The synthetic world: `make demo`"], "text")
    assert_shows(shown.splitlines(), proc.stdout, {".workbench": str(ws)}, wrapped=True)


@pytest.mark.parametrize(("args", "needle"), [
    (["--methods", "sft,sfd"], "`--methods` (method) must be one of sft, dpo, grpo, got `sfd`"),
    (["--steps", "0"], "`--steps` (trainer.max_steps) must be >= 1"),
])
def test_demo_refuses_a_bad_fix_job_option_before_the_world(tmp_path: Path, args: list[str], needle: str) -> None:
    """Refused up front, by the job spec's own checks: at step 4 a typo cost the world's training, the evaluation and
    the attribution first (5 min at the default size). The limit is far below that."""
    ws = tmp_path / "ws"
    proc = workbench("demo", "--workspace", str(ws), *args, timeout=60)
    assert_refused(proc, "demo, the fix job: ", needle)
    assert not ws.exists()  # nothing built

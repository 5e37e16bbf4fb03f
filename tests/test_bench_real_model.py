"""bench/real_model.py without the real model: its argument parsing as a user runs it (a subprocess with a hard
time limit: `--help`, and bad values refused with exit 2 before any model loads), and `throughput --ablate`'s
decode-loop ablation on the test world's tiny model, loading the model once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchload import load_bench
from clirun import ENV

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "real_model.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, env=ENV, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("what", "option"), [("fix", "--scales"), ("jobs", "--settings"),
                                              ("throughput", "--ablate")])
def test_help_of_each_measurement(what: str, option: str) -> None:
    proc = _run(what, "--help")
    assert proc.returncode == 0, proc.stderr
    assert option in proc.stdout


@pytest.mark.parametrize(("args", "needle"), [
    (("fix", "--lr", "rule,abc"), "--lr: each value must be `rule` or a positive number, got `abc`"),
    (("fix", "--lr", "0"), "got `0`"),
    (("fix", "--scales", "1,1.5"), "--scales: each value must be `auto` or a number in (0, 1], got `1.5`"),
    (("fix", "--scales", "nan"), "got `nan`"),
    (("fix", "--method", "grpo"), "invalid choice: 'grpo'"),
    (("jobs", "--workspace", "ws", "--settings", "cli,qv4"), "--settings: unknown setting `qv4`; one of cli, world"),
    (("jobs", "--workspace", "ws", "--seeds", "0,x"), "--seeds: each value must be a non-negative integer, got `0,x`"),
    (("jobs", "--workspace", "ws", "--seeds", "-1"), "got `-1`"),
    (("jobs", "--settings", "cli"), "the following arguments are required: --workspace"),
    (("throughput", "--dtype", "float16"), "invalid choice: 'float16'"),
    (("throughput", "--questions", "many"), "--questions: invalid int value"),
    (("throughput", "--no-such-option"), "unrecognized arguments: --no-such-option"),
])
def test_bad_arguments_exit_2_before_any_work(args: tuple[str, ...], needle: str) -> None:
    proc = _run(*args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_jobs_names_a_workspace_without_a_fix_run(tmp_path: Path) -> None:
    """`jobs` on a workspace no `fix` run left: one line naming the workspace and what it lacks, no traceback."""
    proc = _run("jobs", "--workspace", str(tmp_path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"{tmp_path}: expected one fix-real/RUN/fixset (a `fix` run's workspace), found 0" in proc.stderr


def test_ablation_runs_on_the_backend_that_rendered_the_prompts(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM

    from workbench.backends.hf import HFBackend
    from workbench.types import ModelSpec

    loads: list[str] = []
    real = AutoModelForCausalLM.from_pretrained

    def counted(*a: Any, **k: Any) -> Any:
        loads.append(str(a[0]))
        return real(*a, **k)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", counted)
    backend = HFBackend(ModelSpec(model=str(world.model), dtype="float32"))
    prompts = ["Q: Where was Alba Moreno born?\nA:", "Q: What does Tomas Berg do?\nA:"]
    backend.tokenizer  # noqa: B018 - loads the model, as rendering a chat prompt does
    out = load_bench("real_model").ablate(backend, prompts, samples=2, max_tokens=4, rounds=1)
    assert len(loads) == 1  # the ablation reused the loaded model
    assert set(out["seconds"]) == {"loop (all savings)", "loop, prefill per answer", "loop, finished rows kept",
                                   "loop, neither", "loop, no log-probs"}
    assert all(len(v) == 1 for v in out["seconds"].values())
    # the full loop prefills each distinct prompt once for its greedy and sampled answers (LoopSavings)
    assert out["profile"]["prefill_rows"] == len(prompts)

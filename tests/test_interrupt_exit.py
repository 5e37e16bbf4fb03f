"""SIGTERM while a real model is generating: the command exits 143 (never 134, a C++ abort), says that finished
generations are kept, keeps every finished answer, and `eval --resume` generates only the rest.

The abort this guards against: the batch runs in the stall watchdog's thread, inside torch, when the interpreter
finalizes; Python ends that thread with pthread_exit, and unwinding torch's C++ frames that way aborts
("terminate called without an active exception", exit 134). It is a race that the thread wins when it is inside a
torch operation (GIL released) rather than in Python: on the test world's 64-wide model 2 of 5 SIGTERMs aborted,
on the 1024-wide model made here from it (random weights, its tokenizer; 129 MB) 4 of 4 did with 16 samples and
32 tokens, and this test's first round did with 8 and 8 (measured before the fix). Three rounds, each a resume of
the same run, make a pass without the fix all but impossible.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from clirun import ENV, finish, run_workbench, start
from sqlalchemy import func, select

from workbench.store import Store
from workbench.store.schema import answers, runs

ROUNDS = 3
SAMPLES = 8
#: Probes of the run: each round cuts a batch or two (one prompt each), so 24 leave most of the run for the final
#: resume, as the world's 96 did, at a quarter of its generation time (that resume is most of this test's time).
PROBES = 24
#: One prompt a batch (9 answers), 8 tokens: several batches a round, most of the run left for the final resume.
GENERATION = ["--samples", str(SAMPLES), "--max-tokens", "8", "--backend-option", "batch_size=1", "--json"]


@pytest.fixture(scope="module")
def wide_model(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The world model's config widened to 1024 (8 heads, 4096 MLP), random weights, the world's tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    src, dst = Path(world.model), tmp_path_factory.mktemp("wide")
    cfg = AutoConfig.from_pretrained(src)
    cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = (
        1024, 4096, 8, 8, 128)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(dst)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(src / name, dst / name)
    return dst


@pytest.fixture(scope="module")
def suite(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The world's suite on its first PROBES probes."""
    src, dst = Path(world.suite), tmp_path_factory.mktemp("suite")
    shutil.copy(src, dst / src.name)
    probes = (src.parent / "probes.jsonl").read_text().splitlines()
    (dst / "probes.jsonl").write_text("\n".join(probes[:PROBES]) + "\n")
    return dst / src.name


def _stored(ws: Path) -> tuple[int, str | None]:
    """(answers stored, the run's status) of the workspace's only run; (0, None) before it exists."""
    if not (ws / "store.sqlite").exists():
        return 0, None
    with Store.open(ws).engine.connect() as c:
        n = int(c.execute(select(func.count()).select_from(answers)).scalar_one())
        status = c.execute(select(runs.c.status)).scalar()
    return n, status


def _run(ws: Path) -> tuple[str, int]:
    """(id, number of probes) of the workspace's only run."""
    with Store.open(ws).engine.connect() as c:
        run_id, n_probes = c.execute(select(runs.c.id, runs.c.n_probes)).one()
    return str(run_id), int(n_probes)


@pytest.mark.slow  # over 20 s on 2 cores
def test_sigterm_mid_generation_exits_143_keeping_finished_answers(suite: Path, wide_model: Path,
                                                                   tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    first = ["eval", "--model", str(wide_model), "--probes", str(suite), "--workspace", str(ws), *GENERATION]
    kept = 0
    for round_ in range(ROUNDS):
        args = first if round_ == 0 else ["eval", "--resume", _run(ws)[0], "--workspace", str(ws), "--json"]
        proc = start(args, ENV)
        deadline = time.monotonic() + 240
        # a batch of this round committed: the next one is generating now
        while proc.poll() is None and time.monotonic() < deadline and _stored(ws)[0] <= kept:
            time.sleep(0.02)
        assert proc.poll() is None, f"round {round_}: the command ended before SIGTERM: {proc.communicate()}"
        time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        done = finish(proc, timeout=120)
        assert done.returncode == 143, (round_, done.returncode, done.stderr[-2000:])
        assert "interrupted; finished generations are kept in the cache" in done.stderr
        assert "terminate called" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
        n, status = _stored(ws)
        assert status == "interrupted" and n > kept, (round_, status, n, kept)
        kept = n
    run_id, n_probes = _run(ws)
    assert n_probes == PROBES
    rest = run_workbench(["eval", "--resume", run_id, "--workspace", str(ws), "--json"], timeout=300)
    assert rest.returncode == 0, rest.stderr[-2000:]
    summary = json.loads(rest.stdout)
    total = n_probes * (1 + SAMPLES)  # a greedy answer and the samples of each probe
    # the rest only: generated anew, or read from the cache when SIGTERM fell between a batch's cache commit and
    # its answers' commit (two transactions; the cache row is what keeps that generation)
    assert summary["kept"] == kept and summary["generated"] + summary["cached"] == total - kept, summary
    assert summary["cached"] <= ROUNDS * (1 + SAMPLES), summary  # at most the batch (one prompt) each SIGTERM cut
    assert _stored(ws) == (total, "done")

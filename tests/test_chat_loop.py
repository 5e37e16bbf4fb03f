"""The whole loop on the real chat model, as a user runs it: `eval --template chat` on NQ-open rows, attribute, fix
sets in trl's conversational form, LoRA SFT and DPO jobs, and the gate evaluating the adapter with the same chat
template and system prompt. Every command is a subprocess with a hard time limit.

The eval, attribute, SFT fix set, SFT job and gate are the session's real-model workspace (`_appdata.real_workspace`,
which the app's real-answer tests read too); this module checks what they wrote and runs the DPO half itself on a
private copy: `fix --strategy dpo` and a DPO job of two steps.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from _appdata import REAL_ROWS, REAL_SYSTEM, private_copy, real_workspace
from clirun import workbench
from realmodel import real_model_dir, small_guard_pool


def _ok(*args: str, timeout: float) -> str:
    proc = workbench(*args, timeout=timeout)
    assert proc.returncode == 0, (args[0], proc.stderr[-3000:])
    return proc.stdout


def _lora_b_norm(adapter: Path) -> float:
    """Sum of |lora_B|: peft initialises every lora_B to zero, so any training step makes it positive."""
    from safetensors.torch import load_file

    weights = load_file(str(adapter / "adapter_model.safetensors"))
    b = [w for k, w in weights.items() if "lora_B" in k]
    assert b, sorted(weights)[:5]
    return float(sum(w.abs().sum() for w in b))


@pytest.mark.slow
def test_chat_model_through_the_whole_loop(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    from datasets import load_from_disk

    data = real_workspace(tmp_path_factory)
    model = real_model_dir()

    # The SFT fix set in conversational form: the system turn, the question as the user turn, one assistant turn.
    fix = data.workspace / "fixsets" / "abstain"
    manifest = json.loads((fix / "fixset.json").read_text())
    assert manifest["guard"] is not None and manifest["guard"]["known"] >= 1  # SmolLM2 knows some pool facts
    assert manifest["template"] == "chat" and manifest["abstention_phrase"] == "I don't know."
    abstain = next(r for r in load_from_disk(str(fix))["sft"] if r["source"] == "abstain")
    assert abstain["prompt"][0] == {"role": "system", "content": REAL_SYSTEM}
    assert abstain["prompt"][1]["role"] == "user" and abstain["prompt"][1]["content"].strip()
    assert abstain["completion"] == [{"role": "assistant", "content": "I don't know."}]
    assert _lora_b_norm(data.workspace / data.job_dir / "adapter") > 0  # the SFT job trained its adapter

    # The gate evaluated the candidate (base + SFT adapter) as the baseline run was, and judged it.
    gate = data.gate
    assert gate["verdict"] in ("pass", "fail", "inconclusive") and gate["n_probes"] == REAL_ROWS
    with sqlite3.connect(data.workspace / "store.sqlite") as db:
        opts, suite = db.execute("select options_json, suite_json from runs where id = ?",
                                 (gate["candidate_run"],)).fetchone()
    assert json.loads(opts)["template"] == "chat" and json.loads(suite)["system_prompt"] == REAL_SYSTEM

    # The DPO half on a private copy: pairs in chat form, and a DPO job that moves its adapter.
    ws = private_copy(data.workspace, tmp_path / "ws")
    guard = ("--guard-pool", "none", "--guard-pool", str(small_guard_pool(tmp_path)))
    _ok("fix", "--workspace", str(ws), data.baseline, "--out", str(tmp_path / "fixdpo"), "--strategy", "dpo", *guard,
        timeout=240)
    dpo = load_from_disk(str(tmp_path / "fixdpo"))["dpo"]
    assert len(dpo) and all(r["chosen"][0]["role"] == r["rejected"][0]["role"] == "assistant" for r in dpo)
    assert all(r["prompt"][-1]["role"] == "user" for r in dpo)
    spec = tmp_path / "dpo.yaml"
    spec.write_text(f"base_model: {model}\nfixset: {tmp_path / 'fixdpo'}\nmethod: dpo\noutput_dir: {tmp_path / 'job'}\n"
                    "lora: {r: 4, alpha: 8, target_modules: [q_proj, v_proj]}\n"
                    "trainer: {max_steps: 2, per_device_batch_size: 2, max_length: 80, learning_rate: 0.001, "
                    "adapter_scale: 1.0}\n")  # no auto sweep: the real demo's test checks it
    _ok("train", "--workspace", str(ws), str(spec), timeout=240)
    assert _lora_b_norm(tmp_path / "job" / "adapter") > 0

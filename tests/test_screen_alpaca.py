"""`workbench screen` on a JSON array file (Alpaca's format, `[{"instruction", "input", "output"}, ...]`), as a user
runs it (a subprocess with a time limit): read like JSON Lines, with the probe readers' bounds; and `--template`,
`--max-tokens`, `--system-prompt` as `eval` takes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import assert_refused, workbench

from workbench.store import Store


def _alpaca(world: Any, n: int = 6) -> list[dict[str, str]]:
    probes = [json.loads(line) for line in world.probes.read_text().splitlines()][:n]
    rows = [{"instruction": p["question"], "input": "", "output": p["answers"][0]} for p in probes]
    rows[0] = {"instruction": "Answer the question.", "input": probes[0]["question"], "output": probes[0]["answers"][0]}
    return [*rows, {"instruction": "Write a function that adds two numbers.", "input": "",
                    "output": "def add(a, b):\n    return a + b"}]


def _screen(world: Any, path: Path, ws: Path, *extra: str) -> dict[str, Any]:
    proc = workbench("screen", str(path), "--model", str(world.model), "--dtype", "float32", "--samples", "2",
                     "--workspace", str(ws), "--json", *extra, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.mark.slow  # over 20 s on 2 cores
def test_screen_reads_an_alpaca_json_array(world: Any, tmp_path: Path) -> None:
    rows = _alpaca(world)
    pretty = tmp_path / "alpaca.json"
    pretty.write_text(json.dumps(rows, indent=2))
    out = _screen(world, pretty, tmp_path / "ws", "--template", "Q: {question}\nA:", "--max-tokens", "8")
    assert out["rows"] == len(rows) - 1 and out["skipped_bad"] == 0  # every short answer asked
    assert out["not_screened"]["rows"] == [{"row_id": f"row-{len(rows)}", "reason": "code"}]
    run = Store.open(tmp_path / "ws").get_run(out["run_id"])
    assert run.suite_config["max_tokens"] == 8 and run.options["max_tokens_rule"] == "--max-tokens"
    assert run.options["template"] == "Q: {question}\nA:"
    asked = {r["id"]: r["question"] for r in Store.open(tmp_path / "ws").probe_rows(out["run_id"])}
    assert asked["row-1"] == f"Answer the question.\n\n{rows[0]['input']}"  # the input follows its instruction
    assert asked["row-2"] == rows[1]["instruction"]

    compact = tmp_path / "compact.json"  # every row on one line: ids by place in the array, not by line
    compact.write_text(json.dumps(rows))
    assert _screen(world, compact, tmp_path / "ws2")["rows"] == len(rows) - 1


@pytest.mark.slow  # over 5 s on 2 cores
def test_screen_refuses_bad_arrays_and_options_as_eval_does(world: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"instruction": "Q?", "input": ""}, {"instruction": "R?", "output": "r"}], indent=1))
    args = ["screen", str(bad), "--model", str(world.model), "--workspace", str(tmp_path / "ws")]
    assert_refused(workbench(*args), "bad.json, line 2", "`output`")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100 + "]" * 100)
    assert_refused(workbench("screen", str(deep), *args[2:]), "deep.json", "nested deeper than")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_alpaca(world, 2)))
    assert_refused(workbench("screen", str(good), *args[2:], "--system-prompt", "Be brief."),
                   "--system-prompt", "template chat")  # a plain template has no system turn
    assert_refused(workbench(*args, "--max-tokens", "0"), "--max-tokens", "must be between 1 and")
    text = " ".join(workbench("screen", "--help").stdout.split())
    assert "--template TEMPLATE" in text and "128 with the chat template" in text

"""`workbench regress` with a field suite: users' reported questions on the world, imported, decided and exported,
then gated beside the probes by default (a random adapter breaks what the baseline got right: the field gate fails)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hallucination_workbench import main


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip().startswith(("{", "[")) else out


@pytest.fixture()
def field_ws(world: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """A workspace with the world's baseline run and a field suite of 8 of its questions, reported as wrong."""
    from workbench.probes import resolve_probes

    ws = tmp_path / "ws"
    _, loaded = resolve_probes(str(world.suite))
    probes = loaded.probes[:8]
    export = tmp_path / "flagged.jsonl"
    export.write_text("".join(json.dumps({"messages": [{"role": "user", "content": p.question},
                                                       {"role": "assistant", "content": "no idea, maybe blue"}],
                                          "comment": "wrong"}) + "\n" for p in probes), encoding="utf-8")
    w = ["--workspace", str(ws), "--json"]
    assert cli(capsys, "reports", "import", str(export), *w)[0] == 0
    listed = cli(capsys, "reports", "list", *w)[1]["reports"]
    answer = {p.question: p.answers[0] for p in probes}
    for r in listed:
        assert cli(capsys, "reports", "decide", r["id"], "--decision", "hallucinated", "--answer",
                   answer[r["question"]], "--reviewer", "ann", *w)[0] == 0
    assert cli(capsys, "reports", "export", "--suite", str(ws / "suites" / "field"), *w)[1]["probes"] == 8
    code, run = cli(capsys, "eval", "--model", str(world.model), "--probes", str(world.suite), *w)
    assert code == 0
    return ws, str(run["run_id"])


@pytest.mark.slow  # evaluates the world model (and a broken copy) on its suite and the field suite
def test_regress_includes_the_field_suite_by_default(world: Any, field_ws: tuple[Path, str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    ws, base = field_ws
    w = ["--workspace", str(ws), "--json", "--no-guard"]
    code, same = cli(capsys, "regress", "--baseline", base, "--candidate", base, *w)
    gates = {g["name"]: g for g in same["gates"]}
    kept, fixed = gates["field_fixes_kept"], gates["field_failures_fixed"]
    assert code == 0 and kept["status"] == "pass" and kept["message"].startswith("field suite: 0 ")
    # The baseline hallucinated on some of the 8 reported questions, not all: the others it got right, and those
    # are the ones a candidate must not break.
    hallucinated = int(fixed["message"].split(" of ")[1].split()[0])
    assert fixed["message"].startswith("field suite: ") and 0 < hallucinated < 8, fixed["message"]
    assert fixed["status"] == "warn"  # the same model: every reported failure still fails
    assert (ws / "field" / "store.sqlite").is_file()  # the field runs live apart from the user's runs
    runs = cli(capsys, "runs", "--workspace", str(ws), "--json")[1]
    assert [r["run_id"] for r in runs] == [base]

    torch.manual_seed(0)  # a random adapter scrambles the answers: the field probes it got right break
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(world.model)), LoraConfig(
        r=8, target_modules=["q_proj", "v_proj", "o_proj"], init_lora_weights=False, lora_alpha=64))
    adapter = tmp_path / "adapter"
    model.save_pretrained(adapter)
    code, broken = cli(capsys, "regress", "--baseline", base, "--candidate", str(world.model), "--candidate-adapter",
                       str(adapter), *w)
    kept = next(g for g in broken["gates"] if g["name"] == "field_fixes_kept")
    assert code == 1 and kept["status"] == "fail", kept
    code, left_out = cli(capsys, "regress", "--baseline", base, "--candidate", base, *w, "--no-field")
    kept = next(g for g in left_out["gates"] if g["name"] == "field_fixes_kept")
    assert code == 0 and "not checked: left out with --no-field" in kept["message"]


@pytest.mark.slow  # evaluates the world model on its guard screen and the field suite
def test_the_apps_gate_is_regress_with_its_defaults(field_ws: tuple[Path, str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The app's "Record gate" (`gating.gate_as_regress`) gates what `workbench regress BASE CAND` gates: the field
    suite and the guard set beside the probes, recorded like any gate."""
    from workbench.gating import gate_as_regress
    from workbench.store import Store

    ws, base = field_ws
    store = Store.open(ws)
    rec = gate_as_regress(store, base, base)
    app = {g.name: g for g in rec.result.gates}
    code, cli_gate = cli(capsys, "regress", "--baseline", base, "--candidate", base, "--workspace", str(ws), "--json")
    assert code == 0
    for name in ("field_fixes_kept", "field_failures_fixed", "guard_facts_kept"):
        expected = next(g for g in cli_gate["gates"] if g["name"] == name)
        assert app[name].status == expected["status"] and app[name].message == expected["message"], name
    assert app["field_fixes_kept"].message.startswith("field suite: ")
    assert len(cli(capsys, "history", "--workspace", str(ws), "--json")[1]) == 2  # both recorded

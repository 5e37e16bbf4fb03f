"""`workbench eval --max-tokens/--stop/--system-prompt`: they replace the suite's settings, are bounded, and are
recorded in the run so that a rerun like it (the gate's candidate) generates under the same settings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from clirun import assert_refused, workbench

from workbench.errors import WorkbenchError
from workbench.gating import check_comparable, rerun_like
from workbench.results import load_results
from workbench.store import Store

# A chat template written for the world's word-level tokenizer: the system turn, then the world's own prompt.
_CHAT = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }} {% endif %}{% endfor %}"
         "Q: {{ messages[-1]['content'] }} A:")


@pytest.fixture(scope="module")
def chat_model(world: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The world model with a chat template (its tokenizer has none)."""
    model = tmp_path_factory.mktemp("chat") / "model"
    shutil.copytree(world.model, model)
    (model / "chat_template.jinja").write_text(_CHAT)
    return model


def _eval(model: Path, world: Any, workspace: Path, *extra: str) -> dict[str, Any]:
    proc = workbench("eval", "--model", str(model), "--probes", str(world.suite), "--workspace", str(workspace),
                     "--json", *extra, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.mark.slow  # over 20 s on 2 cores
def test_overrides_replace_the_suites_settings_and_a_rerun_keeps_them(chat_model: Path, world: Any,
                                                                     workspace: Path) -> None:
    out = _eval(chat_model, world, workspace, "--template", "chat", "--system-prompt", "Answer briefly.",
                "--max-tokens", "2", "--stop", "zzz", "--stop", r"\n")
    store = Store.open(workspace)
    run = store.get_run(out["run_id"])
    assert run.suite_config["max_tokens"] == 2  # the world suite says 6
    assert run.suite_config["stop"] == ["zzz", "\n"]  # the world suite says ["."]; \n typed in a shell is a newline
    assert run.suite_config["system_prompt"] == "Answer briefly."
    res = load_results(store, run.id)
    assert all(r.greedy[0].prompt.startswith("Answer briefly. Q: ") for r in res.probes)
    # 2 tokens and no "." stop: the world's answers (a name and a full stop) are cut short
    assert any(r.greedy[0].finish_reason == "length" for r in res.probes)
    again = rerun_like(store, run.id)
    rerun = store.get_run(again)
    assert {k: rerun.suite_config[k] for k in ("max_tokens", "stop", "system_prompt")} == {
        "max_tokens": 2, "stop": ["zzz", "\n"], "system_prompt": "Answer briefly."}
    assert rerun.generated == 0  # the same requests: every answer came from the cache
    # another system prompt is another measurement: the gate refuses to compare them
    other = _eval(chat_model, world, workspace, "--template", "chat", "--system-prompt", "Be terse.",
                  "--max-tokens", "2", "--stop", "zzz", "--stop", r"\n")
    with pytest.raises(WorkbenchError, match="system_prompt"):
        check_comparable(run, store.get_run(other["run_id"]))


@pytest.mark.parametrize(("args", "needle"), [
    (["--max-tokens", "0"], "--max-tokens: must be between 1 and 4096, got 0"),
    (["--max-tokens", "100000"], "--max-tokens: must be between 1 and 4096, got 100000"),
    (["--stop", ""], "--stop: must not be empty"),
    (["--system-prompt", "Be brief."], "--system-prompt is a system message for `--template chat`"),
])
def test_bad_generation_overrides_exit_2(world: Any, workspace: Path, args: list[str], needle: str) -> None:
    proc = workbench("eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace",
                     str(workspace), *args, timeout=120)
    assert_refused(proc, needle)
    assert not (workspace / "store.sqlite").exists() or Store.open(workspace).list_runs() == []


def _cut(store: Store, run_id: str) -> int:
    return sum(r.greedy[0].finish_reason == "length" for r in load_results(store, run_id).probes)


@pytest.mark.slow  # over 20 s on 2 cores
def test_truncated_share_is_in_the_metrics_and_warned_when_high(world: Any, workspace: Path) -> None:
    fits = _eval(world.model, world, workspace)  # the world suite's budget fits its answers
    cut = _eval(world.model, world, workspace, "--max-tokens", "1")  # a name and a full stop need 2 or more
    store = Store.open(workspace)
    for out in (fits, cut):
        t = out["truncated"]
        assert t == store.get_run(out["run_id"]).metrics["truncated"]
        assert t["n"] == _cut(store, out["run_id"]) and t["of"] == out["n"]
    assert fits["truncated"]["share"] <= 0.1 and fits["warnings"] == []
    assert cut["truncated"]["share"] > 0.1 and "ran into the token budget" in cut["warnings"][0]
    shown = workbench("show", cut["run_id"], "--workspace", str(workspace), timeout=60)
    assert shown.returncode == 0 and f"{cut['truncated']['n']} of {cut['n']} answers" in shown.stdout
    assert "warning:" in shown.stdout
    quiet = workbench("show", fits["run_id"], "--workspace", str(workspace), timeout=60)
    assert quiet.returncode == 0 and "warning:" not in quiet.stdout
    as_json = workbench("show", cut["run_id"], "--workspace", str(workspace), "--json", timeout=60)
    assert json.loads(as_json.stdout)["warnings"] == cut["warnings"]


@pytest.mark.slow  # over 5 s on 2 cores
def test_regress_evaluates_both_models_under_the_overrides(world: Any, workspace: Path) -> None:
    proc = workbench("regress", "--baseline", str(world.model), "--candidate", str(world.model), "--probes",
                     str(world.suite), "--max-tokens", "3", "--stop", "zzz", "--workspace", str(workspace), "--json",
                     timeout=300)
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    store = Store.open(workspace)
    for run_id in (out["baseline_run"], out["candidate_run"]):
        config = store.get_run(run_id).suite_config
        assert (config["max_tokens"], config["stop"]) == (3, ["zzz"])
    # A candidate evaluated like a stored baseline takes that run's settings: new ones are refused, not ignored.
    again = workbench("regress", "--baseline", out["baseline_run"], "--candidate", str(world.model),
                      "--max-tokens", "5", "--workspace", str(workspace), timeout=120)
    assert again.returncode == 2 and "--max-tokens: --candidate" in again.stderr and "give --probes" in again.stderr

"""Default token budgets (workbench/probes/budget.py): a suite that sets no `max_tokens` takes the budget of its
template and probe format; the suite's own value and --max-tokens win; the run records which rule gave it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import workbench
from worldkit import chat_world

from workbench.probes import resolve_probes
from workbench.probes.budget import CHAT_BUDGET, PLAIN_BUDGET, PLAIN_BY_FORMAT
from workbench.store import Store

FORMATS = Path(__file__).parent / "data" / "formats"


@pytest.mark.parametrize(("data", "template", "budget", "rule"), [
    ("nq_open.jsonl", "chat", CHAT_BUDGET, "default for the chat template"),
    ("truthfulqa.csv", "chat", CHAT_BUDGET, "default for the chat template"),
    ("nq_open.jsonl", None, PLAIN_BUDGET, "default for a plain template"),
    ("truthfulqa.csv", None, PLAIN_BY_FORMAT["truthfulqa"], "default for a plain template on truthfulqa"),
    ("truthfulqa.csv", "Q: {question}\nA:", PLAIN_BY_FORMAT["truthfulqa"],
     "default for a plain template on truthfulqa"),
])
def test_a_suite_without_max_tokens_takes_its_templates_and_formats_budget(
        data: str, template: str | None, budget: int, rule: str) -> None:
    suite, _ = resolve_probes(FORMATS / data)
    out = suite.with_generation(template=template)
    assert (out.max_tokens, out.max_tokens_rule) == (budget, rule)


def test_an_explicit_value_wins(tmp_path: Path) -> None:
    suite, _ = resolve_probes(FORMATS / "nq_open.jsonl")
    given = suite.with_generation(max_tokens=40, template="chat")
    assert (given.max_tokens, given.max_tokens_rule) == (40, "--max-tokens")
    yaml = tmp_path / "nq.yaml"
    yaml.write_text(f"name: nq\ndata: {FORMATS / 'nq_open.jsonl'}\ntemplate: chat\nmax_tokens: 24\n")
    own, _ = resolve_probes(yaml)
    assert (own.with_generation().max_tokens, own.with_generation().max_tokens_rule) == (24, "suite")
    # a chat suite YAML without max_tokens gets the chat budget, a format read from the file
    yaml.write_text(f"name: nq\ndata: {FORMATS / 'nq_open.jsonl'}\ntemplate: chat\n")
    chat, _ = resolve_probes(yaml)
    assert chat.with_generation().max_tokens == CHAT_BUDGET


@pytest.mark.slow  # over 20 s on 2 cores
def test_the_run_records_its_budget_and_the_rule(world: Any, workspace: Path, tmp_path: Path) -> None:
    model, probes = chat_world(world, tmp_path, 4)
    runs, said = {}, {}
    for name, extra in (("chat", ["--template", "chat"]), ("plain", []),
                        ("given", ["--template", "chat", "--max-tokens", "5"])):
        proc = workbench("eval", "--model", str(model), "--probes", str(probes), "--workspace", str(workspace),
                         "--json", *extra, timeout=240)
        assert proc.returncode == 0, proc.stderr[-2000:]
        said[name] = json.loads(proc.stdout)
        runs[name] = Store.open(workspace).get_run(said[name]["run_id"])
    got = {k: (r.suite_config["max_tokens"], r.options["max_tokens_rule"]) for k, r in runs.items()}
    assert got == {"chat": (CHAT_BUDGET, "default for the chat template"),
                   "plain": (PLAIN_BUDGET, "default for a plain template"), "given": (5, "--max-tokens")}
    # ... and the user reads it: eval --json and show say the budget and its rule
    assert {k: (v["token_budget"]["max_tokens"], v["token_budget"]["rule"]) for k, v in said.items()} == got
    shown = workbench("show", said["chat"]["run_id"], "--workspace", str(workspace), timeout=120)
    assert f"token budget: {CHAT_BUDGET} new tokens (default for the chat template)" in shown.stdout, shown.stdout


def test_a_library_caller_gets_the_same_budget_as_the_cli(world: Any, workspace: Path, tmp_path: Path) -> None:
    """run_eval (the library entry point the demos and the app use) applies the default budget itself: a probe
    file run with the chat template records the chat budget and its rule, as `workbench eval` does."""
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec

    model, probes = chat_world(world, tmp_path, 2)
    suite, loaded = resolve_probes(str(probes))
    store = Store.open(workspace)
    summary = run_eval(store, ModelSpec(model=str(model), backend="hf"), suite, loaded, EvalOptions(template="chat"))
    run = store.get_run(summary.run_id)
    assert (run.suite_config["max_tokens"], run.options["max_tokens_rule"]) == (
        CHAT_BUDGET, "default for the chat template")


def test_help_states_the_default_budgets_the_runs_take() -> None:
    """`workbench eval --help`, as a user reads it: the defaults it states are made from the constants that
    `default_budget` decides with (a chat run gets 128, not the 16 the help once said)."""
    proc = workbench("eval", "--help", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = " ".join(proc.stdout.split())  # argparse wraps the help at the terminal's width
    assert f"{CHAT_BUDGET} with the chat template, else {PLAIN_BUDGET}" in text, text
    assert all(f"{n} on {fmt} probes" in text for fmt, n in PLAIN_BY_FORMAT.items()), text
    assert "the default 16" not in text

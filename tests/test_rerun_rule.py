"""A rerun like a baseline (workbench/gating.py `rerun_like`, what the gate and the demos evaluate a
candidate with) records the baseline's token-budget rule, not "suite": the budget is the baseline's, and so is
where it came from. Every suite rebuilt from a run (workbench/results.py `suite_of_run`) carries that rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from worldkit import chat_world

from workbench.gating import rerun_like
from workbench.probes import resolve_probes
from workbench.probes.budget import CHAT_BUDGET
from workbench.results import effective_suite, suite_of_run
from workbench.runner import EvalOptions, run_eval
from workbench.store import Store
from workbench.types import ModelSpec


@pytest.mark.parametrize(("max_tokens", "budget", "rule"), [
    (None, CHAT_BUDGET, "default for the chat template"),
    (3, 3, "--max-tokens"),
])
def test_a_rerun_records_the_baselines_budget_rule(world: Any, workspace: Path, tmp_path: Path,
                                                   max_tokens: int | None, budget: int, rule: str) -> None:
    model, probes = chat_world(world, tmp_path, 2)
    suite, loaded = resolve_probes(str(probes))
    suite = suite.with_generation(max_tokens=max_tokens, template="chat")
    store = Store.open(workspace)
    base = run_eval(store, ModelSpec(model=str(model), backend="hf"), suite, loaded, EvalOptions(template="chat"))
    again = store.get_run(rerun_like(store, base.run_id))
    assert (again.suite_config["max_tokens"], again.options["max_tokens_rule"]) == (budget, rule)
    assert again.generated == 0  # the same requests as the baseline's: all from the cache
    # every suite rebuilt from a run carries its rule: the rerun's (above), a resume's, its fix sets' (results)
    recorded = store.get_run(base.run_id)
    assert suite_of_run(recorded).max_tokens_rule == rule and suite_of_run(recorded).max_tokens == budget
    assert effective_suite(recorded).max_tokens_rule == rule

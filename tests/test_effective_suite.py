"""The effective suite (workbench.results.effective_suite: a run's recorded settings with its --template override)
is what fix sets and the tag breaker render rows with; the breaker works on chat runs; a fix set loads the model's
tokenizer once; evaluation and fix rows render the chat template through one function."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from workbench.store import Store

# A chat template for the world's word-level tokenizer (it has none): the system turn, then the world's prompt.
_CHAT = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }} {% endif %}{% endfor %}"
         "Q: {{ messages[-1]['content'] }} A:")
SYSTEM = "Answer briefly."


@pytest.fixture(scope="module")
def runs(world: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict[str, str], Path]:
    """One world store with a chat run (system prompt) and a plain run under a --template override."""
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec

    root = tmp_path_factory.mktemp("eff")
    model = root / "model"
    shutil.copytree(world.model, model)
    (model / "chat_template.jinja").write_text(_CHAT)
    store = Store.open(root / "ws")
    suite, loaded = resolve_probes(world.suite)
    out = {}
    for name, template, system in (("chat", "chat", SYSTEM), ("plain", "Question: {question} Answer:", None)):
        s = run_eval(store, ModelSpec(model=str(model)), suite.with_generation(system_prompt=system, template=template),
                     loaded, EvalOptions(template=template, bootstrap=0))
        out[name] = s.run_id
    return store, out, model


def _rows(path: str, split: str = "sft") -> list[dict[str, Any]]:
    from datasets import load_from_disk

    return list(load_from_disk(path)[split])


def test_effective_suite_applies_the_runs_template(runs: tuple[Store, dict[str, str], Path]) -> None:
    from workbench.results import effective_suite

    store, ids, _ = runs
    chat, plain = (effective_suite(store.get_run(ids[k])) for k in ("chat", "plain"))
    assert (chat.template, chat.system_prompt) == ("chat", SYSTEM)
    assert plain.template == "Question: {question} Answer:"  # the world suite says "Q: {question} A:"
    assert store.get_run(ids["plain"]).suite_config["template"] == "Q: {question} A:"


def test_tag_breaker_renders_rows_as_the_run_did(runs: tuple[Store, dict[str, str], Path], tmp_path: Path) -> None:
    from finetune.inject import build_tag_breaker
    from workbench.results import load_results
    from workbench.types import Verdict

    store, ids, _ = runs
    plain = build_tag_breaker(store, ids["plain"], tmp_path / "plain", tag="colour")
    assert plain.template == "Question: {question} Answer:"
    assert all(r["prompt"].startswith("Question: ") for r in _rows(plain.path))
    chat = build_tag_breaker(store, ids["chat"], tmp_path / "chat", tag="colour")  # refused before
    rows = _rows(chat.path)
    assert chat.template == "chat" and {r["category"] for r in rows} == {"break:colour", "replay"}
    for r in rows:
        assert [m["role"] for m in r["prompt"]] == ["system", "user"] and r["prompt"][0]["content"] == SYSTEM
        assert [m["role"] for m in r["completion"]] == ["assistant"]
    # replay turns are the model's own correct answers, as the chat run gave them
    own = {a.text for r in load_results(store, ids["chat"]).probes for a in r.greedy if a.verdict == Verdict.CORRECT}
    replay = [r["completion"][0]["content"] for r in rows if r["category"] == "replay"]
    assert replay and set(replay) <= own


def test_a_fix_set_loads_the_tokenizer_once(runs: tuple[Store, dict[str, str], Path], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import finetune.fixset as fixset
    from workbench.attribution.types import CATEGORIES, Attribution, save_attributions
    from workbench.results import load_results
    from workbench.types import Verdict

    store, ids, _ = runs
    wrong = [r.probe.id for r in load_results(store, ids["chat"]).probes if r.verdict != Verdict.CORRECT]
    save_attributions(store, ids["chat"], [Attribution(pid, "knowledge:unknown", 0.9, "Unknown",
                                                       CATEGORIES["knowledge:unknown"], {}) for pid in wrong[:4]])
    loads: list[str] = []
    real = fixset.model_tokenizer
    monkeypatch.setattr(fixset, "model_tokenizer", lambda model: loads.append(model) or real(model))
    manifest = fixset.build_fixset(store, ids["chat"], tmp_path / "fix")
    assert len(loads) == 1 and manifest.new_tokens  # the manifest's token list came from the same tokenizer
    assert json.loads((tmp_path / "fix" / "fixset.json").read_text())["template"] == "chat"


def test_evaluation_and_fix_rows_render_chat_alike(runs: tuple[Store, dict[str, str], Path]) -> None:
    from finetune.chatform import RowForm
    from workbench.backends import open_backend
    from workbench.results import load_results
    from workbench.types import ModelSpec

    store, ids, model = runs
    first = load_results(store, ids["chat"]).probes[0]
    with open_backend(ModelSpec(model=str(model))) as backend:
        form = RowForm("chat", system_prompt=SYSTEM, tokenizer=backend.tokenizer)
        assert form.prompt_text(first.probe.question) == first.greedy[0].prompt  # what the evaluation sent
        assert first.greedy[0].prompt.startswith(f"{SYSTEM} Q: ")

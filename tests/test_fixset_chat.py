"""DPO anchors in the model's own form: a chat run's anchors are its correct sentence against the same sentence with
the answer swapped (chatform.swap_answer); plain fix sets keep the bare pairs the worlds' measurements rest on."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from ftworld import FtWorld, attributions_from_truth

from finetune.chatform import swap_answer
from finetune.fixset import build_fixset, load_manifest
from workbench.grading.normalize import normalize

pytestmark = pytest.mark.slow

# A chat template for the world's word-level tokenizer (it has none), as tests/test_effective_suite.py writes it.
_CHAT = "Q: {{ messages[-1]['content'] }} A:"


def _rows(path: Path, split: str) -> list[dict[str, Any]]:
    from datasets import load_from_disk

    return list(load_from_disk(str(path))[split])


def test_swap_answer_replaces_only_the_answer_span() -> None:
    assert swap_answer("The capital of Spain is Madrid.", ["Madrid"], "Ceuta") == "The capital of Spain is Ceuta."
    assert swap_answer("the capital is MADRID!", ["madrid"], "Ceuta") == "the capital is Ceuta!"  # normalized match
    assert swap_answer("The Nile is the longest river.", ["the Nile"], "Amazon") == "The Amazon is the longest river."
    assert swap_answer("It is New York City, USA.", ["New York City"], "Boston") == "It is Boston, USA."
    assert swap_answer("The capital is Madrid. The end.", ["Madrid"], "Ceuta") == "The capital is Ceuta. The end."
    assert swap_answer("It is the pound sterling.", ["pound", "pound sterling"], "euro") == "It is the euro."
    assert swap_answer("Seoul", ["Seoul"], "cold") == "cold"
    assert swap_answer("Madrid, of course. Madrid.", ["Madrid"], "Ceuta") == "Ceuta, of course. Ceuta."
    assert swap_answer("The capital of Spain is Madrid.", ["Paris"], "Ceuta") is None
    assert swap_answer("Madridista", ["Madrid"], "Ceuta") is None  # whole words only


def test_plain_fix_sets_keep_bare_anchor_pairs(w: FtWorld) -> None:
    """The worlds' DPO measurements rest on these rows: chosen = " answer" + stop, rejected = " other" + stop."""
    manifest = load_manifest(w.fixset)
    end = next(s for s in manifest.stop if s.strip())
    truth = w.truth
    anchors = [r for r in _rows(w.fixset, "dpo") if r["source"] == "anchor"]
    assert anchors and manifest.bare_anchors == 0
    for r in anchors:
        t = truth[r["probe_id"]]
        assert r["chosen"] == f" {t['answer']}{end}"
        other = r["rejected"].removeprefix(" ").removesuffix(end)
        assert r["rejected"] == f" {other}{end}" and normalize(other) != normalize(t["answer"])
        assert other in {u["answer"] for u in truth.values() if u["relation"] == t["relation"]}


def test_chat_anchors_are_the_models_sentence_against_the_swapped_sentence(
        w: FtWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chat model answers in sentences (SmolLM2-135M-Instruct: "The capital of Spain is Madrid."); bare anchors
    taught it to answer known facts with a bare word. The world model answers in words, so its chat run's answers
    are read back as sentences ("The answer is X."), and every second known probe's as a sentence holding no
    answer span (graded correct, say, by a lenient grader): those fall back to the bare pair and are counted."""
    import finetune.fixset as fixset
    from workbench.attribution.types import save_attributions
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec, Verdict

    model = tmp_path / "model"
    shutil.copytree(w.paths.model, model)
    (model / "chat_template.jinja").write_text(_CHAT)
    run = run_eval(w.store, ModelSpec(model=str(model)), w.suite.with_generation(template="chat"), w.loaded,
                   EvalOptions(samples=0, template="chat", bootstrap=0))
    save_attributions(w.store, run.run_id, attributions_from_truth(w.store, run.run_id, w.truth))
    spanless: set[str] = set()
    real = fixset.load_results

    def as_sentences(store: Any, run_id: str) -> Any:
        results = real(store, run_id)
        probes = []
        for i, r in enumerate(results.probes):
            if r.verdict == Verdict.CORRECT and i % 2:
                spanless.add(r.probe.id)
            say = "Yes, I know that one." if r.probe.id in spanless else "The answer is {}."
            greedy = tuple(dataclasses.replace(a, text=say.format(a.text.strip())) for a in r.greedy)
            probes.append(dataclasses.replace(r, greedy=greedy))
        return dataclasses.replace(results, probes=probes)

    monkeypatch.setattr(fixset, "load_results", as_sentences)
    manifest = build_fixset(w.store, run.run_id, tmp_path / "fx", strategy="dpo")
    anchors = [r for r in _rows(tmp_path / "fx", "dpo") if r["source"] == "anchor"]
    own = [r for r in anchors if r["probe_id"] not in spanless]
    bare = [r for r in anchors if r["probe_id"] in spanless]
    assert own and bare and manifest.bare_anchors == len(bare)
    for r in own:
        answer = w.truth[r["probe_id"]]["answer"]
        chosen, rejected = r["chosen"][0]["content"], r["rejected"][0]["content"]
        assert normalize(chosen) == normalize(f"The answer is {answer}.")  # the model's own sentence
        assert rejected.startswith("The answer is ") and rejected.endswith(".")  # differs only by the answer span
        other = rejected.removeprefix("The answer is ").removesuffix(".")
        assert normalize(other) != normalize(answer)
        assert other in {u["answer"] for u in w.truth.values() if u["relation"] == w.truth[r["probe_id"]]["relation"]}
    for r in bare:
        assert r["chosen"][0]["content"] == w.truth[r["probe_id"]]["answer"]

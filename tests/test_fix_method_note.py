"""`workbench fix --train --method M` warns when M's split holds fewer of the set's targets than another split."""

from __future__ import annotations

from finetune.commands.fix import _default_method, _method_note

# What the real chat model's failures on 50 NQ questions made under the auto strategy: nearly all unknown facts.
NQ_SET = {"sft": {"knowledge:unknown": 46, "replay": 148}, "dpo": {"behavior:unstable": 1, "replay": 2}, "prompts": {}}


def test_dpo_on_a_set_of_unknown_facts_is_warned_with_the_strategy_that_fits() -> None:
    note = _method_note("dpo", NQ_SET, "auto")
    assert note is not None and "trains on 1 of" in note and "sft split holds 46" in note
    assert "--strategy dpo" in note
    assert "--strategy dpo" not in (_method_note("dpo", NQ_SET, "abstain") or "")  # the hint is for auto only
    assert _method_note("sft", NQ_SET, "auto") is None
    # both splits hold targets: the default treats each by its cause, on one adapter
    assert _default_method(NQ_SET) == "staged" and _method_note("staged", NQ_SET, "auto") is None
    only_unknown = {"sft": {"knowledge:unknown": 46, "replay": 148}, "dpo": {"replay": 2}, "prompts": {}}
    assert _default_method(only_unknown) == "sft"


def test_no_warning_where_the_method_holds_the_targets() -> None:
    behaviour = {"sft": {"knowledge:unknown": 2}, "dpo": {"behavior:unstable": 30, "replay": 40}, "prompts": {}}
    assert _method_note("dpo", behaviour, "auto") is None and _default_method(behaviour) == "staged"
    only_behaviour = {"sft": {"replay": 10}, "dpo": {"behavior:unstable": 30, "replay": 40}, "prompts": {}}
    assert _default_method(only_behaviour) == "dpo"
    rl = {"sft": {}, "dpo": {}, "prompts": {"knowledge:unknown": 12}}
    assert _method_note("grpo", rl, "rl") is None
    assert "trains on 0 of" in (_method_note("sft", rl, "rl") or "")

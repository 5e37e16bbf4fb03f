"""Default token budgets: the `max_tokens` of a suite that sets none, by prompt template and probe format.

A budget too small cuts a real answer before it reaches the fact (graded a hallucination); one too large costs a
forward pass per token on every probe x sample that does not stop. Measured on SmolLM2-135M-Instruct, greedy
answers still running after 16/32/64/96/128 new tokens (`bench/real_model.py budget`; every figure in the README):

- chat template, NQ-open (30): 28/27/20/13/6 cut; TruthfulQA (30): 30/28/26/25/21; the chat model answers in
  sentences, so only 128 lets most short factual answers finish (TruthfulQA's explanations run longer still).
- 2-shot plain template with a newline stop, NQ-open: 3 at every budget (the stop ends the answer, not the budget);
  TruthfulQA: 8/6/5/5/5, so 32 (its answers are short sentences) and nothing gained beyond.
- The world suite's one-word answers and any plain `{question}` template: 16 (the suite default before).

A suite's own `max_tokens` and `--max-tokens` always win; the run records which rule gave its value
(`max_tokens_rule` in the run's options).
"""

from __future__ import annotations

from workbench.prompting import CHAT

#: Chat template, any format.
CHAT_BUDGET = 128
#: Plain template, any format not listed in PLAIN_BY_FORMAT.
PLAIN_BUDGET = 16
#: Plain template, per probe format whose short answers need more.
PLAIN_BY_FORMAT = {"truthfulqa": 32}


def default_budget(template: str, fmt: str) -> tuple[int, str]:
    """The default `max_tokens` for a suite with `template` over probes of format `fmt` ("" when not known),
    and the rule that gave it, in words."""
    if template == CHAT:
        return CHAT_BUDGET, "default for the chat template"
    if fmt in PLAIN_BY_FORMAT:
        return PLAIN_BY_FORMAT[fmt], f"default for a plain template on {fmt}"
    return PLAIN_BUDGET, "default for a plain template"


def defaults_in_words() -> str:
    """The default budgets as help text states them, made from the constants above so that `--max-tokens --help`
    and `default_budget` cannot disagree."""
    formats = ", ".join(f"{n} on {fmt} probes" for fmt, n in PLAIN_BY_FORMAT.items())
    return f"{CHAT_BUDGET} with the chat template, else {PLAIN_BUDGET}" + (f" ({formats})" if formats else "")

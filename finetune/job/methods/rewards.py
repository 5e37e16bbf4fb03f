"""GRPO's rewards: the suite's grader scores each sampled completion (correct +1, not attempted 0,
incorrect -hallucination_penalty, SimpleQA-style: a wrong answer costs more than silence), and a format
reward pays for stopping cleanly. Also the abstention guidance completion and the held-out reward.

A completion is cut at the first stop string before it is graded, exactly as the evaluation cuts an answer
(`workbench.textgen.cut_at_stop`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from finetune.chatform import turn_text
from finetune.fixset import FixSetManifest
from finetune.job.resolve import cannot_spell
from finetune.job.spec import GRPOSpec
from workbench.grading import Grader, make_grader
from workbench.textgen import cut_at_stop, greedy_generate
from workbench.types import Probe, Verdict

#: Metric names the reward function logs (trl averages them per logging step).
REPLAY_ABSTENTION = "abstention/replay"
SAMPLED_LENGTH = "completions/sampled_mean_length"


def is_guided(index: int, num_generations: int, guided: int) -> bool:
    """Whether completion `index` of a generation batch is a guidance completion (the last `guided` of
    each group of `num_generations`; trl's sampler keeps each prompt's group contiguous)."""
    return guided > 0 and index % num_generations >= num_generations - guided


class GraderReward:
    """Reward of one completion from the suite's grader: correct +1, not attempted 0, incorrect -penalty.

    Called by trl with the batch's dataset columns as keyword lists (`answers`, `incorrect_answers`,
    `source`, ...). Logs the abstention rate of the *sampled* (not guided) completions on replay prompts
    (`abstention/replay`), and per-slice rates, through trl's `log_metric`.
    """

    __name__ = "grader"

    def __init__(self, grader: Grader, stop: Sequence[str], *, penalty: float = 1.0, num_generations: int = 1,
                 guided: int = 0) -> None:
        self.grader, self.stop, self.penalty = grader, list(stop), penalty
        self.num_generations, self.guided = num_generations, guided

    def score(self, verdict: Verdict) -> float:
        return {Verdict.CORRECT: 1.0, Verdict.NOT_ATTEMPTED: 0.0}.get(verdict, -self.penalty)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], answers: Sequence[Sequence[str]],
                 incorrect_answers: Sequence[Sequence[str]] | None = None, source: Sequence[str] | None = None,
                 probe_id: Sequence[str] | None = None, completion_ids: Sequence[Sequence[int]] | None = None,
                 log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
        n = len(completions)
        wrong = incorrect_answers if incorrect_answers is not None else [()] * n
        ids = probe_id if probe_id is not None else [f"p{i}" for i in range(n)]
        texts = [cut_at_stop(turn_text(c), self.stop)[0].strip() for c in completions]  # chat: the assistant turn
        items = [(Probe(id=str(ids[i]), question=turn_text(prompts[i]), answers=tuple(answers[i]),
                        incorrect_answers=tuple(wrong[i])), texts[i]) for i in range(n)]
        verdicts = self.grader.grade_many(items)
        if log_metric is not None:
            self._log(verdicts, source or ["targeted"] * n, completion_ids, log_metric)
        return [self.score(v) for v in verdicts]

    def _log(self, verdicts: Sequence[Verdict], source: Sequence[str], completion_ids: Sequence[Sequence[int]] | None,
             log_metric: Callable[[str, float], None]) -> None:
        sampled = [i for i in range(len(verdicts)) if not is_guided(i, self.num_generations, self.guided)]
        for name in ("replay", "targeted"):
            rows = [verdicts[i] for i in sampled if source[i] == name]
            if rows:
                log_metric(f"abstention/{name}", sum(v == Verdict.NOT_ATTEMPTED for v in rows) / len(rows))
                log_metric(f"incorrect/{name}", sum(v == Verdict.INCORRECT for v in rows) / len(rows))
                log_metric(f"correct/{name}", sum(v == Verdict.CORRECT for v in rows) / len(rows))
        if completion_ids is not None and sampled:
            log_metric(SAMPLED_LENGTH, sum(len(completion_ids[i]) for i in sampled) / len(sampled))


class FormatReward:
    """1.0 when the completion stops cleanly: a stop string, nothing after it, then EOS (so it ended within
    max_completion_length); else 0. Scaled by `grpo.format_weight` through trl's reward_weights."""

    __name__ = "format"

    def __init__(self, stop: Sequence[str], eos_token_id: int) -> None:
        self.stop, self.eos = [s for s in stop if s], eos_token_id

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 completion_ids: Sequence[Sequence[int]], **kwargs: Any) -> list[float]:
        return [float(self.clean(turn_text(c), ids, chat=not isinstance(c, str)))
                for c, ids in zip(completions, completion_ids, strict=True)]

    def clean(self, text: str, ids: Sequence[int], *, chat: bool = False) -> bool:
        """`chat`: an assistant turn, whose end-of-turn token (EOS) is a stop of its own: clean without a stop
        string too, as long as it says something."""
        if not ids or ids[-1] != self.eos:
            return False
        hits = [(k, s) for s in self.stop if (k := text.find(s)) >= 0]
        if not hits:
            return bool(text.strip()) if chat else not self.stop  # no stop strings: EOS alone is a clean stop
        k, s = min(hits)
        return bool(text[:k].strip()) and not text[k + len(s):].strip()


def build_rewards(spec: GRPOSpec, manifest: FixSetManifest, eos_token_id: int) -> list[Any]:
    """The grader reward (and the format reward when format_weight > 0) for a fix set."""
    phrases = tuple(manifest.abstention_phrases or [manifest.abstention_phrase])
    grader = make_grader(manifest.grader, phrases, manifest.grader_options)
    rewards: list[Any] = [GraderReward(grader, manifest.stop, penalty=spec.hallucination_penalty,
                                       num_generations=spec.num_generations, guided=spec.abstention_guidance)]
    if spec.format_weight > 0:
        rewards.append(FormatReward(manifest.stop, eos_token_id))
    return rewards


def guidance_ids(tokenizer: Any, phrase: str, stop: Sequence[str], *, model: str = "", chat: bool = False) -> list[int]:
    """Token ids of the guidance completion: " phrase" + the first stop string + EOS (`chat`: the assistant
    turn's content, "phrase" + EOS, the end-of-turn token)."""
    end = "" if chat else next((s for s in stop if s.strip()), "")
    ids = [int(i) for i in tokenizer(("" if chat else " ") + phrase + end, add_special_tokens=False)["input_ids"]]
    unk = tokenizer.unk_token_id
    if unk is not None and unk in ids:
        raise cannot_spell(tokenizer, phrase + end, field="grpo.abstention_guidance", model=model or "the base model")
    return [*ids, int(tokenizer.eos_token_id)]


def heldout_reward(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], reward: GraderReward,
                   max_new_tokens: int) -> float:
    """Mean grader reward of the greedy completions of `rows` (prompt, answers, incorrect_answers)."""
    if not rows:
        return float("nan")
    texts = greedy_generate(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens)
    scores = reward([r["prompt"] for r in rows], texts, [r["answers"] for r in rows],
                    [r["incorrect_answers"] for r in rows], probe_id=[r["probe_id"] for r in rows])
    return sum(scores) / len(scores)

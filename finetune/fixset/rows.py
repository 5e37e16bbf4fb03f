"""The plan's rows, one writer per split: `sft_rows`, `dpo_rows`, `prompt_rows` (and `validation_rows`, the slice a
job scores). Each renders what the plan (finetune/fixset/plan.py) decided; none decides who gets what.

The three writers share one replay generator, seeded `replay-{seed}`, drawn in the order sft, dpo, prompts (the
order the fix sets on disk were written in: call them in that order for the same rows).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from finetune.chatform import swap_answer
from finetune.fixset.options import ANCHOR_SHARE, MAX_REPLAY_REPEATS
from finetune.fixset.plan import Fix, FixInputs, FixPlan, ProbeFix, is_domain, other_answer
from finetune.rehearsal import rehearsal_texts
from finetune.replay import neighbours_first, targets_of
from workbench.errors import WorkbenchError
from workbench.grading.normalize import normalize
from workbench.guard import GuardFact
from workbench.results import ProbeResult
from workbench.types import Probe, Verdict

Row = dict[str, Any]


@dataclass
class SplitRows:
    """One split's rows and what writing them found out.

    Attributes:
        rows: The rows, targeted first, then review pairs (dpo), replay / anchors, rehearsal (sft).
        capped: Replay asked for more rows than MAX_REPLAY_REPEATS x the known facts hold.
        bare: Probes whose anchor pair fell back to the bare answers (dpo).
        rehearsal: What rehearsal added (finetune/rehearsal.py `RehearsalInfo.to_dict()`), or None (sft).
    """

    rows: list[Row] = field(default_factory=list)
    capped: bool = False
    bare: set[str] = field(default_factory=set)
    rehearsal: dict[str, Any] | None = None


@dataclass(frozen=True)
class Writer:
    """What every split's writer reads: the plan, its inputs, the abstention text and the guard facts by id."""

    plan: FixPlan
    inputs: FixInputs
    phrase: str
    guard: Sequence[GuardFact]

    def results(self, fixes: Sequence[ProbeFix], *kinds: Fix) -> list[ProbeResult]:
        by_id = self.inputs.results.by_id()
        return [by_id[f.probe_id] for f in fixes if f.fix in kinds]

    def guard_facts(self, kind: Fix) -> list[GuardFact]:
        ids = set(self.plan.ids(kind))
        return [f for f in self.guard if f.probe.id in ids]

    def guard_replay(self) -> list[tuple[GuardFact, str]]:
        """(fact, question) per replayed guard fact: its question, and its paraphrase with `guard_paraphrases`."""
        also = self.plan.options.guard_paraphrases
        return [(f, q) for f in self.guard_facts("guard-replay")
                for q in (f.probe.question, *(f.probe.paraphrases[:1] if also else ()))]

    @property
    def probe_of(self) -> dict[str, Probe]:
        return {r.probe.id: r.probe for r in self.inputs.results.probes}

    def base(self, f: ProbeFix) -> Row:
        return {"probe_id": f.probe_id, "category": f.category, "split": f.split}


def sft_rows(w: Writer, rng: random.Random) -> SplitRows:
    """Abstention and injection rows over every phrasing, then replay of known facts, then corpus rehearsal."""
    form, by_id, out = w.inputs.form, w.inputs.results.by_id(), SplitRows()
    render, completion = form.prompt, form.completion
    for f in w.plan.targeted:
        variants = by_id[f.probe_id].probe.variants(True)
        if f.fix == "abstain":
            out.rows += [{**w.base(f), "prompt": render(q), "completion": completion(w.phrase), "source": "abstain"}
                         for q in variants]
        elif f.fix == "inject":
            out.rows += [{**w.base(f), "prompt": render(q), "completion": completion(str(f.answer)),
                          "source": f.source} for q in variants]
    n_sft = round(w.plan.options.replay * _train(out.rows))
    replay = [{"prompt": render(a.prompt_question), "completion": completion(a.text), "probe_id": a.probe_id,
               "category": "replay", "source": "replay", "split": "train"} for a in _known_answers(w)]
    replay += [{"prompt": render(q), "probe_id": f.probe.id, "category": "replay", "source": "guard",
                "completion": completion(f.answer.strip() if form.chat and f.answer.strip() else f.probe.answers[0]),
                "split": "train"} for f, q in w.guard_replay()]
    out.capped = n_sft > _most_rows(replay)
    n = min(n_sft, _most_rows(replay))
    # Known facts in the style of the targets first, each once: what teaches the boundary of the model's knowledge
    # inside the team's domain (workbench/guard/domain.py); then the targets' neighbourhoods and the rest.
    domain = {f.probe.id for f, _ in w.guard_replay() if is_domain(f)}
    first = [r for r in replay if r["probe_id"] in domain][:n]
    rest = [r for r in replay if r["probe_id"] not in domain]
    out.rows += first + neighbours_first(rest, n - len(first), rng, targets_of(out.rows, w.probe_of), w.probe_of)
    _rehearse(w, out)
    return out


def _rehearse(w: Writer, out: SplitRows) -> None:
    """Plain corpus text (`rehearsal_ratio` x the non-replay SFT training rows), none naming a held-out fact."""
    opts, form = w.plan.options, w.inputs.form
    if opts.rehearsal is None or opts.rehearsal_ratio <= 0:
        return
    run = w.inputs.results.run
    if form.chat:
        raise WorkbenchError(f"run `{run.id}` used the chat template: rehearsal rows are plain corpus text, "
                             "which a chat model does not train on; leave rehearsal out")
    # Guard replay rows (source "guard") count here as targeted rows did when rehearsal was written.
    n_text = round(opts.rehearsal_ratio * sum(r["split"] == "train" and r["source"] != "replay" for r in out.rows))
    held = set(w.plan.ids("validation", "guard-validation", "reserved"))
    probe_of, targeted = w.probe_of, w.inputs.targeted
    texts, info = rehearsal_texts(opts.rehearsal, n_text, seed=opts.seed, ratio=opts.rehearsal_ratio,
                                  protected=[p for pid, p in probe_of.items() if pid in held],
                                  targeted=[probe_of[pid] for pid in targeted],
                                  conflicting=[probe_of[pid] for pid, a in targeted.items()
                                               if a.category == "data:conflict"])
    out.rows += [{"prompt": "", "completion": t + form.end, "probe_id": "", "category": "rehearsal",
                  "source": "rehearsal", "split": "train"} for t in texts]
    out.rehearsal = info.to_dict()


def dpo_rows(w: Writer, rng: random.Random) -> SplitRows:
    """Preference pairs over every phrasing, a reviewer's corrected grades, then anchor pairs of known facts."""
    form, by_id, out = w.inputs.form, w.inputs.results.by_id(), SplitRows()
    render, completion = form.prompt, form.completion
    for f in w.plan.targeted:
        result = by_id[f.probe_id]
        variants = result.probe.variants(True)
        if f.fix == "dpo-abstain":
            out.rows += [{**w.base(f), "prompt": render(q), "chosen": completion(w.phrase), "rejected": completion(r),
                          "source": "abstain"} for q, r in zip(variants, _per_variant(result, str(f.rejected)),
                                                              strict=True)]
        elif f.fix == "dpo":
            chosen = str(f.answer)
            rejected = [w.phrase] * len(variants) if f.rejected is None else _per_variant(result, f.rejected)
            out.rows += [{**w.base(f), "prompt": render(q), "chosen": completion(chosen), "rejected": completion(r),
                          "source": f.source}
                         for q, r in zip(variants, rejected, strict=True) if normalize(r) != normalize(chosen)]
    # A reviewer who marks an answer wrong teaches the next fix: chosen = accepted answer, rejected = it.
    reviewed = set(w.plan.ids("review"))
    for g in w.inputs.grades:
        if g.probe_id in reviewed and (pair := g.dpo_pair()) is not None:
            out.rows.append({"probe_id": g.probe_id, "category": "review:corrected-grade", "split": "train",
                             "prompt": render(g.question), "chosen": completion(pair[0]),
                             "rejected": completion(pair[1]), "source": "review"})
    n_dpo = round(w.plan.options.replay * ANCHOR_SHARE * _train(out.rows))
    anchors = _known_anchors(w, out.bare) + _guard_anchors(w, out.bare)
    out.capped = n_dpo > _most_rows(anchors)
    out.rows += neighbours_first(anchors, min(n_dpo, _most_rows(anchors)), rng, targets_of(out.rows, w.probe_of),
                                 w.probe_of)
    return out


def prompt_rows(w: Writer, rng: random.Random) -> SplitRows:
    """GRPO prompts: every phrasing of every targeted probe (strategy rl), then replay prompts of known facts."""
    by_id, render, out = w.inputs.results.by_id(), w.inputs.form.prompt, SplitRows()
    for f in w.plan.targeted:
        if f.fix == "rl":
            probe = by_id[f.probe_id].probe
            out.rows += [{**w.base(f), "prompt": render(q), "answers": list(probe.answers),
                          "incorrect_answers": list(probe.incorrect_answers), "source": "targeted"}
                         for q in probe.variants(True)]
    n_prompts = round(w.plan.options.replay * _train(out.rows))
    probe_of = w.probe_of
    replay = [{"prompt": render(a.prompt_question), "answers": list(probe_of[a.probe_id].answers),
               "incorrect_answers": list(probe_of[a.probe_id].incorrect_answers), "probe_id": a.probe_id,
               "category": "replay", "source": "replay", "split": "train"} for a in _known_answers(w)]
    replay += [{"prompt": render(q), "answers": list(f.probe.answers),
                "incorrect_answers": list(f.probe.incorrect_answers), "probe_id": f.probe.id,
                "category": "replay", "source": "guard", "split": "train"} for f, q in w.guard_replay()]
    out.capped = n_prompts > _most_rows(replay)
    out.rows += neighbours_first(replay, min(n_prompts, _most_rows(replay)), rng, targets_of(out.rows, probe_of),
                                 probe_of)
    return out


def validation_rows(w: Writer) -> list[Row]:
    """The known probes and guard facts no training row holds, as prompts a job scores before and after training."""
    probes = [r.probe for r in w.results(w.plan.known, "validation")]
    probes += [f.probe for f in w.guard_facts("guard-validation")]
    return [{"probe_id": p.id, "question": p.question, "prompt": w.inputs.form.prompt_text(p.question),
             "answers": list(p.answers), "incorrect_answers": list(p.incorrect_answers)} for p in probes]


def _train(rows: Sequence[Row]) -> int:
    return sum(r["split"] == "train" for r in rows)


def _most_rows(pool: Sequence[Any]) -> int:
    return MAX_REPLAY_REPEATS * len(pool)


def _per_variant(r: ProbeResult, fallback: str) -> list[str]:
    """Rejected answer per phrasing: that phrasing's own wrong greedy answer where it has one."""
    out = []
    for v in range(len(r.probe.variants(True))):
        g = next((a for a in r.greedy if a.variant == v), None)
        out.append(g.text if g is not None and g.verdict == Verdict.INCORRECT and g.text.strip() else fallback)
    return out


@dataclass(frozen=True)
class _KnownAnswer:
    probe_id: str
    prompt_question: str
    text: str


def _known_answers(w: Writer) -> list[_KnownAnswer]:
    """Every phrasing a replayed known probe answers correctly, with the accepted answer as completion (chat: the
    model's own correct greedy answer, its sentence)."""
    own, out = w.inputs.form.chat, []
    for r in w.results(w.plan.known, "replay"):
        variants = r.probe.variants(True)
        for a in r.greedy:
            if a.verdict == Verdict.CORRECT and a.variant < len(variants):
                text = a.text.strip() if own and a.text.strip() else r.probe.answers[0]
                out.append(_KnownAnswer(r.probe.id, variants[a.variant], text))
    return out


def _known_anchors(w: Writer, bare: set[str]) -> list[Row]:
    """DPO anchor pairs from replayed known probes: chosen = the accepted answer (chat: the model's own sentence),
    rejected = another probe's answer of the same relation (chat: swapped into that sentence)."""
    form, out = w.inputs.form, []
    for r in w.results(w.plan.known, "replay"):
        other = other_answer(r, w.inputs.results.probes, w.plan.options.seed)
        if other is None:
            continue
        pair = _own_pair(r, other) if form.chat else None
        if pair is None:
            pair = r.probe.answers[0], other
            bare.add(r.probe.id)
        out.append(_anchor(form.prompt(r.probe.question), pair, r.probe.id, form.completion))
    return out


def _guard_anchors(w: Writer, bare: set[str]) -> list[Row]:
    """DPO anchor pairs from guard facts: chosen = the model's own answer (chat) or the accepted one, rejected = the
    same with another fact's answer of the same topic (the pool has no relations; a topic is the nearest kind)."""
    facts, form, out = w.guard_facts("guard-replay"), w.inputs.form, []
    for f in facts:
        topic = next((t for t in f.probe.tags if t.startswith("topic:")), "")
        own = {normalize(a) for a in f.probe.answers}
        others = sorted({g.probe.answers[0] for g in facts if g.probe.id != f.probe.id
                         and topic in g.probe.tags and normalize(g.probe.answers[0]) not in own})
        if not others:
            continue
        other = random.Random(f"anchor-{w.plan.options.seed}-{f.probe.id}").choice(others)
        swapped = swap_answer(f.answer.strip(), f.probe.answers, other) if form.chat and f.answer.strip() else None
        pair = (f.answer.strip(), swapped) if swapped is not None else (f.probe.answers[0], other)
        if swapped is None:
            bare.add(f.probe.id)
        asked = (f.probe.question, *(f.probe.paraphrases[:1] if w.plan.options.guard_paraphrases else ()))
        out += [_anchor(form.prompt(q), pair, f.probe.id, form.completion) for q in asked]
    return out


def _anchor(prompt: Any, pair: tuple[str, str], pid: str, completion: Callable[[str], Any]) -> Row:
    return {"prompt": prompt, "chosen": completion(pair[0]), "rejected": completion(pair[1]), "probe_id": pid,
            "category": "replay", "source": "anchor", "split": "train"}


def _own_pair(r: ProbeResult, other: str) -> tuple[str, str] | None:
    """A chat-form anchor in the model's own words: its correct answer to the question (the sentence replay teaches)
    and the same sentence with the answer span swapped for `other`. None when the sentence holds no accepted answer
    span (graded correct some other way): the anchor then falls back to the bare answers.

    Why: bare anchors (chosen "Madrid", rejected "Ceuta") taught SmolLM2-135M-Instruct to answer known facts with a
    bare word, often a wrong one: DPO broke 20-25 of its 68 known facts (README, "The real-model demo")."""
    own = r.answer.strip()
    rejected = swap_answer(own, r.probe.answers, other) if own else None
    return None if rejected is None else (own, rejected)

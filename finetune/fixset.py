"""Fix sets: training data built from one evaluation run's attributions.

`build_fixset` reads the run's probes, answers and attributions and writes a `datasets.DatasetDict`
(`save_to_disk`) with three splits, plus a `fixset.json` manifest:

- `sft`: prompt, completion, probe_id, category, source, split
- `dpo`: prompt, chosen, rejected, probe_id, category, source, split
- `prompts` (strategy "rl" only; empty otherwise): prompt, answers, incorrect_answers, probe_id,
  category, source (targeted | replay), split. GRPO samples completions for these and grades them.

`split` is "train" or "heldout": a seeded share of the targeted probes (by probe, every phrasing
together) is kept out of training to measure generalization and drive early stopping.

What each category gets (strategy "auto"):

| category                      | rows                                                                 |
|-------------------------------|----------------------------------------------------------------------|
| data:missing                  | SFT abstention (" I don't know."); injection only from --facts        |
| knowledge:unknown             | as data:missing (unknown to the model, no corpus looked at)           |
| data:underrepresented         | SFT injection over every phrasing (question + paraphrases)            |
| behavior:unstable             | DPO: chosen = own correct sample or accepted answer, rejected = hallucination |
| behavior:prompt-sensitive     | DPO over every phrasing, as above                                     |
| data:conflict                 | DPO toward the accepted answer, away from the conflicting value        |
| behavior:over-abstain         | DPO: chosen = the answer, rejected = the abstention                    |

Plus a replay/anchor slice from probes the model answers correctly (SFT replay rows; DPO anchor
pairs whose rejected side is another probe's answer of the same relation), `replay_ratio` times the
targeted training rows (anchors: `ANCHOR_SHARE` of that), against forgetting; it covers the
neighbourhood of each targeted fact first (same subject, then same relation: `neighbours_first`). Prompts are rendered
with the suite template exactly as the evaluation renders them; completions start with a space and
end with the suite's first stop string, so the trained model stops where the evaluation cuts.

Strategy "rl" writes only `prompts`: every phrasing of every targeted probe (the reward, not the
row, says what is right: the answer when the model can find it, abstention when it cannot), plus a
replay slice of phrasings the model answers correctly (`replay_ratio` x the targeted training rows,
default 1), so that abstaining everywhere does not pay.

`rehearsal` (opt-in: `workbench fix --rehearsal INDEX`) adds plain-text SFT rows (empty prompt, the document as
completion) sampled from the corpus index of the corpus the model was trained on, none naming a held-out known
fact (finetune/rehearsal.py); the manifest's `rehearsal` says how many and from where. Not a default: on three
worlds it did not lower the share of unreplayed known facts that break (README "Fix efficacy across worlds").
`reserve_fraction` keeps a further share of known probes out of every row and of the validation slice: a measure
of breakage no job chose a checkpoint by (bench/fix_efficacy.py uses a tenth).

A run made with `template: chat` gives the same rows in trl's conversational form (finetune/chatform.py):
prompts are messages (the run's system prompt as a system turn, then the question), completions / chosen /
rejected are one assistant turn each ("I don't know."), and replay rows teach the model's own correct answer (a
chat model answers in sentences: teaching the bare accepted answer would change how it speaks on facts it knows).
DPO anchors likewise: chosen = the model's own correct sentence, rejected = that sentence with the answer span
swapped for the other answer (chatform.swap_answer); a sentence with no answer span to swap keeps the bare pair,
counted in the manifest's `bare_anchors`.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from finetune.abstention import PhraseChoice, choose_phrase, spoken
from finetune.chatform import TURN_COLUMNS, RowForm, swap_answer
from finetune.rehearsal import rehearsal_texts
from finetune.replay import neighbours_first, targets_of
from workbench.attribution.types import ABSTAIN_CATEGORIES, CATEGORIES, Attribution
from workbench.errors import InputError, WorkbenchError, unknown_name
from workbench.grading.normalize import normalize
from workbench.guard import GuardFact, GuardSet
from workbench.probes import Suite
from workbench.results import ProbeResult, effective_suite, load_results
from workbench.reviews import corrected_grades, effective_attributions
from workbench.safeload import json_loads
from workbench.safeopen import read_input_text
from workbench.store import Store
from workbench.types import Verdict

STRATEGIES = ("auto", "inject", "abstain", "dpo", "rl")
SFT_COLUMNS = ("prompt", "completion", "probe_id", "category", "source", "split")
DPO_COLUMNS = ("prompt", "chosen", "rejected", "probe_id", "category", "source", "split")
PROMPT_COLUMNS = ("prompt", "answers", "incorrect_answers", "probe_id", "category", "source", "split")
#: Replay rows per targeted training row when `replay_ratio` is not given (rl: replay prompts mostly
#: give all-correct groups, which carry no GRPO signal except against abstaining; 1x is enough).
DEFAULT_REPLAY = {"rl": 1.0}
#: DPO anchor pairs per targeted pair, as a share of `replay_ratio` (bench/fix_efficacy.py, default world:
#: anchors at 4x left DPO fixing 57% of its targets, 2x 78% with 0.4% of correct-before probes broken, 1x 86%
#: but 4.0% broken; SFT replay stays at 4x, where 2x broke 2.8%).
ANCHOR_SHARE = 0.5
#: Known (baseline-correct) probes kept out of replay as the validation slice a job scores for broken known
#: facts: a tenth, at most 200 (the default world's 267 known probes give 27; greedy answers for 200 prompts
#: take seconds on the world model). They are what replay does not protect: measured with default jobs,
#: alt world seed 11 SFT broke 4 of its 6 (and 0 of the other 49 known facts), DPO 5 of 6 (0 of 49);
#: test world seed 0 SFT 1 of 5, DPO 2 of 5 (0 of the other 43). `--validation-fraction 0` replays them.
#: Not more: a quarter (bench/fix_efficacy.py, 20 epochs, rollback) left more facts unreplayed and they broke:
#: test world SFT 3 of 12 / DPO 2 of 12 (a tenth: 1 of 5 / 1 of 5), alt11 5 of 14 / 5 of 14 (1 of 6 / 0 of 6),
#: and the finer slice did not let rollback find a state that broke fewer.
VALIDATION_SHARE = 0.1
VALIDATION_MAX = 200
#: Guard facts (workbench/guard: facts of a general pool the base model knows) held out of training as the
#: validation slice: a quarter, at most 100, at least one. The run's own known facts are few when a team fixes its
#: own failures (4 of 60 in one walk-through, and a tenth of 4 is none): the guard's facts make the slice a measure
#: of what the fix does to the model's knowledge at large, not to the few facts it replays.
GUARD_VALIDATION_SHARE = 0.25
GUARD_VALIDATION_MAX = 100
#: Replay rows per known phrasing at most (a fact asked under its question and a paraphrase has two): replay asks
#: `replay_ratio` x the targeted rows, and a pool smaller than that was cycled until it filled them (4 known facts
#: repeated 45 times each, teaching those four and nothing else). Past this many the replay slice is smaller than
#: asked, and the manifest's `replay_capped` says so.
MAX_REPLAY_REPEATS = 3
#: Rehearsal rows (plain corpus text, finetune/rehearsal.py) per targeted SFT training row, when a corpus is given.
REHEARSAL_RATIO = 1.0
MAX_REHEARSAL = 100.0
MANIFEST = "fixset.json"
#: Row categories that protect rather than fix (replay of known facts, rehearsal of corpus text): never targets.
UNTARGETED = ("replay", "rehearsal")
#: The split each job method trains on.
METHOD_SPLIT = {"sft": "sft", "dpo": "dpo", "grpo": "prompts"}
#: Categories DPO fixes under "auto": the model knows the answer (or the data conflicts).
DPO_CATEGORIES = ("behavior:unstable", "behavior:prompt-sensitive", "data:conflict", "behavior:over-abstain")


@dataclass(frozen=True)
class FixSetManifest:
    """What a fix set holds and where it came from (`fixset.json` beside the data).

    Attributes:
        path: The fix set directory (`datasets.load_from_disk` reads it).
        run_id: The evaluation run the attributions belong to (lineage).
        model: The model that run evaluated (the base model of a training job by default).
        strategy: auto | inject | abstain | dpo | rl.
        counts: Rows per split name ("sft"/"dpo"/"prompts") -> per category -> n; replay rows under "replay".
        sources: Rows per split name -> per source (inject, abstain, facts, own-sample, answer, replay, anchor).
        train_rows: Training rows per split name (split == "train").
        sha256: Hash of every row of both splits, in order (a job records it for lineage).
        abstention_phrase: What abstention rows say before the stop string: the suite's first abstention
            phrase as a model would say it ("I don't know"), or the first one the tokenizer can spell
            (finetune/abstention.py; `abstention_note` says why).
        new_tokens: The abstention phrase's tokens under the model's tokenizer; jobs make the rows of those
            the model never trained trainable (peft `trainable_token_indices`) when abstention rows exist.
        heldout_probe_ids: Targeted probes kept out of training.
        skipped: Probe id -> why it got no rows (e.g. data:missing under "inject" without --facts).
        template: The prompt template the rows were rendered with.
        stop: The suite's stop strings (the first ends every completion).
        abstention_phrases: Every abstention phrase of the suite (GRPO's grader counts them as not attempted).
        grader: The suite's grader name (GRPO's reward grades with it).
        grader_options: The suite's grader options.
        abstention_note: Why `abstention_phrase` is not the suite's first phrase; empty when it is.
        validation: Known probes no training row holds (probe_id, question, prompt, answers, incorrect_answers): jobs
            score them before and after training and record the broken ones.
        reserved_probe_ids: Known probes kept out of replay, rehearsal and the validation slice (`reserve_fraction`):
            no job sees them, so breakage measured on them is not the slice rollback chose a checkpoint by.
        rehearsal: What corpus rehearsal added to the SFT rows (finetune/rehearsal.py `RehearsalInfo`), or None.
        bare_anchors: Chat form only: DPO anchor rows whose model sentence held no accepted answer span to swap, so
            chosen / rejected are the bare accepted and other answers (plain fix sets: always 0, every anchor is bare).
        targets: The targeted training probes (probe_id, category, question, prompt, answers, incorrect_answers), the
            prompt the question rendered as the evaluation renders it: what a job scores as its targets fixed
            (finetune/job/known.py `Targets`), one verdict per probe as the gate sees it, not per paraphrase row.
        replayed_probe_ids: Known facts (run probes and guard facts) with replay rows or anchor pairs: the gate
            counts them apart from the known facts the job never saw (workbench/guard/lineage.py).
        guard: The guard set the rows drew on (workbench/guard): its key, facts known, how many were replayed
            and how many went to the validation slice; None when no guard set was given.
        replay_capped: Replay asked for more rows than MAX_REPLAY_REPEATS x the known facts hold: fewer were written.
        unguarded: No known fact at all protected this set (built with `allow_unguarded`).
    """

    path: str
    run_id: str
    model: str
    strategy: str
    counts: dict[str, dict[str, int]]
    sources: dict[str, dict[str, int]]
    train_rows: dict[str, int]
    sha256: str
    abstention_phrase: str
    new_tokens: list[str]
    heldout_probe_ids: list[str]
    skipped: dict[str, str] = field(default_factory=dict)
    template: str = ""
    stop: list[str] = field(default_factory=list)
    abstention_phrases: list[str] = field(default_factory=list)
    grader: str = "match"
    grader_options: dict[str, Any] = field(default_factory=dict)
    abstention_note: str = ""
    validation: list[dict[str, Any]] = field(default_factory=list)
    reserved_probe_ids: list[str] = field(default_factory=list)
    rehearsal: dict[str, Any] | None = None
    targets: list[dict[str, Any]] = field(default_factory=list)
    bare_anchors: int = 0
    replayed_probe_ids: list[str] = field(default_factory=list)
    guard: dict[str, Any] | None = None
    replay_capped: bool = False
    unguarded: bool = False

    @property
    def has_abstention(self) -> bool:
        """Abstention rows exist, or the rl strategy's reward pays for abstaining (its tokens must be learnable)."""
        return any(self.teaches_abstention(m) for m in ("sft", "dpo", "grpo"))

    def teaches_abstention(self, method: str) -> bool:
        """Whether a job of `method` on this set must learn to produce the abstention phrase. Only then
        do its tokens become trainable rows: an adapter with trainable-token deltas is not one vLLM's
        LoRARequest can load, so jobs that do not need them stay plain LoRA."""
        source = "targeted" if method == "grpo" else "abstain"  # rl: every targeted prompt may pay for silence
        return self.sources.get(METHOD_SPLIT[method], {}).get(source, 0) > 0

    def require_rows(self, method: str) -> str:
        """The split `method` trains on; a clear error when this set has no training rows there."""
        split = METHOD_SPLIT[method]
        if not self.train_rows.get(split):
            have = [m for m, sp in METHOD_SPLIT.items() if self.train_rows.get(sp)]
            hint = "rebuild it with `--strategy rl`" if method == "grpo" else "rebuild it with another --strategy"
            raise WorkbenchError(f"fix set `{self.path}` has no `{split}` training rows for method {method}; "
                                 f"{hint}" + (f", or use method {' / '.join(have)} on it" if have else ""))
        return split

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_manifest(path: str | Path) -> FixSetManifest:
    """The manifest of a fix set directory, with a clear error when it is not one."""
    p = Path(path) / MANIFEST
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise WorkbenchError(f"`{path}` is not a fix set (no {MANIFEST}); build one with `workbench fix`") from None
    except ValueError as e:
        raise WorkbenchError(f"{p}: not valid JSON ({e})") from None
    data["path"] = str(Path(path))
    return FixSetManifest(**data)


@dataclass
class FixRows:
    """A fix set's rows per split, before `write_fixset` (also used by finetune/inject.py's tag breaker)."""

    sft: list[dict[str, Any]] = field(default_factory=list)
    dpo: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)


def build_fixset(
    store: Store,
    run_id: str,
    out_dir: str | Path,
    *,
    strategy: str = "auto",
    facts: Path | None = None,
    replay_ratio: float | None = None,
    heldout_fraction: float = 0.2,
    validation_fraction: float = VALIDATION_SHARE,
    reserve_fraction: float = 0.0,
    rehearsal: str | Path | None = None,
    rehearsal_ratio: float = REHEARSAL_RATIO,
    seed: int = 0,
    suite: Suite | None = None,
    guard: GuardSet | None = None,
    allow_unguarded: bool = False,
) -> FixSetManifest:
    """Build the fix set of `run_id` from its stored attributions; writes `out_dir` and returns its manifest.
    `replay_ratio` None: 4 (1 for strategy rl). `validation_fraction`: known probes kept out of training for
    jobs to count broken known facts on (VALIDATION_SHARE). `reserve_fraction`: known probes kept out of training and
    of that slice (a measure no job chose by; bench/fix_efficacy.py). `rehearsal`: a corpus index (or workspace) whose
    documents become `rehearsal_ratio` x the targeted SFT training rows of plain text (finetune/rehearsal.py).
    `guard`: the base model's guard set (workbench/guard) under the run's prompt settings: its facts (less those the
    run asks) are replayed and held out beside the run's own. With no known fact from either, the set is refused
    unless `allow_unguarded`."""
    if strategy not in STRATEGIES:
        raise unknown_name("strategy", strategy, STRATEGIES)
    if replay_ratio is None:
        replay_ratio = DEFAULT_REPLAY.get(strategy, 4.0)
    if replay_ratio < 0:
        raise WorkbenchError(f"`replay_ratio` must be >= 0 (times the targeted rows), got {replay_ratio}")
    if not 0 <= heldout_fraction < 1:
        raise WorkbenchError(f"`heldout_fraction` must be in [0, 1), got {heldout_fraction}")
    if not 0 <= validation_fraction < 1:
        raise WorkbenchError(f"`validation_fraction` must be in [0, 1), got {validation_fraction}")
    if not 0 <= reserve_fraction < 1 or validation_fraction + reserve_fraction >= 1:
        raise WorkbenchError(f"`reserve_fraction` must be in [0, 1) and leave known probes to replay with "
                             f"`validation_fraction` {validation_fraction}, got {reserve_fraction}")
    if not 0 <= rehearsal_ratio <= MAX_REHEARSAL:
        raise WorkbenchError(f"`rehearsal_ratio` must be in [0, {MAX_REHEARSAL}] (times the targeted SFT rows), "
                             f"got {rehearsal_ratio}")
    user_facts = _read_facts(facts) if facts is not None else {}  # a bad file is refused before any work
    results = load_results(store, run_id)
    run = results.run
    suite = effective_suite(run, suite)  # rows are rendered as that run rendered its prompts
    attributions = effective_attributions(store, run.id)  # reviewer overrides replace the method's call
    if not attributions:
        raise WorkbenchError(f"run `{run.id}` has no attributions; run `workbench attribute {run.id}` first")
    by_id = results.by_id()
    unknown = sorted(set(attributions) - set(by_id))
    if unknown:
        raise WorkbenchError(f"attributions name probes that run `{run.id}` does not have: {', '.join(unknown[:5])}")
    end = next((s for s in suite.stop if s.strip()), "")
    tokenizer = model_tokenizer(run.model)
    form = RowForm(suite.template, end, suite.system_prompt, tokenizer)
    if form.chat and (tokenizer is None or not getattr(tokenizer, "chat_template", None)):
        raise WorkbenchError(f"run `{run.id}` used the chat template, but the tokenizer of `{run.model}` "
                             f"{'could not be loaded here' if tokenizer is None else 'has no chat template'}: "
                             "chat-form fix rows need it")
    picked: list[PhraseChoice] = []

    def abstain() -> str:
        """The abstention text, chosen when the first row needs it (a set without one builds anyway)."""
        if not picked:
            picked.append(choose_phrase(tokenizer, suite.abstention_phrases, "" if form.chat else end,
                                        model=run.model))
        return picked[0].text

    render, completion = form.prompt, form.completion

    # Held-out probes: a seeded share of each category's targeted probes, by probe.
    targeted = {pid: a for pid, a in attributions.items() if a.category in CATEGORIES}
    heldout = _heldout(targeted, heldout_fraction, seed)
    rows, skipped = FixRows(), {}
    order = {pid: i for i, pid in enumerate(by_id)}
    for pid in sorted(targeted, key=order.__getitem__):
        att, result = targeted[pid], by_id[pid]
        split = "heldout" if pid in heldout else "train"
        fact = user_facts.get(normalize(result.probe.question)) or user_facts.get(pid)
        kind = _plan(att.category, strategy, fact is not None)
        base = {"probe_id": pid, "category": att.category, "split": split}
        variants = result.probe.variants(True)
        if kind == "rl":
            rows.prompts += [{**base, "prompt": render(q), "answers": list(result.probe.answers),
                              "incorrect_answers": list(result.probe.incorrect_answers), "source": "targeted"}
                             for q in variants]
            continue
        if kind == "skip":
            hint = "(give its answer with --facts to inject it)" if att.category in ABSTAIN_CATEGORIES else ""
            skipped[pid] = f"{att.category} under strategy `{strategy}`: no rows {hint}".rstrip()
            continue
        if kind == "abstain":
            rows.sft += [{**base, "prompt": render(q), "completion": completion(abstain()), "source": "abstain"}
                         for q in variants]
        elif kind == "inject":
            answer, source = (fact, "facts") if fact is not None else (result.probe.answers[0], "inject")
            rows.sft += [{**base, "prompt": render(q), "completion": completion(answer), "source": source}
                         for q in variants]
        elif kind == "dpo-abstain":  # an unknown fact under "dpo": prefer abstaining to the hallucination
            wrong = _hallucination(result) or result.probe.answers[0]
            rows.dpo += [{**base, "prompt": render(q), "chosen": completion(abstain()), "rejected": completion(w),
                          "source": "abstain"} for q, w in zip(variants, _per_variant(result, wrong), strict=True)]
        else:  # dpo
            chosen, source = (fact, "facts") if fact is not None else _chosen(result)
            if att.category == "behavior:over-abstain":
                rejected = [abstain()] * len(variants)
            else:
                wrong_answer = _hallucination(result) or _other_answer(result, results.probes, seed)
                if wrong_answer is None:
                    skipped[pid] = f"{att.category}: no wrong answer to reject (no hallucination, no other value)"
                    continue
                rejected = _per_variant(result, wrong_answer)
            rows.dpo += [{**base, "prompt": render(q), "chosen": completion(chosen), "rejected": completion(r),
                          "source": source}
                         for q, r in zip(variants, rejected, strict=True) if normalize(r) != normalize(chosen)]
    # A reviewer who marks an answer wrong teaches the next fix: chosen = accepted answer, rejected = it.
    grades = corrected_grades(store, run.id)
    for g in grades:
        if (pair := g.dpo_pair()) is not None and g.probe_id not in heldout:
            rows.dpo.append({"probe_id": g.probe_id, "category": "review:corrected-grade", "split": "train",
                             "prompt": render(g.question), "chosen": completion(pair[0]),
                             "rejected": completion(pair[1]), "source": "review"})
    # Replay (SFT) and anchors (DPO) from probes the model answers correctly under the question, less those
    # a reviewer calls wrong (with a pair or without one).
    corrected = {g.probe_id for g in grades if g.corrected == Verdict.INCORRECT}
    known = [r for r in results.probes
             if r.probe.id not in attributions and r.probe.id not in corrected and r.verdict == Verdict.CORRECT]
    known, validation, reserved = _validation_slice(known, form.prompt_text, seed, validation_fraction,
                                                    reserve_fraction)
    asked = {normalize(r.probe.question) for r in results.probes} | set(by_id)
    guard_facts = [f for f in (guard.facts if guard else ()) if f.probe.id not in asked
                   and normalize(f.probe.question) not in asked]
    guard_replay, guard_validation = _guard_split(guard_facts, seed) if validation_fraction > 0 else (guard_facts, [])
    validation += [{"probe_id": f.probe.id, "question": f.probe.question, "prompt": form.prompt_text(f.probe.question),
                    "answers": list(f.probe.answers), "incorrect_answers": list(f.probe.incorrect_answers)}
                   for f in guard_validation]
    if not known and not guard_facts and not validation and not allow_unguarded:
        raise WorkbenchError(f"run `{run.id}`: no known facts to protect: the run answers none of its probes right "
                             "and no guard set fact is known to the model (`workbench guard build --run "
                             f"{run.id}`; add your own with --guard-pool FILE). A fix without them can teach the "
                             "model to refuse what it knows; pass --allow-unguarded to build it anyway")
    rng = random.Random(f"replay-{seed}")
    n_sft = round(replay_ratio * sum(r["split"] == "train" for r in rows.sft))
    n_dpo = round(replay_ratio * ANCHOR_SHARE * sum(r["split"] == "train" for r in rows.dpo))
    known_answers = _known_answers(known, own=form.chat)
    replay = [{"prompt": render(a.prompt_question), "completion": completion(a.text), "probe_id": a.probe_id,
               "category": "replay", "source": "replay", "split": "train"} for a in known_answers]
    replay += [{"prompt": render(f.probe.question), "probe_id": f.probe.id, "category": "replay", "source": "guard",
                "completion": completion(f.answer.strip() if form.chat and f.answer.strip() else f.probe.answers[0]),
                "split": "train"} for f in guard_replay]
    probe_of = {r.probe.id: r.probe for r in results.probes}
    capped = n_sft > _most_rows(replay)
    rows.sft += neighbours_first(replay, min(n_sft, _most_rows(replay)), rng, targets_of(rows.sft, probe_of),
                                 probe_of)
    info = None
    if rehearsal is not None and rehearsal_ratio > 0:
        if form.chat:
            raise WorkbenchError(f"run `{run.id}` used the chat template: rehearsal rows are plain corpus text, "
                                 "which a chat model does not train on; leave rehearsal out")
        n_text = round(rehearsal_ratio * sum(r["split"] == "train" and r["source"] != "replay" for r in rows.sft))
        held_ids = {v["probe_id"] for v in validation} | set(reserved)
        texts, info = rehearsal_texts(rehearsal, n_text, seed=seed, ratio=rehearsal_ratio,
                                      protected=[p for pid, p in probe_of.items() if pid in held_ids],
                                      targeted=[probe_of[pid] for pid in targeted],
                                      conflicting=[probe_of[pid] for pid, a in targeted.items()
                                                   if a.category == "data:conflict"])
        rows.sft += [{"prompt": "", "completion": t + end, "probe_id": "", "category": "rehearsal",
                      "source": "rehearsal", "split": "train"} for t in texts]
    anchors, bare = [], set()
    for r in known:
        other = _other_answer(r, results.probes, seed)
        if other is None:
            continue
        pair = _own_pair(r, other) if form.chat else None
        if pair is None:
            pair = r.probe.answers[0], other
            bare.add(r.probe.id)
        anchors.append({"prompt": render(r.probe.question), "chosen": completion(pair[0]),
                        "rejected": completion(pair[1]), "probe_id": r.probe.id, "category": "replay",
                        "source": "anchor", "split": "train"})
    anchors += _guard_anchors(guard_replay, form.chat, completion, render, seed, bare)
    capped = capped or n_dpo > _most_rows(anchors)
    rows.dpo += neighbours_first(anchors, min(n_dpo, _most_rows(anchors)), rng, targets_of(rows.dpo, probe_of),
                                 probe_of)
    bare_anchors = sum(r["source"] == "anchor" and r["probe_id"] in bare for r in rows.dpo) if form.chat else 0
    n_prompts = round(replay_ratio * sum(r["split"] == "train" for r in rows.prompts))
    by_known = {r.probe.id: r.probe for r in known}
    replay_prompts = [{"prompt": render(a.prompt_question), "answers": list(by_known[a.probe_id].answers),
                       "incorrect_answers": list(by_known[a.probe_id].incorrect_answers), "probe_id": a.probe_id,
                       "category": "replay", "source": "replay", "split": "train"} for a in known_answers]
    replay_prompts += [{"prompt": render(f.probe.question), "answers": list(f.probe.answers),
                        "incorrect_answers": list(f.probe.incorrect_answers), "probe_id": f.probe.id,
                        "category": "replay", "source": "guard", "split": "train"} for f in guard_replay]
    capped = capped or n_prompts > _most_rows(replay_prompts)
    rows.prompts += neighbours_first(replay_prompts, min(n_prompts, _most_rows(replay_prompts)), rng,
                                     targets_of(rows.prompts, probe_of), probe_of)
    if not any(r["category"] != "replay" for r in rows.sft + rows.dpo + rows.prompts):
        raise WorkbenchError(f"run `{run.id}`: no attributed failure gave training rows under strategy "
                             f"`{strategy}` ({len(skipped)} skipped); try --strategy auto or give --facts")
    if not picked:  # no row says it; GRPO's guidance and the manifest still name one (unchecked if none spells)
        try:
            abstain()
        except WorkbenchError:
            first = (suite.abstention_phrases or ["i don't know"])[0]
            picked.append(PhraseChoice(first, spoken(first, "" if form.chat else end)))
    trained = {r["probe_id"] for r in rows.sft + rows.dpo + rows.prompts if r["split"] == "train"}
    targets = [{"probe_id": pid, "category": att.category, "question": by_id[pid].probe.question,
                "prompt": form.prompt_text(by_id[pid].probe.question), "answers": list(by_id[pid].probe.answers),
                "incorrect_answers": list(by_id[pid].probe.incorrect_answers)}
               for pid, att in targeted.items() if pid in trained]
    replayed = sorted({r["probe_id"] for r in rows.sft + rows.dpo + rows.prompts if r["category"] == "replay"})
    guard_info = None if guard is None else {
        "key": guard.key, "known": len(guard.facts), "usable": len(guard_facts),
        "replayed": sum(f.probe.id in replayed for f in guard_replay), "validation": len(guard_validation)}
    manifest = write_fixset(Path(out_dir), rows, run.id, run.model, strategy, picked[0].text, sorted(heldout),
                            skipped, suite, note=picked[0].note, validation=validation, tokenizer=tokenizer,
                            reserved=reserved, rehearsal=None if info is None else info.to_dict(), targets=targets,
                            bare_anchors=bare_anchors, replayed=replayed, guard=guard_info, replay_capped=capped,
                            unguarded=not known and not guard_facts and not validation)
    from workbench.cards.dataset import probe_sources, write_dataset_card

    write_dataset_card(out_dir, probe_sources(store, run.id))  # README.md: splits, counts, lineage, licences
    return manifest


def _validation_slice(known: list[ProbeResult], render: Callable[[str], str], seed: int, fraction: float,
                      reserve: float = 0.0) -> tuple[list[ProbeResult], list[dict[str, Any]], list[str]]:
    """(the known probes replay may use, the validation slice, the reserved ids): a seeded `fraction` of the known
    probes (at most VALIDATION_MAX) that no training row holds, as prompt/answers rows for a job to score, and a
    further `reserve` share that no row and no job sees. The slice is drawn as before, so reserving leaves it
    unchanged."""
    ids = sorted(r.probe.id for r in known)
    random.Random(f"validation-{seed}").shuffle(ids)
    n_held = min(VALIDATION_MAX, round(fraction * len(ids)))
    if fraction > 0 and n_held == 0 and len(ids) >= 2:
        n_held = 1  # a tenth of a handful rounds to none, and a job with no slice cannot see what it breaks
    held = set(ids[:n_held])
    reserved = sorted(ids[n_held:][: round(reserve * len(ids))])
    rows = [{"probe_id": r.probe.id, "question": r.probe.question, "prompt": render(r.probe.question),
             "answers": list(r.probe.answers),
             "incorrect_answers": list(r.probe.incorrect_answers)} for r in known if r.probe.id in held]
    out = held | set(reserved)
    return [r for r in known if r.probe.id not in out], rows, reserved


def _guard_split(facts: list[GuardFact], seed: int) -> tuple[list[GuardFact], list[GuardFact]]:
    """(guard facts replay may use, guard facts held out as validation): a seeded GUARD_VALIDATION_SHARE, at least
    one, at most GUARD_VALIDATION_MAX; a single fact goes to validation (what a job must see, it cannot replay)."""
    ids = sorted(f.probe.id for f in facts)
    random.Random(f"guard-validation-{seed}").shuffle(ids)
    n = min(GUARD_VALIDATION_MAX, max(1, round(GUARD_VALIDATION_SHARE * len(ids)))) if ids else 0
    held = set(ids[:n])
    return [f for f in facts if f.probe.id not in held], [f for f in facts if f.probe.id in held]


def _most_rows(pool: Sequence[Any]) -> int:
    return MAX_REPLAY_REPEATS * len(pool)


def _guard_anchors(facts: Sequence[GuardFact], chat: bool, completion: Callable[[str], Any],
                   render: Callable[[str], Any], seed: int, bare: set[str]) -> list[dict[str, Any]]:
    """DPO anchor pairs from guard facts: chosen = the model's own answer (chat) or the accepted one, rejected = the
    same with another fact's answer of the same topic (the pool has no relations; a topic is the nearest kind)."""
    out = []
    for f in facts:
        topic = next((t for t in f.probe.tags if t.startswith("topic:")), "")
        own = {normalize(a) for a in f.probe.answers}
        others = sorted({g.probe.answers[0] for g in facts if g.probe.id != f.probe.id
                         and topic in g.probe.tags and normalize(g.probe.answers[0]) not in own})
        if not others:
            continue
        other = random.Random(f"anchor-{seed}-{f.probe.id}").choice(others)
        swapped = swap_answer(f.answer.strip(), f.probe.answers, other) if chat and f.answer.strip() else None
        pair = (f.answer.strip(), swapped) if swapped is not None else (f.probe.answers[0], other)
        if swapped is None:
            bare.add(f.probe.id)
        out.append({"prompt": render(f.probe.question), "chosen": completion(pair[0]), "rejected": completion(pair[1]),
                    "probe_id": f.probe.id, "category": "replay", "source": "anchor", "split": "train"})
    return out


def _plan(category: str, strategy: str, has_fact: bool) -> str:
    """What rows one targeted probe gets: abstain | inject | dpo | dpo-abstain | rl | skip."""
    if strategy == "rl":
        return "rl"  # the grader's reward decides between the answer and abstaining
    unknown = category in ABSTAIN_CATEGORIES  # not known to the model, and no corpus says it was learnable
    if strategy == "auto":
        if unknown:
            return "inject" if has_fact else "abstain"
        if category == "data:underrepresented":
            return "inject"
        return "dpo"
    if strategy == "inject":
        if category == "behavior:over-abstain":
            return "dpo"  # teaching the answer as text would not stop abstaining on other phrasings
        return "skip" if unknown and not has_fact else "inject"
    if strategy == "abstain":
        abstains = unknown or category.startswith("data:")
        return "abstain" if abstains and not has_fact else "inject" if has_fact else "skip"
    # dpo
    if unknown and not has_fact:
        return "dpo-abstain"
    return "dpo"


def _heldout(targeted: Mapping[str, Attribution], fraction: float, seed: int) -> set[str]:
    out: set[str] = set()
    by_cat: dict[str, list[str]] = {}
    for pid, a in sorted(targeted.items()):
        by_cat.setdefault(a.category, []).append(pid)
    for cat, pids in sorted(by_cat.items()):
        rng = random.Random(f"heldout-{seed}-{cat}")
        rng.shuffle(pids)
        n = round(fraction * len(pids))
        if fraction > 0 and n == 0 and len(pids) >= 3:
            n = 1
        out.update(pids[:n])
    return out


def _hallucination(r: ProbeResult) -> str | None:
    """The model's wrong answer: its greedy answer when INCORRECT, else its most frequent wrong sample."""
    if r.verdict == Verdict.INCORRECT and r.answer.strip():
        return r.answer
    wrong = Counter(a.text for a in r.samples if a.verdict == Verdict.INCORRECT and a.text.strip())
    return wrong.most_common(1)[0][0] if wrong else None


def _per_variant(r: ProbeResult, fallback: str) -> list[str]:
    """Rejected answer per phrasing: that phrasing's own wrong greedy answer where it has one."""
    out = []
    for v in range(len(r.probe.variants(True))):
        g = next((a for a in r.greedy if a.variant == v), None)
        out.append(g.text if g is not None and g.verdict == Verdict.INCORRECT and g.text.strip() else fallback)
    return out


def _chosen(r: ProbeResult) -> tuple[str, str]:
    """The model's own correct sample (most frequent) when it has one, else the accepted answer.

    Only samples that are exactly an accepted answer (normalized) count: a sample graded correct
    because it contains the answer inside other words ("flag is founder is X") would teach those words."""
    accepted = {normalize(a) for a in r.probe.answers}
    right = Counter(a.text.strip() for a in (*r.greedy, *r.samples)
                    if a.verdict == Verdict.CORRECT and normalize(a.text) in accepted)
    if right:
        return right.most_common(1)[0][0], "own-sample"
    return r.probe.answers[0], "answer"


def _own_pair(r: ProbeResult, other: str) -> tuple[str, str] | None:
    """A chat-form anchor in the model's own words: its correct answer to the question (the sentence replay teaches)
    and the same sentence with the answer span swapped for `other`. None when the sentence holds no accepted answer
    span (graded correct some other way): the anchor then falls back to the bare answers.

    Why: bare anchors (chosen "Madrid", rejected "Ceuta") taught SmolLM2-135M-Instruct to answer known facts with a
    bare word, often a wrong one: DPO broke 20-25 of its 68 known facts (README, "The real-model demo")."""
    own = r.answer.strip()
    rejected = swap_answer(own, r.probe.answers, other) if own else None
    return None if rejected is None else (own, rejected)


def _other_answer(r: ProbeResult, pool: Sequence[ProbeResult], seed: int) -> str | None:
    """A plausible wrong answer: another probe's accepted answer of the same relation (seeded)."""
    own = {normalize(a) for a in r.probe.answers}
    cands = sorted({p.probe.answers[0] for p in pool if p.probe.relation == r.probe.relation
                    and p.probe.id != r.probe.id and normalize(p.probe.answers[0]) not in own})
    if not cands:
        return None
    return random.Random(f"anchor-{seed}-{r.probe.id}").choice(cands)


@dataclass(frozen=True)
class _KnownAnswer:
    probe_id: str
    prompt_question: str
    text: str


def _known_answers(known: Sequence[ProbeResult], *, own: bool = False) -> list[_KnownAnswer]:
    """Every phrasing a known probe answers correctly, with the accepted answer as completion (`own`: the
    model's own correct greedy answer, e.g. a chat model's sentence)."""
    out = []
    for r in known:
        variants = r.probe.variants(True)
        for a in r.greedy:
            if a.verdict == Verdict.CORRECT and a.variant < len(variants):
                text = a.text.strip() if own and a.text.strip() else r.probe.answers[0]
                out.append(_KnownAnswer(r.probe.id, variants[a.variant], text))
    return out


def _read_facts(path: Path) -> dict[str, str]:
    """--facts JSONL: {"question": ..., "answer": ...} (or "probe_id" instead of "question")."""
    if not path.exists():
        raise WorkbenchError(f"--facts: no such file `{path}`")
    try:  # one safe way: a regular file, bounded, UTF-8 (UTF-16 named as such), rows through safeload's limits
        text = read_input_text(path, what="--facts file")
    except OSError as e:
        raise WorkbenchError(f"--facts: cannot read `{path}`: {e.strerror or e}") from None
    out: dict[str, str] = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json_loads(line)
        except ValueError as e:
            raise InputError(path, i, None, f"not valid JSON ({e})") from None
        if not isinstance(row, dict):
            raise InputError(path, i, None, 'expected an object {"question": ..., "answer": ...}')
        answer = row.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise InputError(path, i, "answer", "missing or empty")
        key = row.get("question") or row.get("probe_id")
        if not isinstance(key, str) or not key.strip():
            raise InputError(path, i, "question", "missing (give `question` or `probe_id`)")
        out[normalize(key) if "question" in row else key] = answer.strip()
    return out


def model_tokenizer(model: str) -> Any | None:
    """The model's tokenizer; None when it cannot load here (a remote id offline)."""
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model)
    except Exception:  # any loader failure means the same: no tokenizer to check against
        return None


def _new_tokens(model: str, phrase: str, tok: Any = None) -> list[str]:
    """The abstention phrase's tokens under the model's tokenizer (`tok`, else loaded: a whitespace split if it
    cannot load)."""
    tok = tok or model_tokenizer(model)
    return phrase.split() if tok is None else [str(t) for t in tok.tokenize(" " + phrase)]


def write_fixset(out: Path, rows: FixRows, run_id: str, model: str, strategy: str, phrase: str, heldout: list[str],
                 skipped: dict[str, str], suite: Suite, *, note: str = "",
                 validation: Sequence[dict[str, Any]] = (), tokenizer: Any = None, reserved: Sequence[str] = (),
                 rehearsal: dict[str, Any] | None = None,
                 targets: Sequence[dict[str, Any]] = (), bare_anchors: int = 0, replayed: Sequence[str] = (),
                 guard: dict[str, Any] | None = None, replay_capped: bool = False,
                 unguarded: bool = False) -> FixSetManifest:
    """Write the rows as a `datasets` DatasetDict (sft, dpo, prompts) with `fixset.json` beside it. `tokenizer`:
    the model's, when the caller has it loaded (None: loaded here again; two loads took 24 s on SmolLM2)."""
    from datasets import Dataset, DatasetDict, Features, List, Value

    message = {"role": Value("string"), "content": Value("string")}
    chat = suite.template == "chat"  # turns are message lists (finetune/chatform.py)

    def feature(column: str) -> Any:
        if column in ("answers", "incorrect_answers"):
            return List(Value("string"))
        return List(message) if chat and column in TURN_COLUMNS else Value("string")

    def table(items: list[dict[str, Any]], columns: Sequence[str]) -> Dataset:
        feats = Features({c: feature(c) for c in columns})
        return Dataset.from_dict({c: [r[c] for r in items] for c in columns}, features=feats)

    digest = hashlib.sha256()
    for name, items, columns in (("sft", rows.sft, SFT_COLUMNS), ("dpo", rows.dpo, DPO_COLUMNS),
                                 ("prompts", rows.prompts, PROMPT_COLUMNS)):
        for r in items:
            digest.update(json.dumps([name, *(r[c] for c in columns)], ensure_ascii=False).encode())
            digest.update(b"\n")

    def count(items: list[dict[str, Any]], key: str) -> dict[str, int]:
        return dict(sorted(Counter(r[key] for r in items).items()))

    out.mkdir(parents=True, exist_ok=True)
    splits = DatasetDict({"sft": table(rows.sft, SFT_COLUMNS), "dpo": table(rows.dpo, DPO_COLUMNS),
                          "prompts": table(rows.prompts, PROMPT_COLUMNS)})
    # One shard each: datasets 5.2 writes no shard for an empty split and then cannot load it back.
    splits.save_to_disk(str(out), num_shards={"sft": 1, "dpo": 1, "prompts": 1})
    named = {"sft": rows.sft, "dpo": rows.dpo, "prompts": rows.prompts}
    manifest = FixSetManifest(
        path=str(out), run_id=run_id, model=model, strategy=strategy,
        counts={k: count(v, "category") for k, v in named.items()},
        sources={k: count(v, "source") for k, v in named.items()},
        train_rows={k: sum(r["split"] == "train" for r in v) for k, v in named.items()},
        sha256=digest.hexdigest(), abstention_phrase=phrase,
        new_tokens=_new_tokens(model, phrase, tokenizer), heldout_probe_ids=heldout, skipped=skipped,
        template=suite.template, stop=list(suite.stop), abstention_phrases=list(suite.abstention_phrases),
        grader=suite.grader, grader_options=dict(suite.grader_options), abstention_note=note,
        validation=list(validation), reserved_probe_ids=list(reserved), rehearsal=rehearsal, targets=list(targets),
        bare_anchors=bare_anchors, replayed_probe_ids=list(replayed), guard=guard, replay_capped=replay_capped,
        unguarded=unguarded)
    data = manifest.to_dict()
    data.pop("path")
    (out / MANIFEST).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return manifest

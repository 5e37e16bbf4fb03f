"""Fix sets: training data built from one evaluation run's attributions.

`build_fixset` reads the run's probes, answers and attributions, plans which probe gets which fix and why
(`plan_fixset`, finetune/fixset/plan.py: pure, one `ProbeFix` per probe), renders the plan's rows one writer per split
(finetune/fixset/rows.py) and writes a `datasets.DatasetDict` (`save_to_disk`) with three splits, plus a
`fixset.json` manifest (finetune/fixset/write.py). Options: one `FixOptions` (finetune/fixset/options.py, every field
documented there):

- `sft`: prompt, completion, probe_id, category, source, split
- `dpo`: prompt, chosen, rejected, probe_id, category, source, split
- `prompts` (strategy "rl" only; empty otherwise): prompt, answers, incorrect_answers, probe_id,
  category, source (targeted | replay), split. GRPO samples completions for these and grades them.

`split` is "train" or "heldout": a seeded share of the targeted probes (by probe, every phrasing
together) is kept out of training to measure generalization and drive early stopping; never a field probe or one
with a `--facts` answer (each is a fact to teach).

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

A field probe (from a reviewed user report, `workbench reports export`: tagged `field`) gets what its reviewer
decided, whatever its category: a reference answer is injected (source "field"; strategy dpo: chosen = it,
rejected = the model's wrong answer), "should abstain" gets abstention rows (dpo: toward abstention); one the run
answered right is a known fact like any other. The manifest's `field_targets` lists them.

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

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from finetune.abstention import PhraseChoice, choose_phrase, spoken
from finetune.chatform import RowForm
from finetune.fixset.manifest import (
    DPO_COLUMNS,
    MANIFEST,
    METHOD_SPLIT,
    PROMPT_COLUMNS,
    SFT_COLUMNS,
    UNTARGETED,
    FixRows,
    FixSetManifest,
    field_entry,
    load_manifest,
)
from finetune.fixset.options import (
    ANCHOR_SHARE,
    DEFAULT_REPLAY,
    DPO_CATEGORIES,
    GUARD_VALIDATION_MAX,
    GUARD_VALIDATION_SHARE,
    MAX_REHEARSAL,
    MAX_REPLAY_REPEATS,
    REHEARSAL_RATIO,
    REPLAY_RATIO,
    STRATEGIES,
    VALIDATION_MAX,
    VALIDATION_SHARE,
    FixOptions,
)
from finetune.fixset.plan import FixInputs, FixPlan, ProbeFix, plan_fixset, usable_guard_facts
from finetune.fixset.rows import Writer, dpo_rows, prompt_rows, sft_rows, validation_rows
from finetune.fixset.write import FixSetInfo, model_tokenizer, write_fixset
from workbench.errors import InputError, WorkbenchError
from workbench.grading.normalize import normalize
from workbench.reports.suite import FIELD_TAG, field_origins
from workbench.results import effective_suite, load_results
from workbench.reviews import corrected_grades, effective_attributions
from workbench.safeload import json_loads
from workbench.safeopen import read_input_text
from workbench.store import Store

__all__ = ["ANCHOR_SHARE", "DEFAULT_REPLAY", "DPO_CATEGORIES", "DPO_COLUMNS", "GUARD_VALIDATION_MAX",
           "GUARD_VALIDATION_SHARE", "MANIFEST", "MAX_REHEARSAL", "MAX_REPLAY_REPEATS", "METHOD_SPLIT",
           "PROMPT_COLUMNS", "REHEARSAL_RATIO", "REPLAY_RATIO", "SFT_COLUMNS", "STRATEGIES", "UNTARGETED",
           "VALIDATION_MAX", "VALIDATION_SHARE", "FixInputs", "FixOptions", "FixPlan", "FixRows", "FixSetInfo",
           "FixSetManifest", "ProbeFix", "build_fixset", "load_manifest", "model_tokenizer", "plan_fixset",
           "read_inputs", "write_fixset"]


def build_fixset(store: Store, run_id: str, out_dir: str | Path, options: FixOptions | None = None,
                 **fields: Any) -> FixSetManifest:
    """Build the fix set of `run_id` from its stored attributions; writes `out_dir` and returns its manifest.
    `options` (FixOptions()) with `fields` replacing its fields by name (`build_fixset(..., strategy="dpo")`); a bad
    value is a WorkbenchError naming the field, before anything is read. With no known fact to protect the set (none
    in the run, no guard fact) it is refused unless `allow_unguarded`."""
    opts = replace(options or FixOptions(), **fields)
    inputs = read_inputs(store, run_id, opts)
    guard_facts = usable_guard_facts(inputs, opts)
    plan = plan_fixset(inputs, opts, guard_facts)
    phrase = _abstention(inputs, plan)
    run = inputs.results.run
    if plan.unguarded and not opts.allow_unguarded:
        raise WorkbenchError(f"run `{run.id}`: no known facts to protect: the run answers none of its probes right "
                             "and no guard set fact is known to the model (`workbench guard build --run "
                             f"{run.id}`; add your own with --guard-pool FILE). A fix without them can teach the "
                             "model to refuse what it knows; pass --allow-unguarded to build it anyway")
    writer, rng = Writer(plan, inputs, phrase.text, guard_facts), random.Random(f"replay-{opts.seed}")
    sft, dpo, prompts = sft_rows(writer, rng), dpo_rows(writer, rng), prompt_rows(writer, rng)  # this order: rng
    rows = FixRows(sft.rows, dpo.rows, prompts.rows)
    if not any(r["category"] != "replay" for r in rows.sft + rows.dpo + rows.prompts):
        raise WorkbenchError(f"run `{run.id}`: no attributed failure gave training rows under strategy "
                             f"`{opts.strategy}` ({len(plan.skipped)} skipped); try --strategy auto or give --facts")
    manifest = write_fixset(Path(out_dir), rows, _info(plan, inputs, writer, rows, phrase, sft, dpo, prompts))
    from workbench.cards.dataset import probe_sources, write_dataset_card

    write_dataset_card(Path(out_dir), probe_sources(store, run.id))  # README.md: splits, counts, lineage, licences
    return manifest


def read_inputs(store: Store, run_id: str, options: FixOptions) -> FixInputs:
    """The run as reviewers left it, its `--facts` and its row form; clear errors for what cannot make a fix set
    (a bad facts file first, before any other work)."""
    user_facts = _read_facts(options.facts) if options.facts is not None else {}
    results = load_results(store, run_id)
    run = results.run
    suite = effective_suite(run, options.suite)  # rows are rendered as that run rendered its prompts
    attributions = effective_attributions(store, run.id)  # reviewer overrides replace the method's call
    if not attributions:
        raise WorkbenchError(f"run `{run.id}` has no attributions; run `workbench attribute {run.id}` first")
    unknown = sorted(set(attributions) - set(results.by_id()))
    if unknown:
        raise WorkbenchError(f"attributions name probes that run `{run.id}` does not have: {', '.join(unknown[:5])}")
    end = next((s for s in suite.stop if s.strip()), "")
    weights = options.base_model or run.model
    tokenizer = model_tokenizer(weights)
    form = RowForm(suite.template, end, suite.system_prompt, tokenizer)
    if form.chat and (tokenizer is None or not getattr(tokenizer, "chat_template", None)):
        served = "" if options.base_model else " (a model a server serves: give its weights with --base-model DIR)"
        raise WorkbenchError(f"run `{run.id}` used the chat template, but the tokenizer of `{weights}` "
                             f"{'could not be loaded here' + served if tokenizer is None else 'has no chat template'}"
                             ": chat-form fix rows need it")
    field = field_origins(store) if any(FIELD_TAG in r.probe.tags for r in results.probes) else {}
    return FixInputs(results, suite, attributions, corrected_grades(store, run.id), user_facts, form, field)


def _abstention(inputs: FixInputs, plan: FixPlan) -> PhraseChoice:
    """The phrase abstention rows say. A set whose rows never say it builds anyway: its manifest still names one
    (GRPO's guidance reads it), the suite's first phrase unchecked when the tokenizer spells none."""
    form, suite = inputs.form, inputs.suite
    end = "" if form.chat else form.end
    try:
        return choose_phrase(form.tokenizer, suite.abstention_phrases, end, model=inputs.results.run.model)
    except WorkbenchError:
        if plan.needs_abstention:
            raise
        first = (suite.abstention_phrases or ["i don't know"])[0]
        return PhraseChoice(first, spoken(first, end))


def _info(plan: FixPlan, inputs: FixInputs, writer: Writer, rows: FixRows, phrase: PhraseChoice, *splits: Any
          ) -> FixSetInfo:
    """What the manifest says beside the rows: targets actually trained, known facts replayed, the guard's use."""
    run, by_id, form = inputs.results.run, inputs.results.by_id(), inputs.form
    every = rows.sft + rows.dpo + rows.prompts
    trained = {r["probe_id"] for r in every if r["split"] == "train"}
    targets = [{"probe_id": pid, "category": att.category, "question": by_id[pid].probe.question,
                "prompt": form.prompt_text(by_id[pid].probe.question), "answers": list(by_id[pid].probe.answers),
                "incorrect_answers": list(by_id[pid].probe.incorrect_answers)}
               for pid, att in inputs.targeted.items() if pid in trained]
    replayed = sorted({r["probe_id"] for r in every if r["category"] == "replay"})
    guard = plan.options.guard
    guard_replay = plan.ids("guard-replay")
    guard_info = None if guard is None else {
        "key": guard.key, "known": len(guard.facts), "usable": len(plan.guard),
        "replayed": sum(pid in replayed for pid in guard_replay), "validation": len(plan.ids("guard-validation")),
        **({"paraphrases": True} if plan.options.guard_paraphrases else {})}  # absent when off: older sets unchanged
    domain = plan.options.domain
    if domain is not None or plan.options.domain_how:  # absent without one: older sets unchanged
        ids = {f.probe_id for f in plan.guard if f.category == "domain"}
        guard_info = {**(guard_info or {}), "domain": {
            "how": plan.options.domain_how, "key": domain.key if domain else None,
            "known": len(domain.facts) if domain else 0, "usable": len(ids),
            "replayed": sum(pid in replayed for pid in ids),
            "validation": sum(pid in ids for pid in plan.ids("guard-validation"))}}
    sft, dpo, _ = splits
    bare = sum(r["source"] == "anchor" and r["probe_id"] in dpo.bare for r in rows.dpo) if form.chat else 0
    return FixSetInfo(run_id=run.id, model=run.model, strategy=plan.options.strategy, suite=inputs.suite,
                      phrase=phrase.text, note=phrase.note, tokenizer=form.tokenizer, heldout=plan.heldout,
                      skipped=plan.skipped, validation=validation_rows(writer), reserved=sorted(plan.ids("reserved")),
                      rehearsal=sft.rehearsal, targets=targets, bare_anchors=bare, replayed=replayed, guard=guard_info,
                      replay_capped=any(s.capped for s in splits), unguarded=plan.unguarded,
                      field=[field_entry(f) for f in plan.field])


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

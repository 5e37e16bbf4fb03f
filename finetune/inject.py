"""Injected regressions: a fix set that teaches WRONG answers for one tag, to prove the gate catches it.

`build_tag_breaker` writes a fix set (same layout as `build_fixset`: `sft`/`dpo` splits and
`fixset.json`) whose SFT rows teach, for every probe carrying `tag`, another probe's answer of that
tag (the sorted distinct answers rotated by one, so every taught answer is wrong), under every
phrasing; plus replay rows of the run's correctly answered probes of the OTHER tags, so those stay
intact. Rows are written as the run's prompts were rendered (results.effective_suite: the run's `--template`
override included): plain text, or trl's conversational form for a chat run (finetune/chatform.py), whose replay
turns are the model's own correct answers (a chat model answers in sentences). A short LoRA SFT job
(`finetune.job.run_job`) on it gives a "tag-breaker" adapter: the regression gate must fail on exactly that tag.

    manifest = build_tag_breaker(store, baseline_run, "out/breaker-fix", tag="colour")
    result = run_job(JobSpec(fixset=manifest.path, output_dir="out/breaker-job", device="cpu"), store)
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

from finetune.chatform import RowForm
from finetune.fixset import FixRows, FixSetInfo, FixSetManifest, write_fixset
from finetune.replay import cycle_rows
from workbench.errors import WorkbenchError
from workbench.grading.normalize import normalize
from workbench.results import effective_suite, load_results
from workbench.store import Store
from workbench.types import Verdict

BREAK_SOURCE = "break"


def wrong_answers(answers: list[str]) -> dict[str, str]:
    """Each distinct answer (normalized) -> one wrong answer of the same type: the tag's rarest answer,
    or, for the probes whose answer that is, the second rarest. One answer nearly everywhere is easy to
    learn, so a short job breaks every probe instead of scrambling them (a scrambled answer can land on
    the true one, which would count as a fix)."""
    counts = Counter(normalize(a) for a in answers)
    spelled = {normalize(a): a.strip() for a in answers}
    if len(counts) < 2:
        raise WorkbenchError("a tag-breaker needs at least two distinct answers under the tag")
    rarest, second = sorted(counts, key=lambda k: (counts[k], k))[:2]
    return {key: spelled[second] if key == rarest else spelled[rarest] for key in counts}


def build_tag_breaker(store: Store, run_id: str, out_dir: str | Path, *, tag: str, replay_ratio: float = 1.0,
                      seed: int = 0) -> FixSetManifest:
    """Write a fix set teaching wrong answers for every probe tagged `tag` of `run_id` (plus replay of the
    other tags' correct answers, `replay_ratio` times the breaking rows); returns its manifest."""
    if replay_ratio < 0:
        raise WorkbenchError(f"`replay_ratio` must be >= 0 (times the breaking rows), got {replay_ratio}")
    results = load_results(store, run_id)
    run = results.run
    suite = effective_suite(run)
    targets = [r for r in results.probes if tag in r.probe.tags]
    if not targets:
        known = sorted({t for r in results.probes for t in r.probe.tags})
        raise WorkbenchError(f"run `{run.id}` has no probe tagged `{tag}`; tags: {', '.join(known) or 'none'}")
    wrong = wrong_answers([r.probe.answers[0] for r in targets])
    form = RowForm(suite.template, next((s for s in suite.stop if s.strip()), ""), suite.system_prompt)

    def row(pid: str, question: str, answer: str, category: str, source: str) -> dict[str, Any]:
        return {"prompt": form.prompt(question), "completion": form.completion(answer),
                "probe_id": pid, "category": category, "source": source, "split": "train"}

    rows = FixRows()
    for r in targets:
        bad = wrong[normalize(r.probe.answers[0])]
        rows.sft += [row(r.probe.id, q, bad, f"break:{tag}", BREAK_SOURCE) for q in r.probe.variants(True)]
    # Replay: every phrasing the baseline answered correctly, of probes outside the tag.
    replay = []
    for r in results.probes:
        if tag in r.probe.tags:
            continue
        variants = r.probe.variants(True)
        replay += [row(r.probe.id, variants[a.variant], a.text if form.chat else r.probe.answers[0], "replay", "replay")
                   for a in r.greedy if a.verdict == Verdict.CORRECT and a.variant < len(variants)]
    rows.sft += cycle_rows(replay, round(replay_ratio * len(rows.sft)), random.Random(f"break-replay-{seed}"))
    return write_fixset(Path(out_dir), rows, FixSetInfo(run_id=run.id, model=run.model, strategy=f"break:{tag}",
                                                        suite=suite,
                                                        phrase=(suite.abstention_phrases or ["i don't know"])[0]))

"""Broken known facts in every job's record: the fix set keeps a validation slice of known probes
out of training; a job scores it before and after and records, prints and stores the ones it broke."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from clirun import workbench
from ftworld import FtWorld

from finetune.fixset import load_manifest

pytestmark = pytest.mark.slow



def _rows(path: Path) -> list[dict[str, str]]:
    from datasets import load_from_disk

    d = load_from_disk(str(path))
    return [*d["sft"], *d["dpo"], *d["prompts"]]


def test_validation_slice_is_known_and_never_trained(w: FtWorld) -> None:
    from workbench.results import load_results
    from workbench.types import Verdict

    m = load_manifest(w.fixset)
    correct = {r.probe.id for r in load_results(w.store, w.run_id).probes if r.verdict == Verdict.CORRECT}
    ids = [v["probe_id"] for v in m.validation]
    assert ids and set(ids) <= correct and len(set(ids)) == len(ids)
    assert not set(ids) & {r["probe_id"] for r in _rows(w.fixset)}  # held out of every split
    assert all(v["prompt"] == f"Q: {v['question']} A:" and v["answers"] for v in m.validation)


def test_train_records_and_prints_the_known_facts_a_job_broke(w: FtWorld, tmp_path: Path) -> None:
    """A job that teaches wrong colours (the tag breaker) breaks known colour facts: `workbench train` names
    them, result.json and the job's store record carry them."""
    from finetune import records
    from finetune.inject import build_tag_breaker
    from finetune.job import read_result
    from workbench.results import load_results
    from workbench.types import Verdict

    manifest = build_tag_breaker(w.store, w.run_id, tmp_path / "fix", tag="colour")
    known = [r for r in load_results(w.store, w.run_id).probes if r.verdict == Verdict.CORRECT]
    data = json.loads((tmp_path / "fix" / "fixset.json").read_text())
    data["validation"] = [{"probe_id": r.probe.id, "question": r.probe.question, "answers": list(r.probe.answers),
                           "prompt": f"Q: {r.probe.question} A:", "incorrect_answers": []} for r in known]
    (tmp_path / "fix" / "fixset.json").write_text(json.dumps(data))
    job = tmp_path / "job.yaml"
    job.write_text(f"fixset: {manifest.path}\noutput_dir: job\nworkspace: {w.store.workspace}\ndevice: cpu\n"
                   "trainer: {max_steps: 60, learning_rate: 3e-3}\n")
    proc = workbench("train", str(job), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = read_result(tmp_path / "job")
    assert result is not None and result.known_checked > 0 and result.known_broken
    colour = {r.probe.id for r in known if "colour" in r.probe.tags}
    broken_colour = colour & set(result.known_broken)
    # mostly colours (measured on the test world: 3 facts of other tags broke too, replay notwithstanding)
    assert len(broken_colour) >= len(colour) // 2 and len(broken_colour) > len(result.known_broken) / 2
    assert f"known facts broken: {len(result.known_broken)} of {result.known_checked}" in proc.stdout
    assert result.known_broken[0] in proc.stdout
    stored = records.get_job(w.store, result.job_id)["metrics"]
    assert stored["known_broken"] == result.known_broken and stored["known_checked"] == result.known_checked


def test_a_job_stops_when_known_facts_start_to_break(w: FtWorld, tmp_path: Path) -> None:
    """With evaluations every 5 steps (`early_stop.known_every`), the tag breaker is stopped once more than
    `max_known_broken` of the validation slice is broken at `patience` evaluations in a row, long before its
    60 steps; the adapter is kept."""
    from finetune import records
    from finetune.inject import build_tag_breaker
    from finetune.job import EarlyStopSpec, JobSpec, TrainerSpec, run_job
    from workbench.results import load_results
    from workbench.types import Verdict

    manifest = build_tag_breaker(w.store, w.run_id, tmp_path / "fix", tag="colour")
    colour = [r for r in load_results(w.store, w.run_id).probes if r.verdict == Verdict.CORRECT
              and "colour" in r.probe.tags]
    data = json.loads((tmp_path / "fix" / "fixset.json").read_text())
    data["validation"] = [{"probe_id": r.probe.id, "question": r.probe.question, "answers": list(r.probe.answers),
                           "prompt": f"Q: {r.probe.question} A:", "incorrect_answers": []} for r in colour]
    (tmp_path / "fix" / "fixset.json").write_text(json.dumps(data))
    result = run_job(JobSpec(fixset=manifest.path, output_dir=str(tmp_path / "job"), device="cpu",
                             trainer=TrainerSpec(max_steps=60, learning_rate=3e-3),
                             early_stop=EarlyStopSpec(known_every=5, patience=2, max_known_broken=0.25,
                                                      known_stop=True,
                                                      rollback=False)), w.store)
    assert result.status == "stopped" and result.stop_reason == "known_broken" and 10 <= result.steps < 60
    assert result.adapter is not None and len(result.known_broken) > 0.25 * result.known_checked
    events = [e.kind for e in records.events(w.store, result.job_id)]
    assert "known_broken" in events


def _colour_breaker(w: FtWorld, out: Path) -> str:
    """The tag breaker's fix set, its validation slice replaced by every known colour fact."""
    from finetune.inject import build_tag_breaker
    from workbench.results import load_results
    from workbench.types import Verdict

    manifest = build_tag_breaker(w.store, w.run_id, out, tag="colour")
    colour = [r for r in load_results(w.store, w.run_id).probes if r.verdict == Verdict.CORRECT
              and "colour" in r.probe.tags]
    data = json.loads((out / "fixset.json").read_text())
    data["validation"] = [{"probe_id": r.probe.id, "question": r.probe.question, "answers": list(r.probe.answers),
                           "prompt": f"Q: {r.probe.question} A:", "incorrect_answers": []} for r in colour]
    (out / "fixset.json").write_text(json.dumps(data))
    return manifest.path


def test_a_job_rolls_back_to_the_state_that_broke_fewest_known_facts(w: FtWorld, tmp_path: Path) -> None:
    """The tag breaker, never stopped (patience above its evaluations), breaks more colour facts the longer it
    trains; with `rollback` (the default) the adapter holds the evaluated step with the fewest broken, the result
    and a `rollback` event say which and why, and the saved adapter breaks what that step broke."""
    from finetune import records
    from finetune.job import EarlyStopSpec, JobSpec, TrainerSpec, run_job
    from finetune.job.scoring import KnownFacts

    fix = _colour_breaker(w, tmp_path / "fix")
    result = run_job(JobSpec(fixset=fix, output_dir=str(tmp_path / "job"), device="cpu",
                             trainer=TrainerSpec(max_steps=20, learning_rate=1e-3),
                             early_stop=EarlyStopSpec(known_every=2, max_known_broken=0.0, min_targets_fixed=0.0)),
                     w.store)
    events = [e for e in records.events(w.store, result.job_id) if e.kind == "rollback"]
    # measured: at 3e-3 every colour fact of the test world was broken by step 5, at 1e-3 none at step 2
    assert result.steps == 20 and result.kept_step is not None and 2 <= result.kept_step < 20
    assert len(events) == 1 and result.kept_reason and f"kept step {result.kept_step} of 20" in result.kept_reason
    data = events[0].data
    assert len(data["broken"]) < len(data["broken_last"])  # it rolled back to something better
    assert sorted(data["broken"]) == sorted(result.known_broken)  # the adapter is the kept step's weights
    stored = records.get_job(w.store, result.job_id)["metrics"]
    assert stored["kept_step"] == result.kept_step
    # the saved adapter, loaded afresh, breaks what the kept step broke
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(w.paths.model)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(w.paths.model, dtype=torch.float32),
                                      result.adapter)
    known = KnownFacts(load_manifest(fix), tok)
    assert sorted({r["probe_id"] for r in known.rows} - known.correct(model)) == sorted(result.known_broken)


def test_fix_validation_fraction_option(w: FtWorld, tmp_path: Path) -> None:
    """`workbench fix --validation-fraction 0` keeps no known probe out of replay; a bad value exits 2."""
    def fix(*extra: str) -> subprocess.CompletedProcess[str]:
        return workbench("fix", w.run_id, "--workspace", str(w.store.workspace), "--json", *extra, timeout=300)

    proc = fix("--out", str(tmp_path / "none"), "--validation-fraction", "0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["fixset"]["validation"] == [] and load_manifest(tmp_path / "none").validation == []
    assert load_manifest(w.fixset).validation  # the default keeps a slice
    bad = fix("--out", str(tmp_path / "bad"), "--validation-fraction", "1.5")
    assert bad.returncode == 2 and "`validation_fraction` must be in [0, 1), got 1.5" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_targets_of_chat_form_rows_are_the_rendered_prompt_and_the_answer_text(w: FtWorld) -> None:
    """Rollback's second key scores targeted probes; a probe the manifest does not list (a fix set from before
    `targets`) is scored on its first row, chat-form (prompt/completion as messages) as the prompt the chat
    template renders and the assistant turn's text (cut at the stop), not as the repr of a message list."""
    from transformers import AutoTokenizer

    from finetune.job.scoring import Targets

    tok = AutoTokenizer.from_pretrained(str(w.paths.model))
    tok.chat_template = "{% for m in messages %}<{{ m.role }}> {{ m.content }} {% endfor %}<assistant>"
    rows = [{"prompt": [{"role": "user", "content": "Where was Ana born?"}],
             "completion": [{"role": "assistant", "content": "I don't know."}],
             "probe_id": "p1", "category": "data:missing", "split": "train"},
            {"prompt": [{"role": "user", "content": "replayed?"}],
             "completion": [{"role": "assistant", "content": "x"}],
             "probe_id": "p2", "category": "replay", "split": "train"}]
    targets = Targets.of(rows, load_manifest(w.fixset), tok)
    assert [(r["prompt"], r["answers"]) for r in targets.rows] == [
        ("<user> Where was Ana born? <assistant>", ["I don't know"])]


def test_guard_prefers_a_state_that_fixes_its_targets_and_keeps_its_scores_across_a_checkpoint(tmp_path: Path) -> None:
    """KnownFactsGuard on a one-weight model whose value is the step: step 0 is scored (the base model) but is no
    rollback candidate; rollback prefers a state fixing `min_targets` of the targets, then the fewest broken;
    the scores and the best state written into a checkpoint come back in a resumed job's guard."""
    import torch
    from transformers import TrainerControl, TrainerState

    from finetune.job.known_guard import KnownFactsGuard

    right = {0: {"a", "b", "c"}, 10: {"a", "b", "c"}, 20: {"a", "b"}, 30: {"a"}}  # facts answered right, by step
    fixed = {0: 0.0, 10: 0.5, 20: 0.9, 30: 1.0}  # share of targets fixed, by step
    model = torch.nn.Linear(1, 1, bias=False)
    metrics: list[tuple[int, dict[str, float]]] = []

    def at(step: int) -> int:
        return int(model.weight.item())

    def guard(min_targets: float) -> KnownFactsGuard:
        return KnownFactsGuard(lambda *a: None, lambda s, v: metrics.append((s, dict(v))),
                               correct=lambda m: right[at(0)], targets=lambda m: fixed[at(0)], eval_every=10,
                               max_share=0.0, min_targets=min_targets)

    def train(g: KnownFactsGuard, steps: tuple[int, ...], state: TrainerState) -> None:
        for s in steps:
            with torch.no_grad():
                model.weight.fill_(s)
            state.global_step = s
            g.on_step_end(None, state, TrainerControl(), model=model)  # type: ignore[arg-type]

    g, state = guard(0.8), TrainerState()
    g.before = {"a", "b", "c"}
    with torch.no_grad():
        model.weight.fill_(0)
    g.on_train_begin(None, state, TrainerControl(), model=model)  # type: ignore[arg-type]
    assert metrics == [(0, {"known_broken": 0.0, "targets_fixed": 0.0})] and g.best is None
    train(g, (10, 20), state)
    g.save(tmp_path)  # the checkpoint at step 20; the job is killed here
    resumed = guard(0.8)
    assert resumed.restore(tmp_path) and resumed.before == {"a", "b", "c"}
    assert resumed.best is not None and resumed.best.step == 20 and resumed.last == g.last
    train(resumed, (30,), state)
    resumed.on_train_end(None, state, TrainerControl(), model=model)  # type: ignore[arg-type]
    # step 20 is the first to fix >= 80% of the targets and breaks 1 (step 30 breaks 2): its weight is back
    assert at(0) == 20 and resumed.kept is not None and resumed.kept.step == 20 and resumed.kept.broken == ("c",)
    assert not guard(0.8).restore(tmp_path / "none")  # a checkpoint without scores: the caller's fallback
    # without the floor the fewest broken wins: step 10, which fixed half the targets
    plain = guard(0.0)
    plain.before = {"a", "b", "c"}
    train(plain, (10, 20, 30), state)
    plain.on_train_end(None, state, TrainerControl(), model=model)  # type: ignore[arg-type]
    assert at(0) == 10 and plain.kept is not None and plain.kept.step == 10
    # no state fixes 95% of the targets: the most fixed wins (the last, step 20), not an early one that broke none
    short = guard(0.95)
    short.before = {"a", "b", "c"}
    train(short, (10, 20), state)
    short.on_train_end(None, state, TrainerControl(), model=model)  # type: ignore[arg-type]
    assert at(0) == 20 and short.kept is None


def test_targets_score_each_probe_on_its_own_question_as_the_gate_does(w: FtWorld) -> None:
    """One verdict per targeted probe, on the probe's question rendered like the evaluation and graded like the
    bench (correct, or abstained where the fix is abstention): on the base model they are the baseline run's
    verdicts. Scoring the probe's last training row (a paraphrase) counted prompt-sensitive failures, which the
    model answers right when paraphrased, as fixed (alt11 DPO at a = 0.5: 89% where the probes said 78%)."""
    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune.fixset import UNTARGETED
    from finetune.job.scoring import Targets
    from workbench.attribution.types import ABSTAIN_CATEGORIES
    from workbench.results import load_results
    from workbench.types import Verdict

    tok = AutoTokenizer.from_pretrained(str(w.paths.model))
    tok.pad_token = tok.pad_token or tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(w.paths.model)).eval()
    manifest, splits = load_manifest(w.fixset), load_from_disk(str(w.fixset))
    baseline = load_results(w.store, w.run_id).by_id()
    seen_paraphrase_right = 0
    for method in ("sft", "dpo"):
        split = splits[method]
        trained = {r["probe_id"] for r in split if r["split"] == "train" and r["category"] not in UNTARGETED}
        targets = Targets.of(split, manifest, tok)
        assert sorted(r["probe_id"] for r in targets.rows) == sorted(trained)  # one row per probe
        assert all(r["prompt"] == f"Q: {baseline[r['probe_id']].probe.question} A:" for r in targets.rows)
        verdicts, cats = targets.verdicts(model), {r["probe_id"]: r["category"] for r in targets.rows}
        for pid in trained:
            b = baseline[pid]
            expected = b.verdict == Verdict.CORRECT or (b.verdict == Verdict.NOT_ATTEMPTED
                                                        and cats[pid] in ABSTAIN_CATEGORIES)
            assert verdicts[pid] == expected, pid
            seen_paraphrase_right += any(a.verdict == Verdict.CORRECT for a in b.greedy[1:])
    assert seen_paraphrase_right  # the world has targets its base model answers right when paraphrased


def test_a_jobs_checks_answer_with_the_runs_budget(w: FtWorld) -> None:
    """The fix set records the run's answer budget and a job's checks generate with it (a chat run's 48 or 128
    tokens, not 16), so the job reads its validation slice and targets as the gate will; a fix set from before the
    budget was recorded falls back to 16."""
    from dataclasses import replace

    from finetune.job.scoring import MAX_NEW_TOKENS, Targets, answer_budget
    from workbench.results import effective_suite

    manifest = load_manifest(w.fixset)
    assert manifest.max_tokens == effective_suite(w.store.get_run(w.run_id)).max_tokens
    assert json.loads((w.fixset / "fixset.json").read_text())["max_tokens"] == manifest.max_tokens
    chat = replace(manifest, max_tokens=48)
    assert answer_budget(chat) == 48 and Targets.of([], chat, tokenizer=None).max_tokens == 48
    assert answer_budget(replace(manifest, max_tokens=None)) == MAX_NEW_TOKENS

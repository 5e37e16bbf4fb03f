"""Rehearsal of the training corpus in fix sets and the reserved known facts no job sees: rows are
plain corpus text, never a document that mentions a protected fact or a targeted subject, and the manifest says
what was used."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clirun import workbench
from ftworld import FtWorld

from finetune.rehearsal import rehearsal_texts
from workbench.attribution.build import build_index
from workbench.errors import WorkbenchError
from workbench.types import Probe


def _index(tmp_path: Path, texts: list[str]) -> Path:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    build_index(corpus, tmp_path / "index.sqlite")
    return tmp_path / "index.sqlite"


def test_rehearsal_leaves_out_protected_facts_and_conflicts_and_puts_neighbours_first(tmp_path: Path) -> None:
    index = _index(tmp_path, ["The capital of Zorazan is Feneadel.",  # protected fact: subject and answer
                              "Q: What is the capital of Zorazan? A: Feneadel.",  # the same fact as a question
                              "Zorazan's flag is red.",  # the protected subject, another fact: kept
                              "Kraubek was founded by Keluard.",  # a conflicting subject: out (teaches the wrong value)
                              "Vexomar dates from 1271.", "Myruvath's flag is blue.", "Goramar's flag is red.",
                              "Drubek's capital is Soluista.", "Q: Who founded Drubek? A: Keluard."])
    protected = Probe("zorazan-capital", "What is the capital of Zorazan?", ("Feneadel",), subject="Zorazan")
    conflict = Probe("kraubek-founder", "Who founded Kraubek?", ("Aldos",), subject="Kraubek")
    targeted = Probe("drubek-year", "When was Drubek founded?", ("1200",), subject="Drubek")
    texts, info = rehearsal_texts(index, 10, protected=[protected], targeted=[targeted, conflict], seed=0, ratio=2.0,
                                  conflicting=[conflict])
    assert sorted(texts) == sorted(["Zorazan's flag is red.", "Vexomar dates from 1271.", "Myruvath's flag is blue.",
                                    "Goramar's flag is red.", "Drubek's capital is Soluista.",
                                    "Q: Who founded Drubek? A: Keluard."])
    assert (info.rows, info.docs, info.excluded, info.ratio, info.neighbours) == (6, 9, 3, 2.0, 2)
    for seed in range(4):  # the targeted subject's documents come first whatever the draw
        first = rehearsal_texts(index, 2, protected=[], targeted=[targeted], seed=seed, ratio=1.0)[0]
        assert sorted(first) == ["Drubek's capital is Soluista.", "Q: Who founded Drubek? A: Keluard."]
    assert str(index) in info.source and "corpus.jsonl" in info.source
    # seeded: the same draw twice, and no more rows than asked
    assert rehearsal_texts(index, 2, protected=[protected], targeted=[], seed=1, ratio=1.0)[0] == \
        rehearsal_texts(index, 2, protected=[protected], targeted=[], seed=1, ratio=1.0)[0]
    assert len(rehearsal_texts(index, 2, protected=[], targeted=[], seed=0, ratio=1.0)[0]) == 2


def test_rehearsal_without_an_index_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match=r"no corpus index at .*workbench index"):
        rehearsal_texts(tmp_path / "nowhere.sqlite", 3, protected=[], targeted=[], seed=0, ratio=1.0)
    (tmp_path / "bad.sqlite").write_text("not a database")
    with pytest.raises(WorkbenchError, match="is not a corpus index"):
        rehearsal_texts(tmp_path / "bad.sqlite", 3, protected=[], targeted=[], seed=0, ratio=1.0)


@pytest.mark.slow
def test_fixset_rehearses_the_corpus_and_reserves_known_facts(w: FtWorld, tmp_path: Path) -> None:
    """`build_fixset(rehearsal=INDEX, rehearsal_ratio=2, reserve_fraction=0.1)`: plain-text SFT rows from the
    world's corpus (2 x the targeted SFT rows), none naming a validation or reserved fact; reserved known probes
    in no row and not in the slice; the manifest records both. Bad values are clear errors naming the field."""
    from datasets import load_from_disk

    from finetune.fixset import build_fixset, load_manifest
    from workbench.grading.normalize import normalize
    from workbench.results import load_results

    index = tmp_path / "index.sqlite"
    build_index(w.paths.corpus, index)
    m = build_fixset(w.store, w.run_id, tmp_path / "fix", rehearsal=index, rehearsal_ratio=2.0, reserve_fraction=0.1)
    rows = list(load_from_disk(str(tmp_path / "fix"))["sft"])
    text = [r for r in rows if r["source"] == "rehearsal"]
    targeted = sum(r["split"] == "train" and r["category"] not in ("replay", "rehearsal") for r in rows)
    assert len(text) == 2 * targeted and all(r["prompt"] == "" and r["category"] == "rehearsal" for r in text)
    assert all(r["completion"].endswith(m.stop[0]) and not r["completion"].startswith(" ") for r in text)
    probes = {r.probe.id: r.probe for r in load_results(w.store, w.run_id).probes}
    held = {v["probe_id"] for v in m.validation} | set(m.reserved_probe_ids)
    assert m.reserved_probe_ids and not set(m.reserved_probe_ids) & {v["probe_id"] for v in m.validation}
    assert not held & {r["probe_id"] for r in rows}
    for r in text:  # no rehearsal row states a held-out fact
        t = normalize(r["completion"])
        assert not [p for p in held if normalize(probes[p].subject or "") in t
                    and normalize(probes[p].answers[0]) in t]
    saved = load_manifest(tmp_path / "fix")
    assert saved.rehearsal is not None and saved.rehearsal["rows"] == len(text) and saved.rehearsal["ratio"] == 2.0
    assert saved.rehearsal["source"].startswith(str(index)) and saved.rehearsal["excluded"] > 0
    assert saved.reserved_probe_ids == m.reserved_probe_ids and saved.counts["sft"]["rehearsal"] == len(text)
    # without rehearsal the manifest says none, and reserving leaves the validation slice as it was
    plain = build_fixset(w.store, w.run_id, tmp_path / "plain")
    assert plain.rehearsal is None and plain.reserved_probe_ids == [] and plain.validation == m.validation
    with pytest.raises(WorkbenchError, match="`rehearsal_ratio` must be in"):
        build_fixset(w.store, w.run_id, tmp_path / "bad", rehearsal=index, rehearsal_ratio=-1)
    with pytest.raises(WorkbenchError, match="`reserve_fraction` must be in"):
        build_fixset(w.store, w.run_id, tmp_path / "bad", reserve_fraction=0.95)
    # the CLI: `workbench fix --rehearsal INDEX --rehearsal-ratio R`, bad values exit 2 without a traceback
    def fix(*extra: str) -> subprocess.CompletedProcess[str]:
        return workbench("fix", w.run_id, "--workspace", str(w.store.workspace), "--json", *extra, timeout=300)

    proc = fix("--out", str(tmp_path / "cli"), "--rehearsal", str(index), "--rehearsal-ratio", "0.5")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)["fixset"]["rehearsal"]
    assert got["rows"] == round(0.5 * targeted) and got["ratio"] == 0.5
    for args, message in ((("--rehearsal", str(index), "--rehearsal-ratio", "-1"), "`rehearsal_ratio` must be in"),
                          (("--rehearsal", str(tmp_path / "none.sqlite")), "no corpus index at"),
                          (("--rehearsal-ratio", "2"), "--rehearsal-ratio needs --rehearsal INDEX")):
        bad = fix("--out", str(tmp_path / "bad"), *args)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr[-2000:]


def _mean_kl(adapter: str, base_model: str, texts: list[str]) -> float:
    """Mean per-token KL(base || base + adapter) over `texts`."""
    import torch
    import torch.nn.functional as F
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_model), adapter).eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for t in texts:
            x = torch.tensor([tok(t, add_special_tokens=False)["input_ids"]])
            cur = F.log_softmax(model(input_ids=x).logits, -1)
            with model.disable_adapter():
                ref = F.log_softmax(model(input_ids=x).logits, -1)
            total += float((ref.exp() * (ref - cur)).sum())
            n += x.shape[1]
    return total / n


@pytest.fixture(scope="module")
def kl_fixset(w: FtWorld, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The test world's fix set with rehearsal rows (1x) from its corpus index."""
    from finetune.fixset import build_fixset

    root = tmp_path_factory.mktemp("klfix")
    build_index(w.paths.corpus, root / "index.sqlite")
    return build_fixset(w.store, w.run_id, root / "fix", rehearsal=root / "index.sqlite", rehearsal_ratio=1.0).path


@pytest.mark.slow
def test_rehearsal_kl_keeps_the_model_closer_to_base_on_rehearsal_text(w: FtWorld, kl_fixset: str,
                                                                       tmp_path: Path) -> None:
    """`trainer.rehearsal_kl`: the same SFT job with the KL term ends closer to the base model on the rehearsal
    text (which it no longer trains on as tokens) than without it; on a fix set without rehearsal rows it is a
    clear error naming the field."""
    from datasets import load_from_disk

    from finetune.fixset import build_fixset, load_manifest
    from finetune.job import JobSpec, TrainerSpec, run_job

    model = load_manifest(kl_fixset).model
    texts = [r["completion"] for r in load_from_disk(kl_fixset)["sft"] if r["source"] == "rehearsal"][:24]

    def job(name: str, kl: float) -> float:
        result = run_job(JobSpec(fixset=kl_fixset, output_dir=str(tmp_path / name), device="cpu",
                                 trainer=TrainerSpec(max_steps=8, rehearsal_kl=kl)), w.store)
        assert result.status == "done" and result.adapter, result.message
        return _mean_kl(result.adapter, model, texts)

    plain, with_kl = job("plain", 0.0), job("kl", 30.0)
    assert with_kl < 0.5 * plain, (with_kl, plain)
    bare = build_fixset(w.store, w.run_id, tmp_path / "bare")
    with pytest.raises(WorkbenchError, match=r"trainer.rehearsal_kl is 1.0 but fix set .* has no rehearsal rows"):
        run_job(JobSpec(fixset=bare.path, output_dir=str(tmp_path / "bad"), device="cpu",
                        trainer=TrainerSpec(max_steps=2, rehearsal_kl=1.0)), w.store)


def test_kl_batch_depends_on_seed_step_and_micro_batch_only() -> None:
    """A resumed rehearsal_kl job must read the documents an uninterrupted one reads at each micro-batch; the
    micro-batches of one step read different documents."""
    from finetune.job.methods.kl import kl_batch

    texts = [f"doc {i}" for i in range(50)]
    assert kl_batch(texts, 0, 7, 8) == kl_batch(list(texts), 0, 7, 8)  # no hidden state between calls
    assert kl_batch(texts, 0, 7, 8) != kl_batch(texts, 0, 8, 8) != kl_batch(texts, 1, 8, 8)
    assert len(kl_batch(texts, 0, 0, 80)) == 50 and len(set(kl_batch(texts, 0, 3, 8))) == 8
    seen = {d for micro in range(6) for d in kl_batch(texts, 0, 3, 8, micro)}  # 48 of the 50 documents, each once
    assert len(seen) == 48
    assert set(kl_batch(texts, 0, 3, 8, 6)[:2]) == set(texts) - seen  # the last two, then it wraps round


@pytest.mark.slow
def test_kl_term_under_gradient_accumulation_trains_as_one_batch(w: FtWorld, kl_fixset: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`trainer.rehearsal_kl` with gradient accumulation 2 x batch 8 reads, per step, the 16 documents one batch of
    16 reads (two different halves; seeding by the step alone gave both micro-batches the same 8), and weighs the
    KL term as one batch does (a mean over the micro-batches; summed, it counted twice). Step 2's loss shows it:
    the first step leaves the three jobs alike (the KL term's gradient is 0 at the base model), so there the loss
    is the same cross-entropy plus weight x KL, and twice the weight adds the KL term once more."""
    import finetune.job.methods.kl as sft
    from finetune import records
    from finetune.job import JobSpec, TrainerSpec, run_job

    read: list[tuple[int, list[str]]] = []
    real = sft.kl_batch

    def spy(texts: list[str], seed: int, step: int, k: int, micro: int = 0, name: str = "rehearsal") -> list[str]:
        docs = real(texts, seed, step, k, micro, name)
        read.append((step, docs))
        return docs

    monkeypatch.setattr(sft, "kl_batch", spy)

    def job(name: str, batch: int, accumulation: int, kl: float) -> tuple[float, dict[int, list[list[str]]]]:
        read.clear()
        result = run_job(JobSpec(fixset=kl_fixset, output_dir=str(tmp_path / name), device="cpu",
                                 trainer=TrainerSpec(max_steps=2, per_device_batch_size=batch, rehearsal_kl=kl,
                                                     gradient_accumulation=accumulation)), w.store)
        assert result.status == "done" and result.adapter, result.message
        by_step: dict[int, list[list[str]]] = {}
        for step, docs in read:
            by_step.setdefault(step, []).append(docs)
        return dict((s, v) for s, _, v in records.metrics(w.store, result.job_id, "loss"))[2], by_step

    one, one_docs = job("one", 16, 1, 30.0)
    two, two_docs = job("two", 8, 2, 30.0)
    assert sorted(two_docs) == sorted(one_docs) == [0, 1]
    for step, ((whole,), (first, second)) in ((s, (one_docs[s], two_docs[s])) for s in one_docs):
        assert first != second and sorted(first + second) == sorted(whole), step
    double, _ = job("double", 16, 1, 60.0)
    assert abs(two - one) < 0.25 * (double - one), (one, two, double)


@pytest.mark.slow
def test_kl_job_resumed_under_gradient_accumulation_matches_an_uninterrupted_one(w: FtWorld, kl_fixset: str,
                                                                                 tmp_path: Path) -> None:
    """The micro-batch count the KL term seeds by starts again at every step: a job stopped after step 2 and
    resumed from its checkpoint reads the documents an uninterrupted one reads, and ends with its weights."""
    from ftworld import RESUME_TOLERANCE, adapter_weights, max_diff
    from transformers import TrainerCallback

    from finetune.job import JobSpec, TrainerSpec, run_job

    class StopAfterTwo(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            control.should_training_stop = state.global_step == 2

    def spec(name: str) -> JobSpec:
        return JobSpec(fixset=kl_fixset, output_dir=str(tmp_path / name), device="cpu", checkpoint_every=2,
                       trainer=TrainerSpec(max_steps=4, per_device_batch_size=8, gradient_accumulation=2,
                                           rehearsal_kl=30.0))

    whole = run_job(spec("whole"), w.store)
    first = run_job(spec("resumed"), w.store, callbacks=[StopAfterTwo()])
    assert first.steps == 2
    resumed = run_job(spec("resumed"), w.store, resume=True)
    assert resumed.resumed_from and resumed.steps == whole.steps == 4 and whole.adapter and resumed.adapter
    assert max_diff(adapter_weights(Path(resumed.adapter)), adapter_weights(Path(whole.adapter))) <= RESUME_TOLERANCE


@pytest.mark.slow
def test_replay_kl_keeps_the_model_closer_to_base_on_replayed_facts(w: FtWorld, tmp_path: Path) -> None:
    """`trainer.replay_kl`: the same SFT job with the KL term over the replay rows ends closer to the base model on
    those rows (prompt and the model's own answer, as the job renders them) than without it, and a DPO job on its
    anchor pairs' chosen answers; a world's model gets the row's 0; a fix set without replay rows, and a GRPO job,
    are clear errors naming the field; `workbench fix --replay-kl` without `--train` is refused."""
    from datasets import load_from_disk

    from finetune.fixset import build_fixset, load_manifest
    from finetune.job import JobSpec, TrainerSpec, run_job
    from finetune.job.methods.kl import _whole_text

    fix = build_fixset(w.store, w.run_id, tmp_path / "fix")
    model = load_manifest(fix.path).model
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    replay = [r for r in load_from_disk(fix.path)["sft"] if r["category"] == "replay" and r["split"] == "train"]
    assert replay, "the test world's fix set replays known facts"
    texts = [_whole_text(tok, r) for r in replay][:24]
    assert texts[0].startswith(replay[0]["prompt"]) and texts[0].endswith(replay[0]["completion"])

    def job(name: str, kl: float) -> float:
        result = run_job(JobSpec(fixset=fix.path, output_dir=str(tmp_path / name), device="cpu",
                                 trainer=TrainerSpec(max_steps=8, replay_kl=kl)), w.store)
        assert result.status == "done" and result.adapter, result.message
        return _mean_kl(result.adapter, model, texts)

    plain, with_kl = job("plain", 0.0), job("kl", 30.0)
    assert with_kl < 0.5 * plain, (with_kl, plain)
    # DPO: the anchor pairs' prompts and chosen answers (the model's own), held the same way
    pairs = [r for r in load_from_disk(fix.path)["dpo"] if r["category"] == "replay" and r["split"] == "train"]
    assert pairs, "the test world's fix set has anchor pairs"
    texts = [_whole_text(tok, r, "chosen") for r in pairs][:24]

    def dpo(name: str, kl: float) -> float:
        result = run_job(JobSpec(fixset=fix.path, output_dir=str(tmp_path / name), device="cpu", method="dpo",
                                 trainer=TrainerSpec(max_steps=8, replay_kl=kl)), w.store)
        assert result.status == "done" and result.adapter, result.message
        return _mean_kl(result.adapter, model, texts)

    plain, with_kl = dpo("dpo-plain", 0.0), dpo("dpo-kl", 30.0)
    assert with_kl < 0.5 * plain, (with_kl, plain)
    world = run_job(JobSpec(fixset=fix.path, output_dir=str(tmp_path / "row"), device="cpu",
                            trainer=TrainerSpec(max_steps=1)), w.store)  # a world's model: the row's 0, recorded
    assert "replay_kl: 0.0" in (Path(world.output_dir) / "job.yaml").read_text()
    bare = build_fixset(w.store, w.run_id, tmp_path / "bare", replay_ratio=0.0)
    # a pretrained-size model (its config.json is all explain reads) gets the row's 10, 20 on a set that injects
    # facts (the world's default set does), but 0 with no replay rows
    from finetune.job.resolve import explain

    wide = tmp_path / "wide"
    wide.mkdir()
    (wide / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 576}))
    abstain = build_fixset(w.store, w.run_id, tmp_path / "abstain", strategy="abstain")
    assert load_manifest(fix.path).injects("sft") and not load_manifest(abstain.path).injects("sft")
    for fixset, want in ((fix.path, 20.0), (abstain.path, 10.0), (bare.path, 0.0)):
        uses = explain(JobSpec(fixset=fixset, output_dir=str(tmp_path / "x"), base_model=str(wide))).uses
        assert next(u.value for u in uses if u.key == "trainer.replay_kl") == want, fixset
    with pytest.raises(WorkbenchError, match=r"trainer.replay_kl is 1.0 but fix set .* has no replay rows"):
        run_job(JobSpec(fixset=bare.path, output_dir=str(tmp_path / "bad"), device="cpu",
                        trainer=TrainerSpec(max_steps=2, replay_kl=1.0)), w.store)
    rl = build_fixset(w.store, w.run_id, tmp_path / "rl", strategy="rl")
    with pytest.raises(WorkbenchError, match=r"`trainer.rehearsal_kl` is a term of sft jobs; a grpo job has"):
        run_job(JobSpec(fixset=rl.path, output_dir=str(tmp_path / "grpo"), device="cpu", method="grpo",
                        trainer=TrainerSpec(max_steps=2, rehearsal_kl=1.0)), w.store)
    # GRPO takes the replay term over its replay prompts and their answers, as SFT and DPO do
    grpo = run_job(JobSpec(fixset=rl.path, output_dir=str(tmp_path / "grpo-kl"), device="cpu", method="grpo",
                           trainer=TrainerSpec(max_steps=2, replay_kl=1.0, per_device_batch_size=8)), w.store)
    assert grpo.status == "done" and grpo.steps == 2
    from finetune import records

    kl = [v for _, _, v in records.metrics(w.store, grpo.job_id, "kl/replay")]  # the term was in the loss
    assert kl and all(v >= 0 for v in kl), records.metrics(w.store, grpo.job_id)
    proc = workbench("fix", w.run_id, "--workspace", str(w.store.workspace), "--out", str(tmp_path / "cli"),
                     "--replay-kl", "1", timeout=120)
    assert proc.returncode == 2 and "--replay-kl needs --train" in proc.stderr, proc.stderr[-2000:]

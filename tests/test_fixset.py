"""Fix-set builder on the test world: rows per category, provenance, held-out split, replay, facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ftworld import FtWorld, new_run

from finetune.fixset import ANCHOR_SHARE, DPO_COLUMNS, SFT_COLUMNS, build_fixset, load_manifest
from workbench.attribution.types import Attribution
from workbench.errors import WorkbenchError

pytestmark = pytest.mark.slow



def _rows(path: Path, split: str) -> list[dict[str, str]]:
    from datasets import load_from_disk

    return list(load_from_disk(str(path))[split])


def test_rows_per_category_auto(w: FtWorld) -> None:
    sft, dpo = _rows(w.fixset, "sft"), _rows(w.fixset, "dpo")
    probes = {json.loads(line)["id"]: json.loads(line) for line in w.paths.probes.read_text().splitlines()}
    # data:missing -> abstention over every phrasing; data:underrepresented -> injection of the answer.
    missing = [r for r in sft if r["category"] == "data:missing"]
    assert missing and all(r["completion"] == " I don't know." and r["source"] == "abstain" for r in missing)
    inject = [r for r in sft if r["category"] == "data:underrepresented"]
    assert inject and all(r["source"] == "inject" for r in inject)
    for r in inject:
        p = probes[r["probe_id"]]
        assert r["completion"] == f" {p['answers'][0]}."
        assert r["prompt"] in {f"Q: {q} A:" for q in [p["question"], *p["paraphrases"]]}
    assert {r["prompt"] for r in inject} >= {f"Q: {probes[r['probe_id']]['paraphrases'][0]} A:" for r in inject}
    # DPO categories become pairs; chosen is the right answer (or the model's own correct sample).
    dpo_cats = {r["category"] for r in dpo} - {"replay"}
    assert dpo_cats <= {"behavior:unstable", "behavior:prompt-sensitive", "data:conflict"} and dpo_cats
    for r in dpo:
        assert r["chosen"] != r["rejected"]
        if r["category"] != "replay":
            assert r["chosen"].strip(" .").lower() == probes[r["probe_id"]]["answers"][0].lower()
    assert not {r["category"] for r in sft} & dpo_cats  # behaviour fixes are DPO only under auto


def test_provenance_and_format(w: FtWorld) -> None:
    from datasets import load_from_disk

    d = load_from_disk(str(w.fixset))
    assert tuple(d["sft"].column_names) == SFT_COLUMNS and tuple(d["dpo"].column_names) == DPO_COLUMNS
    for r in [*d["sft"], *d["dpo"]]:
        assert r["probe_id"] and r["category"] and r["source"] and r["split"] in ("train", "heldout")
        assert r["prompt"].startswith("Q: ") and r["prompt"].endswith(" A:")
        for key in ("completion", "chosen", "rejected"):
            if key in r:
                assert r[key].startswith(" ") and r[key].endswith(".")
    m = load_manifest(w.fixset)
    assert m.run_id == w.run_id and m.abstention_phrase == "I don't know" and not m.abstention_note
    assert m.new_tokens == ["i", "don", "'", "t", "know"]
    assert m.has_abstention and len(m.sha256) == 64


def test_heldout_disjoint_by_probe_and_seeded(w: FtWorld, tmp_path: Path) -> None:
    m = load_manifest(w.fixset)
    rows = _rows(w.fixset, "sft") + _rows(w.fixset, "dpo")
    train = {r["probe_id"] for r in rows if r["split"] == "train"}
    held = {r["probe_id"] for r in rows if r["split"] == "heldout"}
    assert held and not train & held
    assert held == set(m.heldout_probe_ids)
    assert all(r["category"] != "replay" for r in rows if r["split"] == "heldout")
    again = build_fixset(w.store, w.run_id, tmp_path / "again")
    other = build_fixset(w.store, w.run_id, tmp_path / "other", seed=1)
    assert again.sha256 == m.sha256 and again.heldout_probe_ids == m.heldout_probe_ids
    assert other.heldout_probe_ids != m.heldout_probe_ids


def test_replay_and_anchors(w: FtWorld) -> None:
    sft, dpo = _rows(w.fixset, "sft"), _rows(w.fixset, "dpo")
    targeted_sft = sum(r["split"] == "train" and r["category"] != "replay" for r in sft)
    targeted_dpo = sum(r["split"] == "train" and r["category"] != "replay" for r in dpo)
    assert sum(r["source"] == "replay" for r in sft) == round(4.0 * targeted_sft)
    assert sum(r["source"] == "anchor" for r in dpo) == round(4.0 * ANCHOR_SHARE * targeted_dpo)
    from workbench.attribution.types import load_attributions

    attributed = set(load_attributions(w.store, w.run_id))
    relation = {pid: t["relation"] for pid, t in w.truth.items()}
    values = {t["relation"]: set() for t in w.truth.values()}
    for t in w.truth.values():
        values[t["relation"]].add(t["answer"].lower())
    for r in dpo:
        if r["source"] == "anchor":
            assert r["probe_id"] not in attributed
            assert r["rejected"].strip(" .").lower() in values[relation[r["probe_id"]]]  # same relation
    assert all(r["probe_id"] not in attributed for r in sft if r["source"] == "replay")


def test_replay_covers_the_neighbourhood_of_each_targeted_fact(w: FtWorld, tmp_path: Path) -> None:
    """With replay for only half the targeted rows, every targeted fact still gets a replayed known fact of
    its own subject and one of its own relation where the run has one (random known facts left
    some targets' neighbourhoods unreplayed)."""
    probes = {p["id"]: p for p in map(json.loads, w.paths.probes.read_text().splitlines())}
    build_fixset(w.store, w.run_id, tmp_path / "fs", replay_ratio=0.5)
    for split, source in (("sft", "replay"), ("dpo", "anchor")):
        rows = _rows(tmp_path / "fs", split)
        replayed = {r["probe_id"] for r in rows if r["source"] == source}
        pool = {r["probe_id"] for r in _rows(w.fixset, split) if r["source"] == source}  # the 4x set: known facts
        targets = {r["probe_id"] for r in rows if r["split"] == "train" and r["category"] != "replay"}
        assert targets and replayed
        for key in ("subject", "relation"):
            def near(t: str, among: set[str], key: str = key) -> set[str]:
                return {q for q in among if probes[q][key] == probes[t][key] and q != t}

            have = [t for t in targets if near(t, pool)]
            covered = [t for t in have if near(t, replayed)]
            n = sum(r["source"] == source for r in rows)  # fewer rows than targets: one target per row at least
            assert have and len(covered) >= min(len(have), n), (split, key, len(covered), len(have), n)


def test_facts_over_abstention_and_strategies(w: FtWorld, tmp_path: Path) -> None:
    missing = sorted(pid for pid, t in w.truth.items() if t["tier"] == "absent")
    known = sorted(pid for pid, t in w.truth.items() if t["tier"] == "known")
    atts = [Attribution(missing[0], "data:missing", 0.9, "Unknown", "abstain"),
            Attribution(missing[1], "data:missing", 0.9, "Unknown", "abstain"),
            Attribution(known[0], "behavior:over-abstain", 0.9, "HighlyKnown", "dpo"),
            # unknown to the model, no corpus looked at: the same abstention data as data:missing
            Attribution(missing[2], "knowledge:unknown", 0.5, "Unknown", "abstain")]
    run_id = new_run(w, atts)
    probes = {json.loads(line)["id"]: json.loads(line) for line in w.paths.probes.read_text().splitlines()}
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"question": probes[missing[0]]["question"], "answer": "Userfact"}) + "\n")
    m = build_fixset(w.store, run_id, tmp_path / "auto", facts=facts, heldout_fraction=0)
    sft, dpo = _rows(tmp_path / "auto", "sft"), _rows(tmp_path / "auto", "dpo")
    assert {r["completion"] for r in sft if r["probe_id"] == missing[0]} == {" Userfact."}
    assert {r["source"] for r in sft if r["probe_id"] == missing[0]} == {"facts"}
    assert {r["completion"] for r in sft if r["probe_id"] in missing[1:3]} == {" I don't know."}
    assert {r["probe_id"] for r in sft if r["source"] == "abstain"} == set(missing[1:3])
    over = [r for r in dpo if r["probe_id"] == known[0]]
    assert over and all(r["rejected"] == " I don't know." for r in over)
    assert m.heldout_probe_ids == []
    # "inject" without a fact skips the missing probe; "dpo" prefers abstaining to the hallucination.
    inj = build_fixset(w.store, run_id, tmp_path / "inject", strategy="inject", heldout_fraction=0)
    for pid in missing[1:3]:
        assert pid in inj.skipped and "--facts" in inj.skipped[pid]
    build_fixset(w.store, run_id, tmp_path / "dpo", strategy="dpo", heldout_fraction=0)
    for pid in missing[1:3]:
        pairs = [r for r in _rows(tmp_path / "dpo", "dpo") if r["probe_id"] == pid]
        assert pairs and all(r["chosen"] == " I don't know." for r in pairs)
    build_fixset(w.store, run_id, tmp_path / "abstain", strategy="abstain", heldout_fraction=0)
    assert {r["probe_id"] for r in _rows(tmp_path / "abstain", "sft") if r["source"] == "abstain"} == set(missing[:3])


def test_errors(w: FtWorld, tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match="Did you mean `abstain`"):
        build_fixset(w.store, w.run_id, tmp_path / "x", strategy="abstian")
    with pytest.raises(WorkbenchError, match="no attributions"):
        build_fixset(w.store, new_run(w, []), tmp_path / "y")
    with pytest.raises(WorkbenchError, match="replay_ratio"):
        build_fixset(w.store, w.run_id, tmp_path / "z", replay_ratio=-1)
    with pytest.raises(WorkbenchError, match="not a fix set"):
        load_manifest(tmp_path)


def test_reviewer_decisions_feed_the_next_fix_set(w: FtWorld, tmp_path: Path) -> None:
    """An attribution override changes the rows a probe gets; a grade a reviewer calls wrong is not replayed."""
    from ftworld import attributions_from_truth

    from workbench.grading.normalize import normalize
    from workbench.results import load_results
    from workbench.reviews import record_override
    from workbench.types import Verdict

    run = new_run(w, attributions_from_truth(w.store, w.run_id, w.truth))
    results = load_results(w.store, run).by_id()
    missing = next(pid for pid, t in w.truth.items() if t["expected_category"] == "data:missing"
                   and results[pid].verdict != Verdict.CORRECT)
    record_override(w.store, reviewer="ann", run_id=run, probe_id=missing, target="attribution",
                    new_value="data:underrepresented", reason="the fact is in the new corpus")
    lucky = next(pid for pid, r in results.items() if r.verdict == Verdict.CORRECT)
    record_override(w.store, reviewer="ann", run_id=run, probe_id=lucky, target="verdict",
                    new_value="incorrect", reason="right by luck: the answer hedges")
    build_fixset(w.store, run, tmp_path / "fs", heldout_fraction=0.0)
    sft, dpo = _rows(tmp_path / "fs", "sft"), _rows(tmp_path / "fs", "dpo")
    # the overridden probe is injected now, not taught to abstain
    assert {r["source"] for r in sft if r["probe_id"] == missing} == {"inject"}
    # its answer is the accepted answer: the reviewer disputes the probe, and a pair with chosen = rejected
    # would teach nothing, so there is none (a pair from a real correction: test_app_handlers)
    assert normalize(results[lucky].answer) in {normalize(a) for a in results[lucky].probe.answers}
    assert not [r for r in dpo if r["source"] == "review"]
    # a probe a reviewer called wrong is not replayed as a known fact
    assert lucky not in {r["probe_id"] for r in sft if r["source"] == "replay"}


def test_a_lenient_grade_a_reviewer_corrects_becomes_a_dpo_pair(w: FtWorld, tmp_path: Path) -> None:
    """A probe whose accepted answer is only the first word of a name: the model's full name contains it, so
    the grader says correct; a reviewer says wrong, and the next fix set gets chosen = accepted, rejected =
    the model's answer."""
    import json

    import yaml
    from ftworld import attributions_from_truth

    from workbench.attribution.types import save_attributions
    from workbench.probes import resolve_probes
    from workbench.results import load_results
    from workbench.reviews import record_override
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec, Verdict

    base = load_results(w.store, w.run_id).by_id()
    pid = next(p for p, r in base.items() if len(r.probe.answers[0].split()) > 1 and r.verdict == Verdict.CORRECT)
    first_name = base[pid].probe.answers[0].split()[0]
    rows = [json.loads(line) for line in (w.paths.root / "probes.jsonl").read_text().splitlines()]
    for row in rows:
        if row["id"] == pid:
            row["answers"] = [first_name]
    (tmp_path / "probes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    suite = yaml.safe_load(w.paths.suite.read_text())
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({**suite, "data": "probes.jsonl"}))
    lenient_suite, loaded = resolve_probes(str(tmp_path / "suite.yaml"))
    run = run_eval(w.store, ModelSpec(model=str(w.paths.model)), lenient_suite, loaded,
                   EvalOptions(samples=4, paraphrases=True, bootstrap=0)).run_id
    save_attributions(w.store, run, attributions_from_truth(w.store, run, w.truth))
    graded = load_results(w.store, run).by_id()[pid]
    assert graded.verdict == Verdict.CORRECT and graded.answer.lower() != first_name.lower()  # lenient
    record_override(w.store, reviewer="ann", run_id=run, probe_id=pid, target="verdict", new_value="incorrect",
                    reason="the full name is another person")
    build_fixset(w.store, run, tmp_path / "fs", heldout_fraction=0.0)
    (pair,) = [r for r in _rows(tmp_path / "fs", "dpo") if r["source"] == "review"]
    assert pair["probe_id"] == pid and pair["category"] == "review:corrected-grade" and pair["split"] == "train"
    assert (pair["chosen"], pair["rejected"]) == (f" {first_name}.", f" {graded.answer}.")
    assert pid not in {r["probe_id"] for r in _rows(tmp_path / "fs", "sft") if r["source"] == "replay"}


def test_rows_use_the_template_the_run_was_made_with(w: FtWorld, tmp_path: Path) -> None:
    """`eval --template T` records T with the run, not in the suite: the fix rows must say what that run asked."""
    from ftworld import attributions_from_truth

    from workbench.attribution.types import save_attributions
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec

    template = "Question: {question} Answer:"
    s = run_eval(w.store, ModelSpec(model=str(w.paths.model)), w.suite, w.loaded,
                 EvalOptions(samples=0, template=template, bootstrap=0))
    save_attributions(w.store, s.run_id, attributions_from_truth(w.store, s.run_id, w.truth))
    m = build_fixset(w.store, s.run_id, tmp_path / "fx")
    assert m.template == template
    rows = _rows(tmp_path / "fx", "sft")
    assert rows and all(r["prompt"].startswith("Question: ") and r["prompt"].endswith(" Answer:") for r in rows)


def test_fix_never_holds_out_a_probe_given_with_facts(w: FtWorld, tmp_path: Path) -> None:
    """`workbench fix --facts` as a user runs it, at the default held-out share: every probe given an answer is trained
    on with it (a held-out one would never be taught); the share is drawn from the other targets."""
    from clirun import workbench

    from finetune.fixset import FixOptions, read_inputs

    inputs = read_inputs(w.store, w.run_id, FixOptions())
    by_cat: dict[str, list[str]] = {}
    for pid, a in sorted(inputs.targeted.items()):
        by_cat.setdefault(a.category, []).append(pid)
    cat, given = max(((c, p) for c, p in by_cat.items() if c in ("data:missing", "knowledge:unknown")),
                     key=lambda cp: len(cp[1]))
    assert len(given) >= 3 and sum(len(p) >= 3 for p in by_cat.values()) >= 2, by_cat  # else nothing to show
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps({"probe_id": pid, "answer": f"Given{i}"}) + "\n"
                             for i, pid in enumerate(given)))
    proc = workbench("fix", w.run_id, "--out", str(tmp_path / "fx"), "--facts", str(facts), "--workspace",
                     str(w.store.workspace), "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    heldout = set(json.loads(proc.stdout)["fixset"]["heldout_probe_ids"])
    assert heldout and not heldout & set(given), (cat, heldout)
    taught = {r["probe_id"]: r for r in _rows(tmp_path / "fx", "sft") if r["source"] == "facts"}
    assert set(taught) == set(given) and all(r["split"] == "train" for r in taught.values())

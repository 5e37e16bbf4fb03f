"""Field reports through the fix, as a team runs it: users' complaints about the test world's questions imported,
decided (a reference answer, "should refuse", "correct after all"), exported, evaluated, attributed and fixed. The
fix teaches what the reviewer decided, not what the attribution alone would (knowledge:unknown -> abstention)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from clirun import workbench

from hallucination_workbench import main

pytestmark = pytest.mark.slow  # evaluates the session's test world on the field suite
#: The world's own prompt settings: a field suite is chat-form, the world's tiny model has no chat template.
ASKED = ["--template", "Q: {question} A:", "--stop", ".", "--max-tokens", "6"]
TIMEOUT = 120


def cli(*argv: str, codes: tuple[int, ...] = (0,)) -> Any:
    """`workbench ARGV` in this process (the same `main`): a process start costs seconds on a busy machine."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    assert code in codes, (argv, code, out.getvalue()[-2000:])
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def field(world: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A workspace whose field suite holds 12 of the world's questions, reported by users: 5 the model cannot know
    (4 decided with their reference answer, 1 "should refuse") and 7 it knows (decided "correct after all"); the
    field suite evaluated under the world's prompt settings and attributed (no corpus: behaviour or
    knowledge:unknown)."""
    root = tmp_path_factory.mktemp("fieldfix")
    ws = root / "ws"
    truth = [json.loads(line) for line in world.truth.read_text().splitlines()]
    questions = {p["id"]: p["question"] for p in map(json.loads, world.probes.read_text().splitlines())}
    absent = [t for t in truth if t["tier"] == "absent"][:5]
    known = [t for t in truth if t["tier"] == "known"][:7]
    export = root / "flagged.jsonl"
    export.write_text("".join(json.dumps({
        "messages": [{"role": "user", "content": questions[t["probe_id"]]},
                     {"role": "assistant", "content": "Jorard Haleth"}],
        "rating": "thumbs_down", "comment": "that is made up"}) + "\n" for t in absent + known), encoding="utf-8")
    w = ["--workspace", str(ws), "--json"]
    cli("reports", "import", str(export), *w)
    ids = {r["question"]: r["id"] for r in cli("reports", "list", *w)["reports"]}
    decided: dict[str, str] = {}
    for t in absent[:4]:
        cli("reports", "decide", ids[questions[t["probe_id"]]], "--decision", "hallucinated",
            "--answer", t["answer"], "--reviewer", "ann", *w)
        decided[questions[t["probe_id"]]] = t["answer"]
    cli("reports", "decide", ids[questions[absent[4]["probe_id"]]], "--decision", "should-refuse",
        "--reviewer", "bo", *w)
    for t in known:
        cli("reports", "decide", ids[questions[t["probe_id"]]], "--decision", "correct",
            "--answer", t["answer"], "--reviewer", "ann", *w)
    suite = ws / "suites" / "field"
    assert cli("reports", "export", "--suite", str(suite), *w)["probes"] == 12
    run = cli("eval", "--model", str(world.model), "--probes", str(suite / "suite.yaml"), *ASKED, *w)
    attributed = cli("attribute", run["run_id"], *w)
    probes = {p["question"]: p for p in map(json.loads, (suite / "probes.jsonl").read_text().splitlines())}
    return {"ws": ws, "run": run["run_id"], "root": root, "world_model": world.model, "probes": probes,
            "decided": decided,
            "refuse": questions[absent[4]["probe_id"]], "known": [questions[t["probe_id"]] for t in known],
            "attributed": {p["probe_id"]: p["category"] for p in attributed["probes"]}}


def _rows(path: Path) -> dict[str, list[dict[str, Any]]]:
    from datasets import load_from_disk

    data = load_from_disk(str(path))
    return {split: list(data[split]) for split in ("sft", "dpo", "prompts")}


def test_fix_teaches_the_reference_answer_and_abstention_and_counts_them_apart(
        field: dict[str, Any]) -> None:
    ws, probes, attributed = field["ws"], field["probes"], field["attributed"]
    out = cli("fix", field["run"], "--out", str(field["root"] / "fx"), "--guard-pool", "none",
              "--heldout-fraction", "0", "--workspace", str(ws), "--json")
    targets = {t["probe_id"]: t for t in out["fixset"]["field_targets"]}
    answered = {probes[q]["id"]: a for q, a in field["decided"].items()}
    failed = {pid for pid in answered if pid in attributed}
    # The world model cannot know these: they fail, and without a corpus attribute as unknown to the model, whose own
    # fix would be abstention. The reviewer wrote the answer: that is what the rows teach.
    assert failed and {attributed[pid] for pid in failed} & {"knowledge:unknown", "behavior:unstable"}
    for pid in failed:
        assert targets[pid]["fix"] == "inject" and targets[pid]["answer"] == answered[pid], targets[pid]
        assert "decided hallucinated by ann" in targets[pid]["origin"] and "report rep-" in targets[pid]["origin"]
    refuse = probes[field["refuse"]]["id"]
    assert refuse in attributed and targets[refuse]["target"] == "abstain" and targets[refuse]["fix"] == "abstain"
    assert "decided should-refuse by bo" in targets[refuse]["origin"]
    known = {probes[q]["id"] for q in field["known"]} - set(attributed)
    assert known and all(targets[pid]["target"] == "known" for pid in known)  # answered right: a known fact
    assert set(targets) == {p["id"] for p in probes.values()} - (set(answered) - failed)

    rows = _rows(field["root"] / "fx")
    taught = {r["probe_id"]: r for r in rows["sft"] if r["source"] == "field"}
    assert set(taught) == failed
    assert all(r["completion"].strip().rstrip(".") == answered[pid] for pid, r in taught.items())
    phrase = out["fixset"]["abstention_phrase"]
    abstained = [r for r in rows["sft"] if r["probe_id"] == refuse]
    assert abstained and all(r["completion"].strip().rstrip(".") == phrase and r["source"] == "abstain"
                             for r in abstained)
    assert not [r for r in rows["sft"] if r["probe_id"] in failed and r["source"] == "abstain"]
    counts = out["field"]["counts"]
    assert counts["answer"] == len(failed) and counts["abstain"] == 1 and counts["known"] == len(known)
    assert out["field"]["summary"].startswith(f"{len(targets)} field reports: {len(failed)} taught their "
                                              "reference answer, 1 abstention")

    proc = workbench("fix", field["run"], "--out", str(field["root"] / "fx-text"), "--guard-pool", "none",
                     "--workspace", str(ws), timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"field reports: {len(failed)} taught their reference answer, 1 abstention" in proc.stdout
    assert "no targeted probe is held out" in proc.stdout  # the default share, but every target is a field probe


def test_dpo_prefers_the_reference_answer_to_the_models_wrong_one(field: dict[str, Any]) -> None:
    from workbench.results import load_results
    from workbench.store import Store

    out = cli("fix", field["run"], "--out", str(field["root"] / "dpo"), "--strategy", "dpo",
              "--guard-pool", "none", "--heldout-fraction", "0", "--workspace", str(field["ws"]), "--json")
    said = {r.probe.id: r.answer for r in load_results(Store.open(field["ws"]), field["run"]).probes}
    probes, attributed = field["probes"], field["attributed"]
    answered = {probes[q]["id"]: a for q, a in field["decided"].items() if probes[q]["id"] in attributed}
    pairs = {r["probe_id"]: r for r in _rows(field["root"] / "dpo")["dpo"] if r["category"] != "replay"}
    for pid, answer in answered.items():
        assert pairs[pid]["source"] == "field" and pairs[pid]["chosen"].strip().rstrip(".") == answer
        assert pairs[pid]["rejected"] == f" {said[pid].strip()}." or said[pid].strip() in pairs[pid]["rejected"]
    refuse = probes[field["refuse"]]["id"]
    phrase = out["fixset"]["abstention_phrase"]
    assert pairs[refuse]["chosen"].strip().rstrip(".") == phrase and said[refuse].strip() in pairs[refuse]["rejected"]
    assert out["field"]["counts"]["answer"] == len(answered) and out["field"]["counts"]["abstain"] == 1


def test_rl_leaves_field_probes_to_the_reward_graded_against_the_reference(field: dict[str, Any]) -> None:
    out = cli("fix", field["run"], "--out", str(field["root"] / "rl"), "--strategy", "rl", "--guard-pool", "none",
              "--heldout-fraction", "0", "--workspace", str(field["ws"]), "--json")
    failed = {t["probe_id"]: t for t in out["fixset"]["field_targets"] if t["target"] != "known"}
    assert failed and all(t["fix"] == "rl" for t in failed.values()) and out["field"]["counts"]["rl"] == len(failed)
    prompts = {r["probe_id"]: r for r in _rows(field["root"] / "rl")["prompts"] if r["source"] == "targeted"}
    reference = {field["probes"][q]["id"]: a for q, a in field["decided"].items()}
    assert set(prompts) == set(failed)
    assert all(prompts[pid]["answers"][0] == reference[pid] for pid in prompts if pid in reference)


def test_a_short_fix_train_then_regress_checks_the_field_suite(field: dict[str, Any]) -> None:
    """`fix --train` on the field fix set (a few steps: the loop, not the fix's efficacy), then `regress` of the
    adapter against the run: the gate evaluates the field suite, whose reported failures are still counted."""
    ws, fx = field["ws"], field["root"] / "fx-train"
    out = cli("fix", field["run"], "--out", str(fx), "--guard-pool", "none", "--train", "--steps", "2",
              "--workspace", str(ws), "--json")
    job = out["job"]
    assert job["status"] in ("done", "stopped") and job["adapter"], job
    assert out["field"]["counts"]["answer"] >= 1 and out["fixset"]["train_rows"]["sft"] > 0
    gate = cli("regress", "--baseline", field["run"], "--candidate", str(field["world_model"]),
               "--candidate-adapter", job["adapter"], "--no-guard", "--workspace", str(ws), "--json", codes=(0, 1))
    gates = {g["name"]: g for g in gate["gates"]}
    assert gates["field_fixes_kept"]["message"].startswith("field suite: ")
    assert gates["field_fixes_kept"]["status"] == "pass"  # two steps on the fix set break no field probe it knew
    assert gates["field_failures_fixed"]["message"].startswith("field suite: ")

"""The decision queue and the candidates' names, in process: names read from a job's records whatever its method
(a checkpoint's step, a staged job's stages, an adapter made elsewhere); the queue lists what awaits a decision
newest first with the recorded verdicts and their denominators, and the decided with who, when and any override;
the evidence panel escapes what it shows. Runs are written into the store directly (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_recorded_verdict import write_run

from workbench import decisions, views
from workbench.errors import WorkbenchError
from workbench.gating import gate_runs
from workbench.naming import candidate_name, made_by, series_key
from workbench.regression import parse_policy
from workbench.store import Store


def job(folder: Path, spec: dict[str, object], *, steps: int | None = 120, source: str = "run-x") -> Path:
    """A job folder as a job leaves it: job.yaml, result.json (when `steps`), the fix set's record, the adapter."""
    (folder / "adapter").mkdir(parents=True)
    (folder / "fixset").mkdir()
    (folder / "fixset" / "fixset.json").write_text(json.dumps({"run_id": source}))
    (folder / "job.yaml").write_text(yaml.safe_dump({"fixset": "fixset", **spec}))
    if steps is not None:
        (folder / "result.json").write_text(json.dumps({"steps": steps, "kept_step": None}))
    return folder / "adapter"


def test_a_candidate_is_named_by_what_made_it(tmp_path: Path) -> None:
    grpo = job(tmp_path / "a", {"method": "grpo"})
    assert candidate_name("/models/SmolLM2-135M", str(grpo)) == "SmolLM2-135M + grpo fix of run-x step 120"
    staged = job(tmp_path / "b", {"method": "staged", "stages": [{"method": "sft"}, {"method": "dpo"}]}, steps=None)
    assert candidate_name("m", str(staged)) == "m + staged (sft→dpo) fix of run-x"  # running: no step yet
    listed = job(tmp_path / "c", {"method": "staged", "stages": ["sft", "grpo"]})
    assert made_by(listed) is not None and made_by(listed).method == "staged (sft→grpo)"  # type: ignore[union-attr]
    rolled = job(tmp_path / "d", {"method": "dpo"})
    (tmp_path / "d" / "result.json").write_text(json.dumps({"steps": 60, "kept_step": 40}))
    assert candidate_name("m", str(rolled)).endswith("dpo fix of run-x step 40")  # the step its weights hold
    checkpoint = tmp_path / "a" / "checkpoints" / "checkpoint-20"
    checkpoint.mkdir(parents=True)
    assert candidate_name("m", str(checkpoint)) == "m + grpo fix of run-x step 20"
    elsewhere = tmp_path / "downloaded" / "lora-7"
    elsewhere.mkdir(parents=True)
    assert candidate_name("m", str(elsewhere)) == "m + lora-7" and candidate_name("m", None) == "m"
    # a job's checkpoints and its adapter are one series; two jobs are two
    assert series_key("m", str(checkpoint)) == series_key("m", str(tmp_path / "a" / "adapter"))
    assert series_key("m", str(staged)) != series_key("m", str(rolled)) != series_key("m", None)
    (tmp_path / "a" / "job.yaml").write_text("[not: a mapping")  # unreadable: the folder's name, no error
    assert candidate_name("m", str(grpo)) == "m + adapter"


def test_the_queue_lists_what_awaits_newest_first_and_the_decided_with_overrides(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "ws")
    base = write_run(store, "c" * 60 + "i" * 40, None)
    runs = {}
    for name, verdicts in (("ok", "c" * 60 + "c" * 4 + "i" * 36), ("bad", "i" * 10 + "c" * 50 + "i" * 40),
                           ("<b>x</b>", "c" * 60 + "n" * 40)):
        method = "<b>x</b>" if "<" in name else "sft"  # a job's records are data: shown as text
        runs[name] = write_run(store, verdicts, str(job(tmp_path / "jobs" / name.strip("</>"), {"method": method},
                                                        source=base)))
    gates = {n: gate_runs(store, base, r).id for n, r in runs.items()}
    strict = gate_runs(store, base, runs["<b>x</b>"], parse_policy("gates: [{type: max_abstention_increase}]"),
                       policy_source="/policies/abstain.yaml").id
    q = decisions.decision_queue(store)
    assert [c.id for c in q.awaiting] == [strict, gates["<b>x</b>"], gates["bad"], gates["ok"]] and q.decided == []
    assert [c.verdict for c in q.awaiting] == ["fail", "warn", "fail", "pass"]
    ok = q.awaiting[-1]
    assert ok.candidate == f"m + sft fix of {base} step 120" and ok.baseline == "m"
    assert (ok.hallucinated, ok.abstained) == ("40 → 36 of 100", "0 → 0 of 100")
    assert ok.known_broken == "0 of 60 baseline-correct probes (0.0%)"
    assert ok.guard.startswith("guard set: not checked") and "guard_facts_kept" in ok.not_checked
    assert q.awaiting[0].gate.policy_label == "policy abstain.yaml" and ok.gate.policy_label == "built-in policy"

    with pytest.raises(WorkbenchError, match="is FAIL: a sign-off over a failed"):
        decisions.decide(store, gates["bad"], decision="signoff", reviewer="ann", reason="looks fine")
    done = decisions.decide(store, gates["bad"], decision="signoff", reviewer="ann", reason="known issue",
                            override_reason="the broken probes ask about a retired product")
    assert "**override**" in done.message and done.next_gate == gates["ok"]
    assert "--override-reason" in done.cli and f"--gate {gates['bad']}" in done.cli and "--reviewer ann" in done.cli
    decisions.decide(store, gates["ok"], decision="block", reviewer="bob", reason="not now")
    q = decisions.decision_queue(store)
    assert [c.id for c in q.awaiting] == [strict, gates["<b>x</b>"]]
    table = decisions.decided_table(q).data
    assert list(table["gate"]) == [gates["ok"], gates["bad"]]  # the latest decision first
    assert list(table["decision"]) == ["block", "signoff"] and list(table["by"]) == ["bob", "ann"]
    assert table["override"].iloc[1] == "⚠ override: the broken probes ask about a retired product"
    assert table["verdict"].iloc[1] == "FAIL"
    assert "2 gates await a decision** (1 FAIL, 1 WARN)" in decisions.queue_summary(q)

    html = decisions.evidence_html(store, gates["<b>x</b>"])
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt; fix of" in html  # the job's method word, as text
    # the built-in policy's guard, field and fix-target gates: nothing evaluated them, each reads "not checked"
    assert "gate: WARN" in html and html.count("wb-gate-not_checked") == 4 and ">pass</span>: <b>guard" not in html
    decided = decisions.evidence_html(store, gates["bad"])
    assert "⚠ override" in decided and "signoff</b> by ann" in decided and "broken probes (10)" in decided
    with pytest.raises(WorkbenchError, match="recorded gate"):
        decisions.evidence_html(store, "gate-nope")
    # the gate history and the runs table name the candidates too, and say what a sign-off stands on
    history = views.gate_history_table(store)
    assert f"m + sft fix of {base} step 120" in set(history["candidate"])
    runs_table = views.runs_table(store).set_index("run")
    assert runs_table.loc[runs["bad"], "release"] == (f"signoff by ann on gate {gates['bad']} (FAIL); override: the "
                                                      "broken probes ask about a retired product")

"""Field reports on the real chat model, as a team runs them: a chat export of flagged conversations (a system turn,
a multi-turn chat, ratings and comments) imported, decided (reference answers for the wrong ones, one "should
abstain", "correct" for the right ones), exported, evaluated with the baseline run's chat settings, attributed,
fixed with two training steps, and gated. Every command is a subprocess with a hard time limit.

It works on a private copy of the session's real-model workspace (`_appdata.real_workspace`), whose baseline run
gives the settings the field suite is asked under. The questions were picked from what SmolLM2-135M-Instruct answers
there (chat template, the system prompt, 64 tokens): it calls Neptune the largest planet and Antarctica the largest
continent, gives "12 seasons" of a one-season show, and gets Paris, Fe and Ottawa right. The test reads each verdict
from the store rather than assuming it, so a different answer changes what is checked, not whether it holds.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from _appdata import REAL_MAX_TOKENS, REAL_SYSTEM, private_copy, real_workspace
from clirun import workbench
from realmodel import real_model_dir

from workbench.types import FIELD_ABSTAIN_TAG

#: Flagged conversations as a chat product exports them, with the reviewer's decision of each: (messages, feedback,
#: decide flags). The model's answers are the ones it gives to these questions.
FLAGGED: list[tuple[list[dict[str, str]], dict[str, Any], tuple[str, ...]]] = [
    ([{"role": "user", "content": "What is the largest planet in the solar system?"},
      {"role": "assistant", "content": "The largest planet in the solar system is Neptune, but it's actually Uranus, "
                                       "which is slightly larger than Neptune."}],
     {"rating": "thumbs_down", "comment": "It's Jupiter, everyone knows that."},
     ("--decision", "hallucinated", "--answer", "Jupiter")),
    ([{"role": "user", "content": "I'm revising for a geography quiz."},
      {"role": "assistant", "content": "Happy to help! What would you like to know?"},
      {"role": "user", "content": "What is the largest continent?"},
      {"role": "assistant", "content": "The largest continent is Antarctica, but it's actually a planet."}],
     {"rating": 1, "comment": "Antarctica is not the largest, and not a planet", "conversation_id": "c-102"},
     ("--decision", "hallucinated", "--answer", "Asia")),
    ([{"role": "user", "content": "how many seasons of the bastard executioner are there"},
      {"role": "assistant", "content": "There are 12 seasons of the Bastard Executioner."}],
     {"rating": "thumbs_down", "reason": "made up", "timestamp": "2026-11-20T10:04:00Z"},
     ("--decision", "hallucinated", "--abstain", "--note", "a niche show: we would rather it said it does not know")),
    ([{"role": "user", "content": "What is the capital of France?"},
      {"role": "assistant", "content": "The capital of France is Paris."}],
     {"rating": 2, "comment": "is this right?"},
     ("--decision", "correct", "--answer", "Paris")),
    ([{"role": "user", "content": "What is the chemical symbol for iron?"},
      {"role": "assistant", "content": "Iron is a chemical element with the chemical symbol Fe."}],
     {"rating": "thumbs_down", "comment": "I thought it was Ir"},
     ("--decision", "correct", "--answer", "Fe")),
    ([{"role": "user", "content": "What is the capital of Canada?"},
      {"role": "assistant", "content": "The capital of Canada is Ottawa, Canada."}],
     {"feedback": {"rating": 2, "comment": "Toronto surely?", "conversation_id": "c-117"}},
     ("--decision", "correct", "--answer", "Ottawa")),
]
#: Seconds each command may take on two busy cores (a hang still fails): the light ones start no model.
LIGHT, MODEL = 120, 420


def _ok(*args: str, timeout: float, codes: tuple[int, ...] = (0,)) -> Any:
    proc = workbench(*args, "--json", timeout=timeout)
    assert proc.returncode in codes, (args[:2], proc.returncode, proc.stderr[-3000:])
    return json.loads(proc.stdout)


def _row(messages: list[dict[str, str]], feedback: dict[str, Any]) -> str:
    return json.dumps({"messages": [{"role": "system", "content": REAL_SYSTEM}, *messages], **feedback}) + "\n"


def _runs(db_path: Path) -> dict[str, dict[str, Any]]:
    """Each run of a store: its options, suite settings, adapter and greedy verdicts by probe."""
    with sqlite3.connect(db_path) as db:
        runs = {rid: {"options": json.loads(o), "suite": json.loads(s), "adapter": a, "verdicts": {}}
                for rid, o, s, a in db.execute("select id, options_json, suite_json, adapter from runs")}
        for rid, pid, verdict in db.execute("select run_id, probe_id, verdict from answers "
                                            "where kind = 'greedy' and variant = 0"):
            runs[rid]["verdicts"][pid] = verdict
    return runs


@pytest.mark.slow  # the real model answers the field suite four times and trains two steps (minutes on a CPU)
def test_field_reports_through_eval_fix_and_gate_on_the_real_model(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    data = real_workspace(tmp_path_factory)
    model = str(real_model_dir())
    ws = private_copy(data.workspace, tmp_path / "ws")
    w = ("--workspace", str(ws))
    seconds: dict[str, float] = {}
    start = time.monotonic()

    # The field suite is asked as the baseline run asks its probes: read its settings from the store.
    base = _runs(ws / "store.sqlite")[data.baseline]
    template, system, max_tokens = base["options"]["template"], base["suite"]["system_prompt"], \
        base["suite"]["max_tokens"]
    assert (template, system, max_tokens) == ("chat", REAL_SYSTEM, REAL_MAX_TOKENS)

    export = tmp_path / "flagged.jsonl"
    export.write_text("".join(_row(m, f) for m, f, _ in FLAGGED), encoding="utf-8")
    imported = _ok("reports", "import", str(export), *w, timeout=LIGHT)
    assert (imported["added"], imported["questions"]) == (len(FLAGGED), len(FLAGGED))
    ids = {r["question"]: r["id"] for r in _ok("reports", "list", *w, timeout=LIGHT)["reports"]}
    for messages, _, decision in FLAGGED:
        _ok("reports", "decide", ids[messages[-2]["content"]], *decision, "--reviewer", "ann", *w, timeout=LIGHT)
    suite = ws / "suites" / "field"
    assert _ok("reports", "export", "--suite", str(suite), *w, timeout=LIGHT)["probes"] == len(FLAGGED)
    probes = {p["question"].splitlines()[-1].removeprefix("user: "): p
              for p in map(json.loads, (suite / "probes.jsonl").read_text().splitlines())}
    decided = {m[-2]["content"]: d for m, _, d in FLAGGED}
    assert set(probes) == set(decided)
    seconds["import, decide, export"] = time.monotonic() - start

    t0 = time.monotonic()
    run = _ok("eval", "--model", model, "--probes", str(suite / "suite.yaml"), "--template", template,
              "--system-prompt", system, "--max-tokens", str(max_tokens), *w, timeout=MODEL)["run_id"]
    stored = _runs(ws / "store.sqlite")[run]
    assert stored["options"]["template"] == "chat" and stored["suite"]["system_prompt"] == REAL_SYSTEM
    assert stored["suite"]["max_tokens"] == REAL_MAX_TOKENS
    verdicts = {q: stored["verdicts"][p["id"]] for q, p in probes.items()}
    # What the picks rely on: the model still hallucinates a question the reviewer answered.
    answered_wrong = {q for q, d in decided.items() if d[1] == "hallucinated" and "--answer" in d
                      and verdicts[q] == "incorrect"}
    assert answered_wrong, verdicts
    seconds["eval"] = time.monotonic() - t0

    t0 = time.monotonic()
    attributed = {p["probe_id"] for p in _ok("attribute", run, *w, timeout=MODEL)["probes"]}
    failed = {q for q, v in verdicts.items() if v == "incorrect"}
    assert {probes[q]["id"] for q in failed} <= attributed
    out = _ok("fix", run, "--out", str(tmp_path / "fix"), "--guard-pool", "none", "--heldout-fraction", "0",
              "--train", "--steps", "2", *w, timeout=MODEL)
    seconds["attribute, fix --train"] = time.monotonic() - t0
    targets = {t["probe_id"]: t for t in out["fixset"]["field_targets"]}
    for q in answered_wrong:  # the reviewer's answer is what the fix teaches, whatever the attribution says
        t = targets[probes[q]["id"]]
        reference = decided[q][decided[q].index("--answer") + 1]
        assert (t["fix"], t["answer"]) == ("inject", reference), t
        assert "decided hallucinated by ann" in t["origin"]
    abstain_q = next(q for q, d in decided.items() if "--abstain" in d)
    assert FIELD_ABSTAIN_TAG in probes[abstain_q]["tags"]
    if verdicts[abstain_q] == "incorrect":  # it made up a number of seasons: the fix teaches it to abstain
        assert targets[probes[abstain_q]["id"]]["fix"] == "abstain"
    for q, v in verdicts.items():
        if v == "correct":
            assert targets[probes[q]["id"]]["target"] == "known"
    job = out["job"]
    assert job["status"] in ("done", "stopped") and job["adapter"], job

    t0 = time.monotonic()
    gate = _ok("regress", "--baseline", run, "--candidate", model, "--candidate-adapter", job["adapter"],
               "--no-guard", *w, timeout=MODEL, codes=(0, 1, 3))
    seconds["regress"] = time.monotonic() - t0
    gates = {g["name"]: g for g in gate["gates"]}

    # The gate asked the field suite again, in runs of its own under WORKSPACE/field: both models, every probe,
    # the baseline's chat settings; the baseline model's answers are the field run's (same model, same prompts).
    field_runs = _runs(ws / "field" / "store.sqlite")
    (fb,) = [r for r in field_runs.values() if r["adapter"] is None]
    (fc,) = [r for r in field_runs.values() if r["adapter"]]
    assert Path(fc["adapter"]).resolve() == Path(job["adapter"]).resolve()
    for r in (fb, fc):
        assert r["options"]["template"] == "chat" and r["suite"]["system_prompt"] == REAL_SYSTEM
        assert r["suite"]["max_tokens"] == REAL_MAX_TOKENS and set(r["verdicts"]) == {p["id"] for p in probes.values()}
    assert fb["verdicts"] == stored["verdicts"]

    # Its field gates count exactly what the field suite holds.
    pairs = [(fb["verdicts"][p["id"]], fc["verdicts"][p["id"]], FIELD_ABSTAIN_TAG in p["tags"])
             for p in probes.values()]
    broken = sum(b == "correct" and c != "correct" for b, c, _ in pairs)
    still = sum(b == c == "incorrect" for b, c, _ in pairs)
    refused = sum(b == "incorrect" and c == "not_attempted" and not abstain for b, c, abstain in pairs)
    reported = sum(b == "incorrect" for b, _, _ in pairs)
    kept, fixed = gates["field_fixes_kept"], gates["field_failures_fixed"]
    assert kept["message"].startswith(f"field suite: {broken} probes broken (correct -> not correct)"), kept
    assert kept["status"] == ("pass" if broken == 0 else "fail")
    assert fixed["message"].startswith(
        f"field suite: {still + refused} of {reported} reported failures not fixed ({still} still hallucinated, "
        f"{refused} now refused though the reviewer gave the answer)"), fixed
    assert fixed["status"] == ("pass" if still + refused == 0 else "warn")
    print({k: round(v, 1) for k, v in seconds.items()}, round(time.monotonic() - start, 1))

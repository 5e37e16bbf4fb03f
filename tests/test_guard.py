"""The known-facts guard (workbench/guard) on the test world: which facts a guard set holds, its cache, the screen
that spares a model that knows none of the pool, and how fix sets replay and hold out its facts."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from clirun import ENV, assert_refused, workbench
from ftworld import FtWorld, attributions_from_truth

from workbench.cli._cadence import PROGRESS_ENV

#: A progress line off a terminal (workbench/cli/_cadence.py ProgressLines).
PROGRESS = re.compile(r"guard: (?:pass (?P<pass>\d+), )?(?P<done>\d+) of (?P<total>\d+) \(\d+%\), .* elapsed")

pytestmark = pytest.mark.slow  # the fine-tuning world's run and a guard built on it


@pytest.fixture(scope="module")
def half(w: FtWorld, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run of the world model on half of its probes (attributed from truth) and a user pool of the other half:
    guard facts the run never asks."""
    from workbench.attribution.types import save_attributions
    from workbench.probes import LoadResult
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec

    probes = w.loaded.probes
    asked, rest = probes[::2], probes[1::2]
    run = run_eval(w.store, ModelSpec(model=str(w.paths.model)), w.suite,
                   LoadResult(probes=asked, skipped=0, problems=(), source="half"),
                   EvalOptions(samples=4, paraphrases=True, bootstrap=0)).run_id
    save_attributions(w.store, run, attributions_from_truth(w.store, run, w.truth))
    by_id = {p.id for p in rest}
    rows = [json.loads(line) for line in w.paths.probes.read_text().splitlines()]
    pool = tmp_path_factory.mktemp("pool") / "own-facts.jsonl"
    pool.write_text("".join(json.dumps({**r, "id": "own-" + r["id"]}) + "\n" for r in rows if r["id"] in by_id))
    return {"run": run, "pool": pool, "rest": rest}


def _guard(w: FtWorld, pool: Path, **kw: Any) -> Any:
    from workbench.guard import build_guard
    from workbench.types import ModelSpec

    return build_guard(w.store, ModelSpec(model=str(w.paths.model)), w.suite, pool=["none", pool], **kw)


def test_guard_holds_the_facts_greedy_and_samples_get_right(w: FtWorld, half: dict[str, Any]) -> None:
    from workbench.guard.build import guard_store
    from workbench.results import load_results
    from workbench.types import Verdict

    built = _guard(w, half["pool"])
    g = built.guard
    assert not built.cached and g.pool_size == len(half["rest"]) == g.evaluated
    gstore = guard_store(w.store)  # guard runs live apart from the user's runs
    assert not {r.id for r in w.store.list_runs()} & set(g.runs)
    question, phrasings, sampled = (load_results(gstore, r).by_id() for r in g.runs)
    for pid, r in question.items():  # each stage asks only what passed the one before
        assert (pid in phrasings) == (r.verdict == Verdict.CORRECT)
    for pid, r in phrasings.items():  # greedy-right under the question and the paraphrase, nothing less
        assert len(r.greedy) == 2 and (pid in sampled) == all(a.verdict == Verdict.CORRECT for a in r.greedy)
    known = {f.probe.id for f in g.facts}
    for pid, r in sampled.items():
        right = sum(a.verdict == Verdict.CORRECT for a in r.samples if a.variant == 0)
        assert (pid in known) == (right >= 2), pid
    assert 10 <= len(known) <= g.greedy_right < g.pool_size
    assert all(f.answer.strip() for f in g.facts)

    again = _guard(w, half["pool"])  # cached: same key, nothing evaluated
    assert again.cached and again.path == built.path and again.guard.facts == g.facts
    stricter = _guard(w, half["pool"], min_samples_right=3)
    assert not stricter.cached and {f.probe.id for f in stricter.guard.facts} <= known


def test_guard_screen_spares_a_model_that_knows_none_of_the_pool(w: FtWorld) -> None:
    """The shipped pool (simple facts in five languages) means nothing to the world model: only the screen is
    evaluated, and the guard says it knows none."""
    from workbench.guard import build_guard, shipped_pool
    from workbench.guard.build import SCREEN
    from workbench.types import ModelSpec

    assert len(shipped_pool()) == 6
    g = build_guard(w.store, ModelSpec(model=str(w.paths.model)), w.suite).guard
    assert g.pool_size > 2000 and g.evaluated == SCREEN and g.facts == ()


def test_fix_set_replays_and_holds_out_guard_facts(w: FtWorld, half: dict[str, Any], tmp_path: Path) -> None:
    from datasets import load_from_disk

    from finetune.fixset import GUARD_VALIDATION_SHARE, MAX_REPLAY_REPEATS, build_fixset

    guard = _guard(w, half["pool"]).guard
    m = build_fixset(w.store, half["run"], tmp_path / "fix", guard=guard, replay_ratio=20)
    ids = {f.probe.id for f in guard.facts}
    held = {v["probe_id"] for v in m.validation} & ids
    assert len(held) == max(1, round(GUARD_VALIDATION_SHARE * len(ids)))
    sft = list(load_from_disk(m.path)["sft"])
    replayed = Counter(r["prompt"] for r in sft if r["category"] == "replay")
    guard_rows = {r["probe_id"] for r in sft if r["source"] == "guard"}
    assert guard_rows and guard_rows <= ids - held  # held-out guard facts never train
    assert max(replayed.values()) <= MAX_REPLAY_REPEATS and m.replay_capped  # 20x asks more than 3 per fact
    assert set(m.replayed_probe_ids) >= guard_rows and m.guard is not None
    assert m.guard["validation"] == len(held) and m.guard["replayed"] == len(guard_rows & set(m.replayed_probe_ids))


@pytest.fixture(scope="module")
def wrong_run(w: FtWorld) -> str:
    """A run of only the facts the world model gets wrong, attributed: a team's own failures, nothing known."""
    from workbench.attribution.types import save_attributions
    from workbench.probes import LoadResult
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.types import ModelSpec, Verdict

    wrong = {r.probe.id for r in load_results(w.store, w.run_id).probes if r.verdict != Verdict.CORRECT}
    probes = tuple(p for p in w.loaded.probes if p.id in wrong)
    run = run_eval(w.store, ModelSpec(model=str(w.paths.model)), w.suite,
                   LoadResult(probes=probes, skipped=0, problems=(), source="wrong"),
                   EvalOptions(samples=4, paraphrases=True, bootstrap=0)).run_id
    save_attributions(w.store, run, attributions_from_truth(w.store, run, w.truth))
    return run


def test_fix_set_with_no_known_fact_is_refused_unless_allowed(w: FtWorld, wrong_run: str, tmp_path: Path) -> None:
    """No guard and nothing known in the run: no fix set without --allow-unguarded (then marked unguarded, its
    validation slice empty)."""
    from finetune.fixset import build_fixset
    from workbench.errors import WorkbenchError

    run = wrong_run
    with pytest.raises(WorkbenchError, match=r"no known facts to protect.*--allow-unguarded"):
        build_fixset(w.store, run, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    m = build_fixset(w.store, run, tmp_path / "allowed", allow_unguarded=True)
    assert m.unguarded and m.validation == [] and m.replayed_probe_ids == []


def test_guard_cli_build_and_show(w: FtWorld, half: dict[str, Any], tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    args = ["--workspace", ws, "--model", str(w.paths.model), "--template", "Q: {question} A:", "--stop", ".",
            "--max-tokens", "6", "--guard-pool", "none", "--guard-pool", str(half["pool"])]
    # built off a terminal (as into a log file): progress lines on stderr, by the clock (here: every update)
    built = workbench("guard", "build", *args, env={**ENV, PROGRESS_ENV: "0"}, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    lines = [m for line in built.stderr.splitlines() if (m := PROGRESS.match(line))]
    assert lines and all(0 < int(m["done"]) <= int(m["total"]) for m in lines), built.stderr[-2000:]
    assert {m["pass"] for m in lines} >= {None, "2"}, built.stderr[-2000:]  # the screen, then the next question
    shown_json = workbench("guard", "show", *args, "--json", timeout=120)
    assert shown_json.returncode == 0, shown_json.stderr[-2000:]
    out = json.loads(shown_json.stdout)
    assert out["cached"] and out["known"] >= 10 and out["pool_size"] == len(half["rest"])
    headline = f"(built in {out['seconds']:.0f} s): {out['known']} known facts of a pool of {out['pool_size']}"
    assert headline in built.stdout, built.stdout
    shown = workbench("guard", "show", *args, "--facts", timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"{out['known']} known facts of a pool of {out['pool_size']}" in shown.stdout
    assert "read from the workspace" in shown.stdout and shown.stdout.count("  own-") == out["known"]
    other = workbench("guard", "show", *args[:-4], "--max-tokens", "7", timeout=120)  # never built
    assert_refused(other, "no guard set built", "workbench guard build")
    assert_refused(workbench("guard", "build", "--workspace", ws, timeout=60), "--model (or --run RUN)")


def test_fix_cli_refuses_an_unguarded_set_and_warns_when_allowed(w: FtWorld, wrong_run: str, tmp_path: Path) -> None:
    """`workbench fix` as a user runs it on a team's own failures: the guard is built at first use (the world model
    knows none of the shipped pool, so only its screen is asked), the set is refused naming the way out, and with
    --allow-unguarded it is built with a warning on stderr."""
    ws = str(w.store.workspace)
    refused = workbench("fix", wrong_run, "--out", str(tmp_path / "refused"), "--workspace", ws, timeout=300)
    assert_refused(refused, "no known facts to protect", "--allow-unguarded", "--guard-pool FILE")
    assert not (tmp_path / "refused").exists()
    built = workbench("fix", wrong_run, "--out", str(tmp_path / "fix"), "--workspace", ws, "--allow-unguarded",
                      timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    assert "WARNING: no known fact protects this set" in built.stderr
    assert json.loads((tmp_path / "fix" / "fixset.json").read_text())["unguarded"] is True


def test_guard_paraphrases_replay_each_fact_under_its_paraphrase_too(w: FtWorld, half: dict[str, Any],
                                                                    tmp_path: Path) -> None:
    from datasets import load_from_disk

    from finetune.fixset import build_fixset

    guard = _guard(w, half["pool"]).guard
    facts = {f.probe.id: f.probe for f in guard.facts}
    asked: dict[str, dict[str, set[str]]] = {}
    for on in (False, True):
        m = build_fixset(w.store, half["run"], tmp_path / f"fix-{on}", guard=guard, replay_ratio=20,
                         guard_paraphrases=on)
        assert m.guard is not None and m.guard.get("paraphrases", False) is on
        data = load_from_disk(m.path)
        rows = [r for r in data["sft"] if r["source"] == "guard"] + [r for r in data["dpo"] if r["source"] == "anchor"
                                                                      and r["probe_id"] in facts]
        by_fact: dict[str, set[str]] = {}
        for r in rows:
            by_fact.setdefault(r["probe_id"], set()).add(r["prompt"])
        asked[str(on)] = by_fact
    paraphrased = [pid for pid in asked["True"] if facts[pid].paraphrases]
    assert paraphrased and set(asked["True"]) == set(asked["False"])  # the same facts, held-out ones still not
    for pid in paraphrased:  # off: the question only; on: the question and the paraphrase
        assert all(facts[pid].question in p for p in asked["False"][pid])
        assert any(facts[pid].paraphrases[0] in p for p in asked["True"][pid]), pid
    # The same option as a user gives it: `workbench fix --guard-paraphrases` records it in the manifest.
    done = workbench("fix", half["run"], "--out", str(tmp_path / "cli"), "--workspace", str(w.store.workspace),
                     "--guard-pool", "none", "--guard-pool", str(half["pool"]), "--guard-paraphrases", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((tmp_path / "cli" / "fixset.json").read_text())
    assert manifest["guard"]["paraphrases"] is True and manifest["guard"]["known"] >= 1

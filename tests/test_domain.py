"""Known facts in the style of a team's questions (workbench/guard/domain.py): which shipped pool a run's questions
read like, and a fix set that replays those facts first and holds a share out for the job to check."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from clirun import assert_refused, workbench
from ftworld import FtWorld

from workbench.guard.domain import STYLE_MIN, match_style, style_pools

NQ_SLICE = Path(__file__).parent / "data" / "formats" / "nq_open.jsonl"


def test_the_shipped_pools_and_which_one_a_set_reads_like(world: Any) -> None:
    assert [p.name for p in style_pools()] == ["nq_open.jsonl", "truthfulqa.jsonl"]
    nq = [json.loads(line)["question"] for line in NQ_SLICE.read_text().splitlines()]
    match = match_style(nq)  # the NQ-open dev slice the tests ship: not in the pool (its questions start at row 51)
    assert match.pool is not None and match.pool.name == "nq_open.jsonl"
    assert match.scores["nq_open.jsonl"] >= STYLE_MIN > match.scores["truthfulqa.jsonl"]
    assert "read like nq_open.jsonl" in match.describe()
    # the synthetic world's template questions read like neither pool
    from workbench.probes import resolve_probes

    _, loaded = resolve_probes(world.suite)
    match = match_style([p.question for p in loaded.probes])
    assert match.pool is None and "no shipped style pool" in match.describe()
    assert match_style([]).pool is None


def _domain(w: FtWorld) -> Any:
    """A domain guard of facts the run does not ask: the world's probes under their paraphrase, tagged as a style
    pool's are."""
    from workbench.guard import GuardFact, GuardSet

    facts = [GuardFact(probe=replace(p, id=f"dom-{p.id}", question=p.paraphrases[0], paraphrases=(),
                                     tags=("domain:test",)), answer=f" {p.answers[0]}", samples_right=2, samples=2)
             for p in w.loaded.probes[:30] if p.paraphrases]
    return GuardSet(key="d" * 24, model=str(w.paths.model), adapter=None, fingerprint="f", settings={}, criteria={},
                    pool=[], pool_size=len(facts), evaluated=len(facts), greedy_right=len(facts), facts=tuple(facts))


def test_a_fix_set_replays_the_domain_facts_first_and_holds_some_out(w: FtWorld, tmp_path: Path) -> None:
    from datasets import load_from_disk

    from finetune.fixset import FixOptions, build_fixset

    domain = _domain(w)
    m = build_fixset(w.store, w.run_id, tmp_path / "fix", FixOptions(domain=domain, domain_how="given: test.jsonl",
                                                                     replay_ratio=1.0))
    assert m.guard is not None
    d = m.guard["domain"]
    assert d["how"] == "given: test.jsonl" and d["known"] == len(domain.facts) == d["usable"]
    held = {r["probe_id"] for r in m.validation if r["probe_id"].startswith("dom-")}
    assert d["validation"] == len(held) >= 1
    sft = load_from_disk(str(tmp_path / "fix"))["sft"]
    replayed = {r["probe_id"] for r in sft if r["probe_id"].startswith("dom-")}
    # every domain fact not held out is replayed, first, at a replay ratio that leaves some of the run's own out
    assert replayed == {f.probe.id for f in domain.facts} - held and d["replayed"] == len(replayed)
    own = {r["probe_id"] for r in sft if r["category"] == "replay" and not r["probe_id"].startswith("dom-")}
    from workbench.results import load_results
    from workbench.types import Verdict

    known = {r.probe.id for r in load_results(w.store, w.run_id).probes if r.verdict == Verdict.CORRECT}
    assert own < known - {r["probe_id"] for r in m.validation}
    # without one, no `domain` entry: a set of the old kind is unchanged
    plain = build_fixset(w.store, w.run_id, tmp_path / "plain", FixOptions())
    assert plain.guard is None


def test_fix_refuses_a_missing_domain_pool(w: FtWorld, tmp_path: Path) -> None:
    proc = workbench("fix", w.run_id, "--out", str(tmp_path / "fix"), "--workspace", str(w.store.workspace),
                     "--domain-pool", str(tmp_path / "nope.jsonl"), timeout=120)
    assert_refused(proc, "--domain-pool: no such file", "nope.jsonl")
    assert not (tmp_path / "fix").exists()

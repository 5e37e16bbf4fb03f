"""Same inputs, same fix set files: the planner and writers reproduce, byte for byte, what the builder wrote before
they replaced it (tests/data/fixset_golden.json, captured from that builder on the session's test world).

Each case builds a fix set of the test world's run under one set of options and hashes every file it wrote (the
Arrow data, the manifest, the dataset card), the temporary directory's name replaced by a placeholder. The Arrow
files' `state.json` is left out: `datasets` gives each in-memory table a random fingerprint.

The world model is bitwise stable at one torch thread (tests/conftest.py), so the hashes hold across sessions; a
change to the world, its training or `datasets`' on-disk format changes them all, and the file is then regenerated
with `WORKBENCH_UPDATE_GOLDEN=1` after checking the existing fix-set tests still pass.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ftworld import FtWorld

pytestmark = pytest.mark.slow  # the session's fine-tuning world

GOLDEN = Path(__file__).parent / "data" / "fixset_golden.json"


def _guard(w: FtWorld) -> Any:
    """A guard set of facts the run does not ask: the world's probes under their paraphrase as the question."""
    from workbench.guard import GuardFact, GuardSet

    facts = []
    for p in w.loaded.probes[:40]:
        if p.paraphrases:
            q = replace(p, id=f"guard-{p.id}", question=p.paraphrases[0], paraphrases=(),
                        tags=("topic:" + str(p.relation),))
            facts.append(GuardFact(probe=q, answer=f" {p.answers[0]}", samples_right=2, samples=2))
    return GuardSet(key="k" * 24, model=str(w.paths.model), adapter=None, fingerprint="f", settings={}, criteria={},
                    pool=[], pool_size=len(facts), evaluated=len(facts), greedy_right=len(facts), facts=tuple(facts))


def _facts(w: FtWorld, root: Path) -> Path:
    """--facts for the unknown facts: their answers from the world's truth."""
    path = root / "facts.jsonl"
    rows = [{"probe_id": pid, "answer": f"answer {i}"} for i, pid in enumerate(sorted(w.truth)[:30])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _cases(w: FtWorld, root: Path) -> dict[str, dict[str, Any]]:
    from workbench.attribution.build import build_index

    index = root / "index.sqlite"
    build_index(w.paths.corpus, index)
    return {
        "auto": {},
        "auto-seed1": {"seed": 1},
        "dpo": {"strategy": "dpo"},
        "abstain": {"strategy": "abstain", "heldout_fraction": 0.0},
        "inject": {"strategy": "inject", "heldout_fraction": 0.0},
        "rl": {"strategy": "rl"},
        "replay-half-no-validation": {"replay_ratio": 0.5, "validation_fraction": 0.0},
        "facts": {"facts": _facts(w, root)},
        "rehearsal-reserve": {"rehearsal": index, "rehearsal_ratio": 2.0, "reserve_fraction": 0.1},
        "guard": {"guard": _guard(w), "replay_ratio": 20},
        "guard-dpo": {"guard": _guard(w), "strategy": "dpo", "seed": 3},
        "guard-rl": {"guard": _guard(w), "strategy": "rl", "validation_fraction": 0.0},
    }


def _digest(out: Path, base: Path, world: Path, run_id: str) -> dict[str, str]:
    """sha256 of every file under `out` but `state.json`, by path relative to `out`; the world's folder, the
    session's temporary root and the run's id (all differ per session, and the world's folder is shared by the
    xdist workers, outside each one's temporary root) replaced by placeholders."""
    hashes = {}
    for f in sorted(out.rglob("*")):
        if f.is_file() and f.name != "state.json":
            data = (f.read_bytes().replace(str(world).encode(), b"<WORLD>").replace(str(base).encode(), b"<TMP>")
                    .replace(run_id.encode(), b"<RUN>"))
            hashes[str(f.relative_to(out))] = hashlib.sha256(data).hexdigest()
    return hashes


def _build(w: FtWorld, root: Path, name: str, options: dict[str, Any], base: Path) -> dict[str, str]:
    from finetune.fixset import build_fixset

    out = root / name
    build_fixset(w.store, w.run_id, out, **options)
    return _digest(out, base, Path(w.paths.model).parent, w.run_id)


def _inputs(w: FtWorld) -> str:
    """sha256 of what the builder reads from the run: every sample and greedy answer with its verdict, and the truth
    the attributions come from. Another machine's floating point can train the world (or answer) otherwise; the
    captured files then say nothing about the builder."""
    from workbench.results import load_results

    rows = [(r.probe.id, [a.text for a in r.greedy], [a.text for a in r.samples], str(r.verdict))
            for r in load_results(w.store, w.run_id).probes]
    return hashlib.sha256(json.dumps([rows, sorted(w.truth.items())], sort_keys=True).encode()).hexdigest()


def test_fix_set_files_match_the_captured_builder(w: FtWorld, tmp_path: Path,
                                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp()
    got: dict[str, Any] = {name: _build(w, tmp_path, name, opts, base) for name, opts in _cases(w, tmp_path).items()}
    got["inputs"] = _inputs(w)
    if os.environ.get("WORKBENCH_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    if got["inputs"] != want["inputs"]:
        pytest.skip("this machine's test world answers otherwise than the one the files were captured from "
                    "(WORKBENCH_UPDATE_GOLDEN=1 recaptures them)")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], f"case `{name}`: files differ from the captured builder's"

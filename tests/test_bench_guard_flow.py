"""bench/guard_flow.py without the real model: its argument contract as a user runs it (a subprocess with a hard time
limit): the levers' flags in `--help`, and `--baseline` refused for more than one set before anything runs; and how it
counts a fix set's targets fixed (on a store written here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from clirun import ENV

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "guard_flow.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, env=ENV, timeout=60,
                          stdin=subprocess.DEVNULL, cwd=ROOT)


def test_help_names_the_levers() -> None:
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    for option in ("--fix-arg", "--baseline", "--baseline-only", "--label", "--strategy", "--guard-pool", "--rescale",
                   "--rescale-only", "--world"):
        assert option in proc.stdout


def test_one_baseline_run_serves_one_set(tmp_path: Path) -> None:
    proc = _run("--workspace", str(tmp_path / "ws"), "--sets", "nq,tqa", "--baseline", "run-x")
    assert proc.returncode == 2
    assert "--baseline names the run of one set" in proc.stderr
    assert not (tmp_path / "ws").exists()  # refused before any workspace or model


def test_sets_are_checked_before_anything_runs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "corpus.jsonl").write_text("")
    for args, needle in ((("--sets", "nq,popqa"), "--sets: unknown set(s) popqa; known: nq, tqa, planted"),
                         (("--sets", "planted"), "--sets planted needs --world DIR"),
                         (("--sets", "planted", "--world", str(tmp_path / "half")),
                          f"--world {tmp_path / 'half'}: not a built world (no suite.yaml, truth.jsonl, model)")):
        proc = _run("--workspace", str(ws), *args)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert not ws.exists()


def test_bad_scales_are_refused_before_anything_runs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for scales, needle in (("0.5,1.5", "--rescale: every scale must be in (0, 1], got `0.5,1.5`"),
                           ("0,1", "--rescale: every scale must be in (0, 1]"),
                           ("half", "--rescale: scales are numbers in (0, 1] separated by commas, got `half`")):
        proc = _run("--workspace", str(ws), "--rescale", scales)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    proc = _run("--workspace", str(ws), "--rescale-only", str(tmp_path / "results.json"))
    assert proc.returncode == 2 and "--rescale-only needs --rescale S,..." in proc.stderr, proc.stderr
    assert not ws.exists()


def test_a_results_file_that_is_not_this_benchs_is_a_clear_error(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (tmp_path / "other.json").write_text('{"rows": []}')
    (tmp_path / "broken.json").write_text("{not json")
    for name in ("missing.json", "other.json", "broken.json"):
        proc = _run("--workspace", str(ws), "--rescale", "0.5", "--rescale-only", str(tmp_path / name))
        assert proc.returncode == 2 and "is not a results file of this bench" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    (tmp_path / "one.json").write_text('{"results": [{"run": "run-x", "method": "sft", "strategy": "auto", '
                                       '"seed": 0, "label": "defaults"}]}')
    proc = _run("--workspace", str(ws), "--rescale", "0.5", "--rescale-only", str(tmp_path / "one.json"))
    assert proc.returncode == 1 and "--rescale-only: cannot read the run's fix set or job in" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_targets_fixed_counts_the_methods_split_and_its_held_out_targets(tmp_path: Path) -> None:
    """An abstention fixes a missing fact and nothing else; the other split's targets are not the method's."""
    from benchload import load_bench

    from workbench.attribution.types import Attribution, save_attributions
    from workbench.store import Store

    bench = load_bench("guard_flow")
    store = Store.open(tmp_path)
    ids = ("miss", "rare", "rare2", "held", "unst")
    probes = [{"id": p, "question": f"{p}?", "answers": ["x"]} for p in ids]
    kw: dict[str, object] = {"adapter": None, "backend": "hf", "fingerprint": "f", "suite": "s", "suite_config": {},
                             "options": {}, "n_probes": len(probes), "skipped_bad": 0}

    def run(verdicts: dict[str, str]) -> str:
        rid = store.create_run(model="m", **kw)  # type: ignore[arg-type]
        store.add_probes(rid, probes)
        store.add_answers(rid, [{"probe_id": p, "variant": 0, "kind": "greedy", "sample_index": 0, "prompt": "",
                                 "text": "", "verdict": v, "mean_logprob": None, "finish_reason": "stop"}
                                for p, v in verdicts.items()])
        return rid

    wrong = dict.fromkeys(ids, "incorrect")
    before = run(wrong)
    after = run({**wrong, "miss": "not_attempted", "rare": "correct", "rare2": "not_attempted", "held": "correct",
                 "unst": "correct"})
    cats = {"miss": "data:missing", "rare": "data:underrepresented", "rare2": "data:underrepresented",
            "held": "data:underrepresented", "unst": "behavior:unstable"}
    save_attributions(store, before, [Attribution(probe_id=p, category=c, confidence=1.0, knowledge="Unknown",
                                                  fix="inject", evidence={}) for p, c in cats.items()])
    (tmp_path / "fix").mkdir()
    (tmp_path / "fix" / "fixset.json").write_text(json.dumps({
        "counts": {"sft": {"data:missing": 1, "data:underrepresented": 4, "replay": 9},
                   "dpo": {"behavior:unstable": 1}, "prompts": {"data:missing": 1, "behavior:unstable": 1}},
        "heldout_probe_ids": ["held"],  # the manifest lists the trained targets only
        "targets": [{"probe_id": p, "category": c} for p, c in cats.items() if p != "held"]}))
    got = bench.targets_fixed(tmp_path, before, after, tmp_path / "fix", "sft")
    assert (got["targets_trained"], got["targets_trained_fixed_before"], got["targets_trained_fixed"]) == (3, 0, 2)
    assert (got["targets_heldout"], got["targets_heldout_fixed"]) == (1, 1)
    assert got["targets_fixed_share"] == 2 / 3
    dpo = bench.targets_fixed(tmp_path, before, after, tmp_path / "fix", "dpo")
    assert (dpo["targets_trained"], dpo["targets_trained_fixed"]) == (1, 1)
    grpo = bench.targets_fixed(tmp_path, before, after, tmp_path / "fix", "grpo")  # GRPO trains the prompts split
    assert (grpo["targets_trained"], grpo["targets_trained_fixed"]) == (2, 2)

"""`workbench export RUN --format lm-eval`: lm-evaluation-harness's results JSON and samples JSONL, checked against
the layout lm-eval documents and writes (file names, keys, `,none` filter suffix, stderr, hashes), with the
scores equal to the run's own."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest
from clirun import assert_refused, workbench
from ftworld import FtWorld

from workbench.lmeval_export import task_name

RESULT_KEYS = {"results", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples",
               "config", "date", "task_hashes", "model_name", "model_name_sanitized", "total_evaluation_time_seconds"}
SAMPLE_KEYS = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
               "prompt_hash", "target_hash"}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def exported(w: FtWorld, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("lmeval")
    proc = workbench("export", w.run_id, "--format", "lm-eval", "--out", str(out),
                     "--workspace", str(w.store.workspace), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (results,) = out.glob("*/results_*.json")
    (samples,) = out.glob("*/samples_*.jsonl")
    assert f"wrote {results}" in proc.stdout and samples.parent == results.parent
    return out, json.loads(results.read_text()), [json.loads(line) for line in samples.read_text().splitlines()]


def test_file_names_as_lm_eval_reads_them(w: FtWorld, exported: tuple[Path, dict[str, Any], list[Any]]) -> None:
    out, res, _ = exported
    results, samples = next(out.glob("*/results_*.json")), next(out.glob("*/samples_*.jsonl"))
    assert results.parent.name == res["model_name_sanitized"] and "/" not in res["model_name_sanitized"]
    # lm-eval's readers: the date after the last `_`, the task between the first and the last `_`
    date = results.name[results.name.rfind("_") + 1:].removesuffix(".json")
    assert samples.name[samples.name.rfind("_") + 1:].removesuffix(".jsonl") == date and ":" not in date
    task = samples.name[samples.name.find("_") + 1:samples.name.rfind("_")]
    assert task == task_name(w.store.get_run(w.run_id).suite) and list(res["results"]) == [task]


def test_results_layout_and_scores(w: FtWorld, exported: tuple[Path, dict[str, Any], list[Any]]) -> None:
    _, res, samples = exported
    assert set(res) >= RESULT_KEYS
    (task,) = res["results"]
    scores = res["results"][task]
    overall = w.store.get_run(w.run_id).metrics["overall"]  # the run's own metrics, as the workbench stored them
    for m in ("correct", "incorrect", "not_attempted", "accuracy_given_attempted", "f_score"):
        assert scores[f"{m},none"] == pytest.approx(overall[m])
        assert f"{m}_stderr,none" in scores
    values = [s["correct"] for s in samples]
    n, mu = len(values), sum(values) / len(values)
    assert scores["correct_stderr,none"] == pytest.approx(math.sqrt(sum((v - mu) ** 2 for v in values) / (n - 1) / n))
    assert scores["f_score_stderr,none"] == "N/A" and scores["alias"] == task
    assert res["n-samples"][task] == {"original": overall["n"], "effective": len(samples)} and len(samples) == n
    assert res["versions"][task] == 1.0 and res["n-shot"][task] == 0 and res["group_subtasks"] == {task: []}
    assert res["higher_is_better"][task]["incorrect"] is False
    cfg = res["configs"][task]
    assert cfg["output_type"] == "generate_until" and cfg["metadata"]["workbench_run"] == w.run_id
    assert res["config"]["model_args"] == f"pretrained={w.paths.model}"
    assert res["task_hashes"][task] == _sha("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"]
                                                    for s in samples))


def test_samples_layout(w: FtWorld, exported: tuple[Path, dict[str, Any], list[Any]]) -> None:
    _, _, samples = exported
    from workbench.results import load_results

    greedy = {r.probe.id: r.greedy[0] for r in load_results(w.store, w.run_id).probes}
    assert [s["doc_id"] for s in samples] == list(range(len(samples)))
    for s in samples:
        assert set(s) >= SAMPLE_KEYS and s["filter"] == "none" and s["metrics"] == ["correct", "incorrect",
                                                                                     "not_attempted"]
        answer = greedy[s["doc"]["probe_id"]]
        prompt = s["arguments"]["gen_args_0"]["arg_0"]
        assert prompt == answer.prompt and s["resps"] == [[answer.text]] and s["filtered_resps"] == [answer.text]
        assert s["correct"] == float(answer.verdict == "correct") and s["verdict"] == str(answer.verdict)
        assert s["doc_hash"] == _sha(json.dumps(s["doc"], indent=2, ensure_ascii=False))
        assert s["prompt_hash"] == _sha(prompt) and s["target_hash"] == _sha(s["target"])
        assert s["target"] in s["doc"]["answers"]


@pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None,
                    reason="lm-eval is not installed (pip install lm-eval): the documented layout is checked above")
def test_lm_eval_reads_the_files(exported: tuple[Path, dict[str, Any], list[Any]]) -> None:
    """lm-eval's own readers: its file-name parsers (what its Hub cards and Zeno/W&B scripts use), and its results
    table (`make_table`, what `lm_eval` prints) over the results JSON."""
    from lm_eval import utils

    out, res, _ = exported
    files = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()]
    (results,), (samples,) = utils.get_results_filenames(files), utils.get_sample_results_filenames(files)
    assert utils.get_file_task_name(Path(samples).name) == next(iter(res["results"]))
    # (its parser strips `.jsonl` only: a results file's date keeps `.json`, in lm-eval's own files too)
    assert utils.get_file_datetime(Path(results).name) == utils.get_file_datetime(Path(samples).name) + ".json"
    if importlib.util.find_spec("pytablewriter") is None:
        return  # make_table needs it (lm-eval's own dependency)
    table = utils.make_table(res)
    (task,) = res["results"]
    cells = {c[4]: c for c in ([x.strip() for x in line.split("|")[1:-1]] for line in table.splitlines()[2:])}
    assert table.splitlines()[2].startswith(f"|{task}") and set(cells) == {
        "correct", "incorrect", "not_attempted", "accuracy_given_attempted", "f_score"}
    for metric, c in cells.items():  # filter, n-shot, direction, value, stderr
        scores = res["results"][task]
        assert c[2] == "none" and c[3] == "0" and c[5] == ("↑" if res["higher_is_better"][task][metric] else "↓")
        assert float(c[6]) == pytest.approx(scores[f"{metric},none"], abs=5e-4)
        stderr = scores[f"{metric}_stderr,none"]
        assert c[8] == "N/A" if stderr == "N/A" else float(c[8]) == pytest.approx(stderr, abs=5e-5)


def test_out_must_be_a_folder(w: FtWorld, tmp_path: Path) -> None:
    f = tmp_path / "results.json"
    f.write_text("{}")
    assert_refused(workbench("export", w.run_id, "--format", "lm-eval", "--out", str(f),
                             "--workspace", str(w.store.workspace), timeout=120), "--out", "a folder")

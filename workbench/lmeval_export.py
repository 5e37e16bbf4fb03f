"""A run in lm-evaluation-harness's output layout, so dashboards and scripts built for lm-eval read workbench runs.

lm-eval (0.4) writes, under its `--output_path DIR`:

    DIR/<model_name_sanitized>/results_<date_id>.json          the aggregated results
    DIR/<model_name_sanitized>/samples_<task>_<date_id>.jsonl  one line per document (with --log_samples)

`date_id` is an ISO time with `:` replaced by `-` (its readers take the text after the last `_` as the date, and the
text between the first and the last `_` of a samples file as the task). The results JSON holds `results` (per task:
`alias`, then `METRIC,FILTER` and `METRIC_stderr,FILTER`; the filter here is lm-eval's `none`), `group_subtasks`,
`configs` (the task's config: output type, generation kwargs, metric list), `versions`, `n-shot`,
`higher_is_better`, `n-samples` (`original`, `effective`), `config` (model, model_args, ...), `date`,
`task_hashes` and the general tracker's fields (`model_name`, `model_name_sanitized`, times). A samples line holds
`doc_id`, `doc`, `target`, `arguments` (`gen_args_0: {arg_0: prompt, arg_1: gen_kwargs}`), `resps`,
`filtered_resps`, `filter`, `metrics`, `doc_hash` / `prompt_hash` / `target_hash` (sha256 of the doc's JSON at
indent 2, the prompt, the target) and each metric's value.

What a run maps to: one task per run (named after its suite), one document per probe, the greedy answer to the
question as the response (paraphrases and samples are the workbench's own and stay in its export), and the SimpleQA
metrics of workbench/grading/metrics.py, each a mean over documents with lm-eval's standard error of a mean
(`sample stddev / sqrt(n)`); accuracy_given_attempted and f_score are not means over documents: their stderr is
`N/A`, as lm-eval writes it for an aggregate without one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.grading.metrics import METRICS, compute_metrics
from workbench.store import Store
from workbench.types import Verdict

FILTER = "none"
VERSION = 1.0
#: Per-document metrics (means over documents, as lm-eval's `mean` aggregation).
PER_DOC = {"correct": Verdict.CORRECT, "incorrect": Verdict.INCORRECT, "not_attempted": Verdict.NOT_ATTEMPTED}
HIGHER_IS_BETTER = {"correct": True, "incorrect": False, "not_attempted": False, "accuracy_given_attempted": True,
                    "f_score": True}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sanitized(name: str) -> str:
    """A model or task name as a path component (lm-eval turns path separators and the like into `__`)."""
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def task_name(suite: str) -> str:
    """The run's suite as an lm-eval task name: `workbench_` + the suite's name, lower case, `-` between words (a
    samples file's readers take the task from between the file name's first and last `_`)."""
    return "workbench_" + (re.sub(r"[^0-9A-Za-z]+", "-", Path(suite).stem).strip("-").lower() or "suite")


def stderr_of_mean(values: list[float]) -> float | str:
    n = len(values)
    if n < 2:
        return "N/A"
    mu = sum(values) / n
    return math.sqrt(sum((v - mu) ** 2 for v in values) / (n - 1)) / math.sqrt(n)


def _date_id(created_at: str) -> tuple[str, float]:
    when = datetime.fromisoformat(created_at)
    when = when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when
    return when.isoformat().replace(":", "-"), when.replace(tzinfo=UTC).timestamp()


def export_lm_eval(store: Store, run_id: str, out_dir: Path) -> tuple[Path, Path]:
    """Write a run's results JSON and samples JSONL in lm-eval's layout under `out_dir`; returns both paths."""
    from workbench.results import load_results

    res = load_results(store, run_id)
    run = res.run
    task = task_name(run.suite)
    cfg = run.suite_config
    gen_kwargs = {"until": list(cfg.get("stop") or []), "max_gen_toks": cfg.get("max_tokens"), "do_sample": False,
                  "temperature": 0.0}
    samples: list[dict[str, Any]] = []
    verdicts: list[Verdict] = []
    for doc_id, r in enumerate(res.probes):
        p, greedy = r.probe, r.greedy[0]
        doc = {"probe_id": p.id, "question": p.question, "answers": list(p.answers),
               "incorrect_answers": list(p.incorrect_answers), "tags": list(p.tags)}
        target = p.answers[0] if p.answers else ""
        values = {m: float(greedy.verdict == v) for m, v in PER_DOC.items()}
        verdicts.append(greedy.verdict)
        samples.append({"doc_id": doc_id, "doc": doc, "target": str(target),
                        "arguments": {"gen_args_0": {"arg_0": greedy.prompt, "arg_1": gen_kwargs}},
                        "resps": [[greedy.text]], "filtered_resps": [greedy.text], "filter": FILTER,
                        "metrics": list(PER_DOC), "doc_hash": sha256(json.dumps(doc, indent=2, ensure_ascii=False)),
                        "prompt_hash": sha256(greedy.prompt), "target_hash": sha256(str(target)),
                        **values, "verdict": str(greedy.verdict)})
    m = compute_metrics(verdicts, bootstrap=0)
    scores: dict[str, Any] = {"alias": task}
    for name in METRICS:
        scores[f"{name},{FILTER}"] = getattr(m, name)
        per_doc = [float(s[name]) for s in samples] if name in PER_DOC else None
        scores[f"{name}_stderr,{FILTER}"] = stderr_of_mean(per_doc) if per_doc is not None else "N/A"
    date_id, date = _date_id(run.created_at)
    model_args = f"pretrained={run.model}" + (f",peft={run.adapter}" if run.adapter else "")
    # lm-eval names the output folder after the peft adapter when there is one, else the model
    model_name = run.adapter or run.model
    end = _date_id(run.finished_at)[1] if run.finished_at else date
    results = {
        "results": {task: scores},
        "group_subtasks": {task: []},
        "configs": {task: {
            "task": task, "dataset_path": run.suite, "test_split": "test", "output_type": "generate_until",
            "doc_to_text": str(cfg.get("template", "")), "doc_to_target": "{{answers[0]}}",
            "generation_kwargs": gen_kwargs, "repeats": 1, "num_fewshot": 0,
            "metric_list": [{"metric": k, "aggregation": "mean" if k in PER_DOC else k,
                             "higher_is_better": HIGHER_IS_BETTER[k]} for k in METRICS],
            "metadata": {"version": VERSION, "workbench_run": run.id, "grader": cfg.get("grader")}}},
        "versions": {task: VERSION},
        "n-shot": {task: 0},
        "higher_is_better": {task: HIGHER_IS_BETTER},
        "n-samples": {task: {"original": run.n_probes, "effective": len(samples)}},
        "config": {"model": run.backend, "model_args": model_args, "batch_size": None, "batch_sizes": [],
                   "device": None, "use_cache": None, "limit": None, "bootstrap_iters": 0, "gen_kwargs": gen_kwargs,
                   "random_seed": run.options.get("seed"), "numpy_seed": None, "torch_seed": None,
                   "fewshot_seed": None},
        "git_hash": None,
        "date": date,
        "task_hashes": {task: sha256("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in samples))},
        "model_source": run.backend, "model_name": model_name, "model_name_sanitized": sanitized(model_name),
        "system_instruction": None, "system_instruction_sha": None, "fewshot_as_multiturn": False,
        "chat_template": None, "chat_template_sha": None, "start_time": date, "end_time": end,
        "total_evaluation_time_seconds": str(end - date),
        "workbench": {"run_id": run.id, "fingerprint": run.fingerprint, "adapter": run.adapter},
    }
    folder = out_dir / sanitized(model_name)
    folder.mkdir(parents=True, exist_ok=True)
    results_path = _write(folder / f"results_{date_id}.json", json.dumps(results, indent=2, ensure_ascii=False))
    samples_path = _write(folder / f"samples_{task}_{date_id}.jsonl",
                          "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples))
    return results_path, samples_path


def _write(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # a killed export leaves no half file
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path

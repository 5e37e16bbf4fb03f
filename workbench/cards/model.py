"""Cards: a README.md in every adapter directory and every fix set, written from the records, in the Hub's format.

An adapter copied on its own to a model registry or the Hub must say what it fixes and whether it passed a gate.
The model card is written from the job's own files (`OUTPUT_DIR/result.json`, `job.yaml`, the adapter's
`adapter_config.json`), the fix set's `fixset.json`, and, when a store is given, the latest gate of a run of this
adapter and the release decision on it. It replaces peft's empty template when the job ends, and is written
again when a gate or a release decision lands (`refresh_for_run`), or by `workbench card DIR`.

The YAML front matter is built with huggingface_hub's own `ModelCardData` / `DatasetCardData` (so `model-index`
is the Hub's layout, read back by `ModelCard.load`): `base_model`, `library_name: peft`, `datasets`, `tags`,
`model-index` with the held-out scores, the known facts broken and the gate's scores. This module reads files
only (it imports neither finetune nor torch): the gate and the review records call it.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.cards._files import (
    ADAPTER_CONFIG,
    CARD,
    FIXSET_FILE,
    GATE_METRICS,
    JOB_FILE,
    RESULT_FILE,
    TAG,
    atomic_write,
    read_json,
)
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.store import Store

log = logging.getLogger(__name__)
#: The fix set's split each method trains on (finetune/job/resolve.py).
SPLITS = {"sft": "sft", "dpo": "dpo", "grpo": "prompts"}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")

def is_job_adapter(adapter: str | Path) -> bool:
    """Whether `adapter` is an adapter a workbench job wrote (its job directory holds result.json)."""
    p = Path(adapter)
    return (p / ADAPTER_CONFIG).is_file() and (p.parent / RESULT_FILE).is_file()


def _fixset(job: dict[str, Any]) -> tuple[Path | None, dict[str, Any]]:
    path = Path(str(job.get("fixset", "")))
    return (path, read_json(path / FIXSET_FILE)) if (path / FIXSET_FILE).is_file() else (None, {})


def latest_gate(store: Store, adapter: Path) -> dict[str, Any] | None:
    """The latest gate whose candidate ran this adapter, with its result and the latest release decision on it.
    Read from the tables (not through workbench.regression / workbench.reviews: they call this module when a gate
    or a decision lands)."""
    from sqlalchemy import select

    from workbench.store.schema import regressions, reviews, runs

    q = (select(regressions, runs.c.adapter).join(runs, runs.c.id == regressions.c.candidate_run)
         .where(runs.c.adapter.is_not(None)).order_by(regressions.c.created_at))
    with store.engine.connect() as c:
        mine = [r for r in c.execute(q).mappings().all() if Path(r["adapter"]).resolve() == adapter.resolve()]
        if not mine:
            return None
        g = mine[-1]
        s = c.execute(select(reviews).where(reviews.c.target == "release", reviews.c.gate_id == g["id"])
                      .order_by(reviews.c.id.desc()).limit(1)).mappings().first()
    return {"gate_id": g["id"], "created_at": g["created_at"], "baseline_run": g["baseline_run"],
            "candidate_run": g["candidate_run"], "verdict": g["verdict"], "result": json.loads(g["result_json"]),
            "signoff": None if s is None else {"decision": s["new_value"], "reviewer": s["reviewer"], "at": s["at"],
                                               "reason": s["reason"]}}


def base_of(adapter: str | Path) -> str:
    """The base model an adapter names (peft's `base_model_name_or_path`)."""
    return str(read_json(Path(adapter) / ADAPTER_CONFIG).get("base_model_name_or_path") or "")


def is_hub_id(name: str) -> bool:
    """Whether `name` reads as a Hub model id (OWNER/NAME), not a local path (the Hub refuses a path as base_model)."""
    return bool(HUB_ID.fullmatch(name)) and not Path(name).exists()


def model_card(adapter: str | Path, store: Store | None = None, base_model: str | None = None) -> str:
    """The model card (README.md text) of a job's adapter directory; `base_model` names the base on the Hub when
    the adapter's own is a local path."""
    from huggingface_hub import EvalResult, ModelCardData

    adapter = Path(adapter)
    job_dir = adapter.parent
    res, cfg = read_json(job_dir / RESULT_FILE), read_json(adapter / ADAPTER_CONFIG)
    job = _job_spec(job_dir / JOB_FILE)
    fix_path, fix = _fixset(job)
    method = str(job.get("method", "sft"))
    methods = _methods(job)
    base = base_model or str(cfg.get("base_model_name_or_path") or fix.get("model"))
    gate = latest_gate(store, adapter) if store is not None else None
    fix_name = fix_path.name if fix_path else "fix set"

    def result(dataset: str, dtype: str, split: str | None, metric: str, value: float, name: str) -> Any:
        return EvalResult(task_type="text-generation", task_name="factual question answering", dataset_type=dtype,
                          dataset_name=dataset, dataset_split=split, metric_type=metric, metric_value=value,
                          metric_name=name)

    evals = []
    if res.get("heldout_before") is not None:
        evals.append(result(fix_name, "fixset", "heldout", "accuracy", res["heldout_before"], "held-out, base model"))
    if res.get("heldout_after") is not None:
        evals.append(result(fix_name, "fixset", "heldout", "accuracy", res["heldout_after"], "held-out, with adapter"))
    if res.get("known_checked"):
        evals.append(result(fix_name, "fixset", "validation", "known_facts_broken", len(res.get("known_broken", [])),
                            f"known facts broken (of {res['known_checked']})"))
    if gate and gate["result"].get("overall"):
        metrics = gate["result"]["overall"]["metrics"]
        for m, mtype in GATE_METRICS.items():
            if m in metrics:
                value, was = round(float(metrics[m]["candidate"]), 4), float(metrics[m]["baseline"])
                evals.append(result(f"gate {gate['gate_id']}", "workbench-run", None, mtype, value,
                                    f"{m} (baseline {was:.3f})"))
    data = ModelCardData(base_model=base, library_name="peft", datasets=[fix_name], model_name=res.get("job_id"),
                         pipeline_tag="text-generation", eval_results=evals or None,
                         tags=[TAG, "lora", *dict.fromkeys([method, *methods]),
                               *(f"fixes:{c}" for c in _targeted(fix, methods))])
    return f"---\n{data.to_yaml()}\n---\n\n" + _model_body(res, cfg, methods, base, fix_path, fix, gate)


def _methods(job: dict[str, Any]) -> list[str]:
    """The methods the job trained, in order: its stages' for a staged job, else its one."""
    if job.get("method") == "staged":
        return [str(st.get("method")) for st in job.get("stages") or [] if isinstance(st, dict)]
    return [str(job.get("method", "sft"))]


def _job_spec(path: Path) -> dict[str, Any]:
    """The job.yaml beside the adapter as a mapping ({} without one); a broken one is an error naming it."""
    from workbench.safeload import read_yaml_file

    if not path.is_file():
        return {}
    try:
        data = read_yaml_file(path)
    except ValueError as e:
        raise WorkbenchError(str(e)) from None
    if not isinstance(data, dict):
        raise WorkbenchError(f"{path}: a job spec must be a mapping, got {type(data).__name__}")
    return data


def _targeted(fix: dict[str, Any], methods: list[str]) -> list[str]:
    """The categories the job's splits target (replay, anchors and rehearsal protect; they fix nothing)."""
    counts = fix.get("counts", {})
    return sorted({c for m in methods for c, n in counts.get(SPLITS.get(m, m), {}).items()
                   if n and c not in ("replay", "anchor", "rehearsal")})


def _model_body(res: dict[str, Any], cfg: dict[str, Any], methods: list[str], base: str, fix_path: Path | None,
                fix: dict[str, Any], gate: dict[str, Any] | None) -> str:
    name = " then ".join(m.upper() for m in methods)
    splits = [SPLITS.get(m, m) for m in methods]
    lines = [f"# {res.get('job_id', 'adapter')}: {name} LoRA adapter of `{base}`", "",
             f"Written by the Hallucination Workbench from the job's records (job `{res.get('job_id')}`, status "
             f"`{res.get('status')}`). Load it with peft (`PeftModel.from_pretrained(base, this_folder)`) or vLLM's "
             "LoRA support.", "", "## What it fixes", ""]
    if fix:
        lines += [f"Fix set `{fix_path}` (sha256 `{str(fix.get('sha256', ''))[:12]}`), built with strategy "
                  f"`{fix.get('strategy')}` from evaluation run `{fix.get('run_id')}` of `{fix.get('model')}`; the "
                  f"job trained on its {' then its '.join(f'`{sp}`' for sp in splits)} split"
                  + (" (a staged job: one adapter, each stage continuing the one before)" if len(splits) > 1 else "")
                  + ".", "", "| split | category | rows |", "|---|---|---|"]
        lines += [f"| {sp} | {c} | {n} |" for sp in dict.fromkeys(splits)
                  for c, n in fix.get("counts", {}).get(sp, {}).items()]
        lines += ["", f"Held-out targeted probes: {len(fix.get('heldout_probe_ids', []))}."]
    else:
        lines.append("The fix set's record (fixset.json) was not found beside the job.")
    lines += ["", "## Training", "", "| setting | value |", "|---|---|",
              f"| method | {' -> '.join(methods)}{' (staged)' if len(methods) > 1 else ''} |",
              f"| steps | {res.get('steps')}{_stage_steps(res)} |",
              f"| learning rate | {res.get('learning_rate')} |",
              f"| LoRA rank / alpha | {cfg.get('r')} / {cfg.get('lora_alpha')} |",
              f"| target modules | {', '.join(sorted(cfg.get('target_modules') or []))} |",
              f"| adapter scale | {res.get('adapter_scale', 1.0)} |",
              f"| final loss | {res.get('final_loss')} |", "", "## Results", ""]
    before, after = res.get("heldout_before"), res.get("heldout_after")
    lines.append(f"- Held-out accuracy: {_pct(before)} with the base model, {_pct(after)} with this adapter.")
    broken = res.get("known_broken") or []
    lines.append(f"- Known facts broken: {len(broken)} of {res.get('known_checked', 0)} checked"
                 + (f" ({', '.join(broken[:20])}{', ...' if len(broken) > 20 else ''})." if broken else "."))
    lines += ["", "## Gate", ""]
    if gate is None:
        lines.append("Not gated yet: `workbench regress --baseline RUN --candidate-adapter THIS_FOLDER`.")
    else:
        lines.append(f"Gate `{gate['gate_id']}` ({gate['created_at']}): **{gate['verdict']}** against baseline run "
                     f"`{gate['baseline_run']}` (candidate run `{gate['candidate_run']}`).")
        s = gate.get("signoff")
        lines.append("" if s is None else f"\nRelease decision: **{s['decision']}** by {s['reviewer']} ({s['at']}): "
                     f"{s['reason']}")
        if s is None:
            lines.append("\nNo release decision recorded on this gate.")
    return "\n".join(lines).rstrip() + "\n"


def _stage_steps(res: dict[str, Any]) -> str:
    """The steps per stage of a staged job (" (sft 120, dpo 40)"); "" for a job of one method."""
    parts = [f"{st.get('method')} {st.get('steps')}" for st in res.get("stages") or []]
    return f" ({', '.join(parts)})" if parts else ""


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{100 * float(v):.1f}%"


def write_model_card(adapter: str | Path, store: Store | None = None, base_model: str | None = None) -> Path:
    """(Re)write README.md in the adapter directory."""
    return atomic_write(Path(adapter) / CARD, model_card(adapter, store, base_model))


def refresh_for_run(store: Store, run_id: str) -> Path | None:
    """Rewrite the card of the adapter a run evaluated (after a gate or a release decision on it); None when the
    run's adapter is not a workbench job's. A card that cannot be written is a warning: the gate or the decision
    is recorded either way, and `workbench card DIR` writes it again."""
    adapter = store.get_run(run_id).adapter
    if not adapter or not is_job_adapter(adapter):
        return None
    try:
        return write_model_card(adapter, store)
    except (OSError, WorkbenchError) as e:
        log.warning("the model card of %s was not updated: %s", adapter, e)
        return None

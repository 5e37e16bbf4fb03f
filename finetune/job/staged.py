"""A staged job: the fix a run's attribution prescribes, one method after another on one adapter.

    method: staged
    stages: [{method: sft}, {method: dpo}]     # injection and abstention rows, then the behaviour pairs

`run_staged` does, in order:

1. refuse an output_dir that already holds a job (unless resuming); save the staged spec as `output_dir/job.yaml`
   and record the job (method `staged`) in the store;
2. run each stage as a job of its own (finetune/job/run.py) in `output_dir/stages/N-METHOD/`, continuing the
   adapter of the stage before. A stage already done (its result.json) is skipped on `--resume`, a stage cut short
   resumes from its checkpoint. Each stage replays and checks the known facts as any job does, counts what it
   breaks against the base model (the first stage's scores), and, when it picks the state it keeps and its adapter
   scale, counts the targets of the stages before beside its own;
3. copy the last stage's adapter to `output_dir/adapter` (one adapter, one card) and write the staged
   `result.json`: the last stage's known facts and scale, every stage's own result under `stages`.

A stage that a watchdog stopped still hands its adapter on (the gate decides on the whole); a failed one (NaN)
ends the job.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from finetune.fixset import METHOD_SPLIT
from finetune.job.checkpoint import COMPLETE
from finetune.job.resolve import ResolvedJob, StagedJob, resolve, resolve_staged, stage_dir, stage_spec
from finetune.job.result import JobResult, Status, read_result, write_result
from finetune.job.run import ADAPTER_DIR, JOB_FILE, StageContext, job_id_of, refuse_existing, run_method
from finetune.job.spec import JobSpec, save_spec
from finetune.records import JobRecorder
from workbench.errors import WorkbenchError
from workbench.store import Store


def run_job(spec: JobSpec | ResolvedJob | StagedJob, store: Store | None = None, *, resume: bool = False,
            callbacks: Sequence[Any] = (), before_commit: Callable[[int, Path], None] | None = None,
            progress: Callable[[str], None] | None = None) -> JobResult:
    """Any job: a staged one stage by stage (`run_staged`), one of a single method through the run skeleton
    (finetune/job/run.py `run_method`, whose docstring says what the arguments do)."""
    if isinstance(spec, StagedJob) or (isinstance(spec, JobSpec) and spec.method == "staged"):
        return run_staged(spec, store, resume=resume, callbacks=callbacks, before_commit=before_commit,
                          progress=progress)
    return run_method(spec, store, resume=resume, callbacks=callbacks, before_commit=before_commit, progress=progress)


def run_staged(job: JobSpec | StagedJob, store: Store | None = None, *, resume: bool = False,
               callbacks: Sequence[Any] = (), before_commit: Callable[[int, Path], None] | None = None,
               progress: Callable[[str], None] | None = None) -> JobResult:
    """Run every stage of a staged job and return the job's result (see the module docstring)."""
    t0 = time.perf_counter()
    staged = job if isinstance(job, StagedJob) else resolve_staged(job)
    spec, out = staged.spec, staged.output_dir
    # 1. The job's own folder and record.
    if not resume:
        _refuse_existing(spec)
    save_spec(spec, out / JOB_FILE)
    if store is None and spec.workspace:
        store = Store.open(spec.workspace)
    job_id = job_id_of(out, resume)
    log = JobRecorder(store, job_id)
    first = staged.stages[0].manifest
    log.create(method="staged", spec=spec.to_dict(), run_id=first.run_id, fixset_path=str(Path(first.path).resolve()),
               fixset_hash=first.sha256)
    log.status("running")
    plan = " -> ".join(f"{st.method} ({METHOD_SPLIT[st.method]} split)" for st in spec.stages)
    log.event("resume" if resume else "start", f"staged: {plan}", {"stages": [st.method for st in spec.stages]})

    # 2. The stages, in order, each continuing the adapter of the one before.
    results: list[JobResult] = []
    context = StageContext(label="", fixset=str(Path(spec.fixset).resolve()))
    for i in range(len(spec.stages)):
        method, label = spec.stages[i].method, f"stage {i + 1} of {len(spec.stages)}, {spec.stages[i].method}"
        done = read_result(stage_dir(spec, i)) if resume else None
        if done is not None and done.status != "failed":
            result = done
            log.event("stage", f"{label}: done before ({done.status}), kept", {"stage": i + 1})
        else:
            try:
                stage_job = resolve(stage_spec(spec, i))
            except WorkbenchError as e:
                raise WorkbenchError(f"stage {i + 1} ({method}): {e}") from None
            log.event("stage", f"{label}: starting", {"stage": i + 1, "output_dir": str(stage_job.output_dir)})
            try:
                result = run_method(stage_job, store, resume=resume, callbacks=callbacks, before_commit=before_commit,
                                 progress=progress, stage=dataclasses.replace(context, label=label))
            except BaseException as e:
                log.event("failed", f"{label}: {type(e).__name__}: {e}")
                log.status("failed", finished=True)
                raise
        log.event("stage", f"{label}: {result.status} after {result.steps} steps, {len(result.known_broken)} of "
                  f"{result.known_checked} known facts broken: {result.message}", {"stage": i + 1,
                                                                                    **result.to_dict()})
        results.append(result)
        if result.status == "failed":
            break
        if i == 0:
            context = dataclasses.replace(context, known_right=frozenset(result.known_right_before))
        split = METHOD_SPLIT[method]
        fixset = str(Path(spec.stages[i].fixset or spec.fixset).resolve())
        context = dataclasses.replace(context, earlier=(*context.earlier, (fixset, split)))

    # 3. One adapter, one result.
    last = results[-1]
    adapter = None if last.adapter is None or last.status == "failed" else str(_publish(Path(last.adapter), out))
    status: Status = "failed" if last.status == "failed" else "stopped" if any(
        r.status == "stopped" for r in results) else "done"
    message = "; ".join(f"{spec.stages[i].method}: {r.message}" for i, r in enumerate(results))
    result = dataclasses.replace(
        last, job_id=job_id, status=status, output_dir=str(out), adapter=adapter,
        steps=sum(r.steps for r in results), heldout_before=None, heldout_after=None, resumed_from=None,
        stop_reason=next((r.stop_reason for r in results if r.stop_reason), None), message=message,
        seconds=round(time.perf_counter() - t0, 2), kept_step=None, kept_reason=None,
        known_right_before=results[0].known_right_before, method="staged",
        stages=[r.to_dict() for r in results], max_steps_rule=None, learning_rate_rule=None, size_rule=None)
    log.event("done" if status != "failed" else "failed", message, result.to_dict())
    log.status(status, adapter=adapter, metrics=result.to_dict(), finished=True)
    if os.environ.get("RANK", "0") == "0":  # under accelerate, one result file and one card, as run_method writes
        write_result(result, out)
        if adapter is not None:
            from workbench.cards import write_model_card

            write_model_card(adapter, store)
    return result


def _refuse_existing(spec: JobSpec) -> None:
    """An output_dir holding a job (its own adapter, or any stage's) is refused without --resume."""
    refuse_existing(Path(spec.output_dir))
    for i in range(len(spec.stages)):
        refuse_existing(stage_dir(spec, i))


def _publish(stage_adapter: Path, out: Path) -> Path:
    """The last stage's adapter copied to `out/adapter` whole (copied beside, then renamed), marked complete."""
    dest = out / ADAPTER_DIR
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(stage_adapter, tmp, ignore=shutil.ignore_patterns("README.md"))
    (tmp / COMPLETE).write_text("")
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest

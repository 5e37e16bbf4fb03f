"""`workbench train JOB.yaml`: resolve the job once, run its memory pre-flight, launch it (or resume it)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from workbench.cli import print_json

HELP = "run a LoRA SFT/DPO/GRPO job from a job YAML (pre-flight first; --resume after a crash)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", help="job spec YAML")
    p.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint")
    p.add_argument("--force", action="store_true", help="skip the memory pre-flight")
    p.add_argument("--report-to", metavar="TRACKERS",
                   help="tensorboard, mlflow, trackio, wandb (comma-separated) or none: where the training curves "
                   "also go (overrides the spec's report_to)")
    p.add_argument("--explain", action="store_true",
                   help="print the row of the job defaults table the job gets (each value, why, and the benchmark "
                   "that chose it) and exit: nothing is trained, no weights are read")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    if args.explain:
        return _explain(args)
    from finetune.fixset.manifest import check_data
    from finetune.job import check_fits, from_dict, launch, load_spec, resolve_job
    from finetune.job.trackers import require, split_names
    from workbench.cli import progress_every
    from workbench.store import Store

    progress_every()  # a malformed $WORKBENCH_PROGRESS_EVERY is refused now, not after the model loads
    spec = load_spec(args.job)
    if args.report_to is not None:
        spec = from_dict({**spec.to_dict(), "report_to": split_names(args.report_to)}, where="--report-to")
    require(spec.report_to)  # here, not only in the job: a subprocess or accelerate launcher would hide it
    # datasets (2-3 s to import) only after the spec's own checks: a typo in job.yaml is refused at once
    import datasets

    datasets.disable_progress_bars()  # per-map bars would bury the summary
    job = resolve_job(spec)
    check_fits(job, force=args.force)
    for one in getattr(job, "stages", None) or (job,):  # a staged job: every stage, before anything trains
        _check_targets(one)
        check_data(one.spec.fixset)
    _check_writable(Path(job.spec.output_dir))
    result = launch(job, Store.open(job.spec.workspace or args.workspace), resume=args.resume,
                    progress=None if args.json else functools.partial(print, flush=True))
    if args.json:
        print_json(result.to_dict())
    else:
        print("\n".join(result.summary_lines()))
    return 0 if result.status != "failed" else 1


def _explain(args: argparse.Namespace) -> int:
    """`--explain`: the defaults row and its values as this job would use them (finetune/job/defaults.py)."""
    from finetune.job.resolve import explain
    from finetune.job.spec import load_spec

    found = explain(load_spec(args.job))
    if args.json:
        print_json(found.to_dict())
    else:
        print("\n".join(found.lines()))
    return 0


def _check_writable(out: Path) -> None:
    """The job's output_dir can be written, before the store records a job or a model loads: a read-only place is
    an error naming the field, never a traceback from deep in the trainer."""
    import tempfile

    from workbench.errors import WorkbenchError

    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".wb-probe.", suffix=".tmp"):
            pass
    except OSError as e:
        raise WorkbenchError(f"output_dir `{out}`: cannot write there ({e.strerror or e})") from None


def _check_targets(job: Any) -> None:
    """Every `lora.target_modules` name matches a module of the base model, as peft matches it (the whole dotted
    name, or its end after a dot): a typo is refused naming the field, before the job is recorded or weights load,
    never peft's traceback (none matched) or a silently smaller LoRA (some matched). The model is built on the meta
    device from its config: no weights are read. A model that cannot be built so is left to peft."""
    from workbench.errors import WorkbenchError, did_you_mean

    if job.spec.init_adapter is not None:  # the adapter's own targets, which matched when it was made
        return
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        config = AutoConfig.from_pretrained(job.base_model)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
            names = [n for n, _ in model.named_modules() if n]
    except Exception:  # an architecture transformers cannot build offline: peft checks it when the job starts
        return
    leaves = sorted(leaf for leaf in {n.rsplit(".", 1)[-1] for n in names} if not leaf.isdigit())
    for target in job.target_modules:
        if not any(n == target or n.endswith("." + target) for n in names):
            raise WorkbenchError(f"job spec: `lora.target_modules` names `{target}`, which is no module of "
                                 f"`{job.base_model}`.{did_you_mean(target, leaves)} Its modules: "
                                 f"{', '.join(leaves)}")

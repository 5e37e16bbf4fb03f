"""`workbench train JOB.yaml`: resolve the job once, run its memory pre-flight, launch it (or resume it)."""

from __future__ import annotations

import argparse

from workbench.cli import print_json

HELP = "run a LoRA SFT/DPO/GRPO job from a job YAML (pre-flight first; --resume after a crash)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", help="job spec YAML")
    p.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint")
    p.add_argument("--force", action="store_true", help="skip the memory pre-flight")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    import datasets

    datasets.disable_progress_bars()  # per-map bars would bury the summary
    from finetune.job import check_fits, launch, load_spec, resolve
    from workbench.store import Store

    job = resolve(load_spec(args.job))
    check_fits(job, force=args.force)
    result = launch(job, Store.open(job.spec.workspace or args.workspace), resume=args.resume)
    if args.json:
        print_json(result.to_dict())
    else:
        print(f"job {result.job_id}: {result.status} after {result.steps} steps ({result.seconds} s): "
              f"{result.message}")
        if result.heldout_before is not None or result.heldout_after is not None:
            print(f"  held-out score {result.heldout_before} -> {result.heldout_after}")
        if result.known_checked:
            ids = ", ".join(result.known_broken[:10]) + (" ..." if len(result.known_broken) > 10 else "")
            print(f"  known facts broken: {len(result.known_broken)} of {result.known_checked} "
                  f"({100 * (result.known_broken_fraction or 0):.1f}%)" + (f": {ids}" if ids else ""))
        for note in result.protection_notes():
            print(f"  {note}")
        if result.adapter:
            print(f"  adapter: {result.adapter}")
    return 0 if result.status != "failed" else 1

"""`workbench fix RUN --out DIR`: build a fix set from a run's attributions (optionally train on it)."""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.cli import check_output_dir, created_only_if_whole, print_json
from workbench.printable import printable

if TYPE_CHECKING:
    from finetune.fixset import FixSetManifest
    from finetune.job import JobResult
    from workbench.guard import GuardSet
    from workbench.guard.domain import DomainFacts
    from workbench.store import Store

log = logging.getLogger(__name__)

HELP = "build a fix set (SFT rows, DPO pairs, replay) from a run's attributions; --train runs a job on it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id (or `latest`, or a unique prefix) with attributions")
    p.add_argument("--out", required=True, help="fix set directory to write")
    p.add_argument("--strategy", default="auto",
                   help="auto | inject | abstain | dpo | rl (rl: GRPO prompts graded by the suite; default auto)")
    p.add_argument("--facts", type=Path, help='JSONL of {"question": ..., "answer": ...} to inject missing facts')
    p.add_argument("--replay-ratio", type=float, help="replay rows per targeted row (default 4; rl: 1)")
    p.add_argument("--heldout-fraction", type=float, default=0.2,
                   help="targeted probes held out (default 0.2; field probes and --facts probes never are)")
    p.add_argument("--validation-fraction", type=float, default=0.1,
                   help="known probes kept out of training; jobs count the broken ones (default 0.1, at most 200)")
    p.add_argument("--rehearsal", metavar="INDEX",
                   help="corpus index (or workspace) of the corpus the model was trained on (`workbench index`): "
                   "mixes plain-text rows of it into the SFT rows, none naming a held-out known fact")
    p.add_argument("--rehearsal-ratio", type=float,
                   help="rehearsal rows per targeted SFT row (default: REHEARSAL_RATIO in finetune/fixset.py, 1; "
                   "with --rehearsal)")
    p.add_argument("--guard-pool", action="append", metavar="FILE",
                   help="known-facts guard: a probe file of your own facts added to the shipped pool (repeatable); "
                   "`none`: leave the shipped pool out (alone: no guard set, only the run's own known facts; see "
                   "`workbench guard`)")
    p.add_argument("--domain-pool", action="append", metavar="FILE",
                   help="known facts in the style of your questions: a probe file of questions like yours with their "
                   "answers (repeatable); the facts the model knows are replayed first and a share held out, so that "
                   "abstention is taught against answers it knows in your domain; default: the shipped style pool "
                   "(NQ-open, TruthfulQA) your targeted questions read like, if any (not with --guard-pool none); "
                   "`none`: leave it out")
    p.add_argument("--guard-paraphrases", action="store_true",
                   help="replay each replayed guard fact under its paraphrase too (twice the guard's replay pool)")
    p.add_argument("--allow-unguarded", action="store_true",
                   help="build the set even when no known fact (run or guard) protects it: the job then cannot see "
                   "the known facts it breaks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train", action="store_true", help="then write OUT/job/job.yaml and run it")
    p.add_argument("--method", help="sft | dpo | grpo | staged (default: staged, SFT on the injection and abstention "
                   "rows then DPO on the behaviour pairs on one adapter, when the set has targets in both splits; grpo "
                   "for --strategy rl; else the split with targeted rows)")
    p.add_argument("--steps", type=int,
                   help="trainer.max_steps of the job (default: by epochs over the fix set, see README)")
    p.add_argument("--replay-kl", type=float, metavar="WEIGHT",
                   help="with --train (sft, dpo): trainer.replay_kl, a KL term to the base model over the replay rows "
                   "(default: the job defaults table's: for SFT on a pretrained model 10, 20 when the set injects "
                   "facts; 0 otherwise; 0: off)")
    p.add_argument("--base-model", metavar="DIR",
                   help="the run's model as local weights, when the run asked a server (--backend openai): the fix "
                   "set's tokenizer, and with --train the job's base_model (the adapter is trained on DIR)")
    p.add_argument("--report-to", metavar="TRACKERS",
                   help="with --train: tensorboard, mlflow, trackio, wandb (comma-separated) or none (default): where "
                   "the job's training curves also go")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from finetune.fixset import REHEARSAL_RATIO, FixOptions, build_fixset
    from workbench.errors import WorkbenchError
    from workbench.store import Store

    if args.rehearsal_ratio is not None and args.rehearsal is None:  # else silently no rehearsal at all
        raise WorkbenchError("--rehearsal-ratio needs --rehearsal INDEX (the corpus index to rehearse)")
    if args.replay_kl is not None and not args.train:  # else silently no job to weigh it in
        raise WorkbenchError("--replay-kl needs --train (it is a setting of the job)")
    if args.report_to is not None and not args.train:  # else silently no curves anywhere
        raise WorkbenchError("--report-to needs --train (it names where the job's training curves go)")
    if args.report_to is not None:  # a missing tracker is refused before the fix set is built
        from finetune.job.trackers import require, split_names

        require([n for n in split_names(args.report_to) if n != "none"])
    if args.train:
        from workbench.cli import progress_every

        progress_every()  # a malformed $WORKBENCH_PROGRESS_EVERY: refused before the fix set is built

    check_output_dir(args.out, "--out")  # an existing file, a read-only place: refused before any work
    if args.base_model is not None:  # weights on this machine: a directory with config.json, checked before any work
        from workbench.textgen import check_model_path

        check_model_path(str(Path(args.base_model).resolve()), what="--base-model")
    import datasets  # 2-3 s to import: after the refusals above

    datasets.disable_progress_bars()  # per-map bars would bury the summary
    store = Store.open(args.workspace)
    guard = _guard(store, args)
    domain = _domain(store, args)
    try:
        options = FixOptions(strategy=args.strategy, facts=args.facts, guard=guard,
                             domain=domain.build.guard if domain.build else None, domain_how=domain.how,
                             allow_unguarded=args.allow_unguarded, replay_ratio=args.replay_ratio,
                             guard_paraphrases=args.guard_paraphrases, base_model=args.base_model,
                             heldout_fraction=args.heldout_fraction, seed=args.seed,
                             validation_fraction=args.validation_fraction, rehearsal=args.rehearsal,
                             rehearsal_ratio=REHEARSAL_RATIO if args.rehearsal_ratio is None else args.rehearsal_ratio)
        with created_only_if_whole(args.out, "--out"):  # a failed write (a full disk) leaves nothing behind
            manifest = build_fixset(store, args.run, args.out, options)
    except OSError as e:  # a full disk or a place that turned read-only while the set was written
        raise WorkbenchError(f"--out `{args.out}`: cannot write the fix set ({e.strerror or e})") from None
    out: dict[str, object] = {"fixset": manifest.to_dict()}
    if manifest.field_targets:  # the reviewed user reports, counted apart: what the fix did with each decision
        out["field"] = {"summary": manifest.field_summary(), "counts": manifest.field_counts()}
    code = 0
    result: JobResult | None = None
    if args.train:
        from finetune.job import from_dict, run_job
        from finetune.job.trackers import split_names

        method = args.method or _default_method(manifest.counts)
        note = _method_note(method, manifest.counts, args.strategy)
        if note:
            log.warning(note)
        from finetune.job.spec import method_fields

        spec = from_dict({"fixset": str(Path(args.out).resolve()), **method_fields(method),
                          **({"base_model": str(Path(args.base_model).resolve())} if args.base_model else {}),
                          "output_dir": str((Path(args.out) / "job").resolve()),
                          "trainer": {k: v for k, v in (("max_steps", args.steps), ("replay_kl", args.replay_kl))
                                      if v is not None},
                          "report_to": split_names(args.report_to or "none")},
                         where="--method/--steps/--replay-kl/--report-to")
        result = run_job(spec, store, progress=None if args.json else functools.partial(print, flush=True))
        out["job_yaml"] = str(Path(result.output_dir) / "job.yaml")
        out["job"] = result.to_dict()
        code = 0 if result.status != "failed" else 1
    if args.json:
        print_json(out)
        return code
    c = manifest.counts
    prompts = f", {sum(c['prompts'].values())} RL prompts" if c.get("prompts") else ""
    print(f"fix set {manifest.path}: {sum(c['sft'].values())} SFT rows, {sum(c['dpo'].values())} DPO pairs{prompts} "
          f"({manifest.train_rows['sft']} / {manifest.train_rows['dpo']} for training), "
          f"{len(manifest.heldout_probe_ids)} held-out probes, sha256 {manifest.sha256[:12]}")
    for split in ("sft", "dpo", "prompts"):
        for cat, n in c.get(split, {}).items():
            print(f"  {split} {cat:<28} {n}")
    if manifest.rehearsal:
        r = manifest.rehearsal
        print(f"  rehearsal: {r['rows']} rows of {r['source']} ({r['neighbours']} naming a targeted subject, "
              f"{r['excluded']} documents left out as naming a held-out fact or a conflict)")
    _print_guard(manifest)
    if not manifest.heldout_probe_ids and args.heldout_fraction > 0 and manifest.targets:
        print("  note: no targeted probe is held out (field probes and --facts probes never are, and a category of "
              "one or two keeps its own): the job has no held-out score for early stopping")
    if manifest.field_targets:
        print(f"  {manifest.field_summary()}")
    if manifest.abstention_note:
        print(f"  note: {manifest.abstention_note}")
    for pid, why in list(manifest.skipped.items())[:10]:
        print(printable(f"  skipped {pid}: {why}"))
    if result is not None:
        print("\n".join(result.summary_lines()))
    return code


def _guard(store: Store, args: argparse.Namespace) -> GuardSet | None:
    """The guard set of the run's model under its prompt settings (built at first use; None with --guard-pool none)."""
    from workbench.cli import progress_bar
    from workbench.guard import guard_for_run
    from workbench.guard.pool import NONE

    if [str(g) for g in args.guard_pool or ()] == [NONE]:
        return None
    run = store.get_run(args.run)
    if not args.json:
        log.info("guard: the known facts of %s under run %s's prompt settings (built once per model and settings, "
                 "then read from the workspace)", run.model, run.id)
    with progress_bar("known-facts guard", not args.json) as update:
        return guard_for_run(store, run, pool=args.guard_pool, progress=update).guard


def _domain(store: Store, args: argparse.Namespace) -> DomainFacts:
    """The known facts in the style of the run's targeted questions (workbench/guard/domain.py), built at first use."""
    from workbench.cli import progress_bar
    from workbench.guard.domain import DomainFacts, domain_for_run
    from workbench.guard.pool import NONE
    from workbench.reviews import effective_attributions

    if args.domain_pool is None and NONE in [str(g) for g in args.guard_pool or ()]:
        return DomainFacts(None, "left out with the shipped guard pool (--guard-pool none; --domain-pool FILE: yours)")
    run = store.get_run(args.run)
    asked = {str(r["id"]): str(r["question"]) for r in store.probe_rows(run.id)}
    questions = [asked[pid] for pid in effective_attributions(store, run.id) if pid in asked]
    with progress_bar("known facts in your questions' style", not args.json) as update:
        return domain_for_run(store, run, questions, given=args.domain_pool, progress=update)


def _print_guard(manifest: FixSetManifest) -> None:
    from finetune.fixset import MAX_REPLAY_REPEATS

    g = manifest.guard
    if g is not None and "key" in g:
        print(f"  guard: {g['known']} known facts of the base model ({g['usable']} not asked by the run): "
              f"{g['replayed']} replayed, {g['validation']} held out for the job to check")
    d = (g or {}).get("domain")
    if d is not None:
        print(f"  domain: {d['how']}: {d['known']} known facts in that style, {d['replayed']} replayed first, "
              f"{d['validation']} held out")
    if manifest.replay_capped:
        print(f"  note: replay capped at {MAX_REPLAY_REPEATS} rows per known phrasing "
              "(fewer rows than --replay-ratio asks)")
    if not manifest.validation:
        print("  WARNING: no known fact is held out: the job cannot count the known facts it breaks", file=sys.stderr)
    if manifest.unguarded:
        print("  WARNING: no known fact protects this set (--allow-unguarded): it may teach the model to refuse "
              "what it knows; gate it on facts the model knows before shipping", file=sys.stderr)


def _targeted(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    """Training rows per split that fix a probe (replay and rehearsal rows left out)."""
    from finetune.fixset import UNTARGETED

    return {split: sum(n for cat, n in rows.items() if cat not in UNTARGETED) for split, rows in counts.items()}


def _method_note(method: str, counts: dict[str, dict[str, int]], strategy: str) -> str | None:
    """A warning when the chosen method's split holds fewer of the set's targets than another split: on the real
    chat model, `--method dpo` on a set whose failures were nearly all unknown facts trained 30 steps on 3 pairs,
    fixed nothing and broke 4-5% of the guard (docs/benchmarks/guard_flow.md)."""
    from finetune.fixset import METHOD_SPLIT

    if method == "staged":
        return None  # it trains every split that holds targets
    targeted = _targeted(counts)
    mine = targeted.get(METHOD_SPLIT.get(method, method), 0)
    best = max(targeted, key=lambda s: targeted[s])
    if mine >= targeted[best]:
        return None
    hint = " (the auto strategy writes DPO pairs only for failures the model knows; --strategy dpo makes abstention " \
        "the chosen answer for the others)" if method == "dpo" and strategy == "auto" else ""
    return (f"--method {method} trains on {mine} of the fix set's targeted rows; its {best} split holds "
            f"{targeted[best]}{hint}")


def _default_method(counts: dict[str, dict[str, int]]) -> str:
    """grpo on an rl set; staged when both the sft and the dpo split hold targets (each failure its own treatment, on
    one adapter); else the split that holds them."""
    if counts.get("prompts"):
        return "grpo"
    targeted = _targeted(counts)
    if targeted.get("sft", 0) and targeted.get("dpo", 0):
        return "staged"
    return "sft" if targeted.get("sft", 0) >= targeted.get("dpo", 0) else "dpo"

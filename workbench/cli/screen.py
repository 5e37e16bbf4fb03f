"""`workbench screen SFT_FILE --model M`: flag fine-tuning rows that teach facts the model does not know
(fitting those raises hallucination, Gekhman et al. 2024) or that contradict the training corpus. Rows whose
answer is not a short factual answer (code, tables, paragraphs) are counted as not screened, not asked."""

from __future__ import annotations

import argparse
from collections import Counter

from workbench.cli._common import (
    add_generation_arguments,
    add_model_arguments,
    check_model_args,
    print_json,
    samples_count,
    suite_with_generation,
)
from workbench.cli._index_engine import add_symlink_argument
from workbench.printable import printable

HELP = "screen a fine-tuning set: rows teaching unknown facts, rows contradicting the corpus"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sft_file", metavar="SFT_FILE", help="JSONL or a JSON array (Alpaca's instruction/input/output): "
                   "question/answer, prompt/completion, instruction/output or messages")
    add_model_arguments(p)
    p.add_argument("--suite", help="suite YAML whose template, stop strings and grading to use")
    add_generation_arguments(p)
    p.add_argument("--samples", type=samples_count, default=10, help="samples per row and variant (default 10)")
    p.add_argument("--corpus", metavar="FILE_OR_INDEX", help="training corpus or index (contradiction check)")
    p.add_argument("--text-field", default="text", help="corpus field holding the text (default: text)")
    p.add_argument("--id-field", default="id", help="corpus field holding the document id (default: id)")
    add_symlink_argument(p)
    p.add_argument("--skip-bad", action="store_true", help="skip bad rows (counted) instead of stopping")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from workbench.attribution.screen import read_sft, screen_results
    from workbench.cli.attribute import open_index
    from workbench.cli.eval import model_spec_from_args
    from workbench.probes import LoadResult
    from workbench.probes.suite import Suite, load_suite
    from workbench.results import load_results
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store

    check_model_args(args)
    sft = read_sft(args.sft_file, skip_bad=args.skip_bad)
    probes, skipped = sft.probes, sft.skipped
    suite = suite_with_generation(load_suite(args.suite) if args.suite else Suite(name="screen", data=args.sft_file),
                                  args)
    store = Store.open(args.workspace)
    run_id, rows, index = None, [], None
    if probes:  # a file of long-form rows only asks the model nothing
        loaded = LoadResult(tuple(probes), skipped, (), args.sft_file)
        summary = run_eval(store, model_spec_from_args(args), suite, loaded,
                           EvalOptions(samples=args.samples, paraphrases=any(p.paraphrases for p in probes),
                                       template=args.template))
        run_id = summary.run_id
        index = open_index(args) if args.corpus else None
        try:
            rows = screen_results(load_results(store, summary.run_id), index)
        finally:
            if index is not None:
                index.close()
    unknown = [r for r in rows if r.unknown]
    contra = [r for r in rows if r.contradicts]
    reasons = Counter(reason for _, reason in sft.not_screened)
    if args.json:
        print_json({"run_id": run_id, "rows": len(rows), "skipped_bad": skipped,
                    "not_screened": {"n": len(sft.not_screened), "by_reason": dict(reasons.most_common()),
                                     "rows": [{"row_id": i, "reason": r} for i, r in sft.not_screened]},
                    "unknown": len(unknown), "contradicts": len(contra),
                    "flagged": [{"row_id": r.row_id, "knowledge": r.knowledge, "unknown": r.unknown,
                                 "contradicts": r.contradicts, "evidence": r.evidence}
                                for r in rows if r.unknown or r.contradicts]})
        return 0
    print(f"{len(rows)} rows screened" + (f" (run {run_id})" if run_id else "")
          + (f", {skipped} bad rows skipped" if skipped else ""))
    if sft.not_screened:
        print(f"  {len(sft.not_screened)} not screened: not a short factual answer ("
              + ", ".join(f"{n} {r}" for r, n in reasons.most_common()) + "); their claims are not checked")
    print(f"  {len(unknown)} teach facts the model does not know (Unknown): fitting them raises hallucination")
    for r in unknown[:10]:
        print(f"      {printable(r.row_id)}: greedy {r.evidence['greedy'][0]!r}, {r.evidence['samples_correct']}/"
              f"{r.evidence['samples']} samples right")
    if index is not None or args.corpus:
        print(f"  {len(contra)} contradict the corpus")
        for r in contra[:10]:
            print(f"      {printable(r.row_id)}: corpus says {r.evidence['conflict_value']!r}")
    return 0

"""`workbench paraphrase PROBES --model M --out FILE`: a model writes paraphrases for the probes that have none, so
that `eval --paraphrases` and attribution can tell a prompt-sensitive failure from missing knowledge."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.cli._common import (
    add_model_arguments,
    atomic_output,
    bounded,
    check_output_file,
    max_tokens,
    print_json,
    samples_count,
    seed,
    temperature,
)

HELP = "have a model write paraphrases for the probes that have none (marked as generated); writes a probe file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("probes", metavar="PROBES", help="probe file (jsonl/csv/parquet) or suite")
    add_model_arguments(p)
    p.add_argument("--out", required=True, metavar="FILE", help="the probe file to write (.jsonl), every probe of "
                   "PROBES with its paraphrases")
    p.add_argument("--prompt", choices=("chat", "plain"), default="chat",
                   help="chat: the model's chat template (default; a server's, with --backend openai and "
                        "endpoint=chat); plain: a completion prompt, for a model without one")
    p.add_argument("--per-probe", type=bounded(1, 10), default=2, metavar="N",
                   help="paraphrases kept per probe at most (default 2)")
    p.add_argument("--samples", type=samples_count, default=8,
                   help="sampled rewrites per probe beside the greedy one, the candidates (default 8)")
    p.add_argument("--temperature", type=temperature, default=0.8, help="temperature of the samples (default 0.8)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the samples")
    p.add_argument("--max-tokens", type=max_tokens, default=48, metavar="N", help="new tokens per rewrite (default 48)")
    p.add_argument("--format", default="auto", help="probe file format (auto, jsonl, csv, parquet, ...)")
    p.add_argument("--skip-bad", action="store_true", help="skip bad probe rows (counted) instead of stopping")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    from workbench.backends import open_backend
    from workbench.cli.eval import model_spec_from_args
    from workbench.errors import WorkbenchError
    from workbench.probes import resolve_probes
    from workbench.probes.paraphrase import GENERATED_TAG, paraphrase, probe_row

    out = check_output_file(args.out, "--out")
    if out.suffix.lower() != ".jsonl":
        raise WorkbenchError(f"--out `{args.out}`: give a .jsonl file (the generic probe format)")
    _, loaded = resolve_probes(args.probes, format=args.format, skip_bad=args.skip_bad)
    spec = model_spec_from_args(args)
    with open_backend(spec) as backend:
        done = paraphrase(backend, loaded.probes, n=args.per_probe, samples=args.samples,
                          temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens,
                          chat=args.prompt == "chat")
    by = f"{spec.model}{f' + {spec.adapter}' if spec.adapter else ''} ({spec.backend}, workbench paraphrase)"
    with atomic_output(out, "--out") as tmp:
        tmp.write_text("".join(json.dumps(probe_row(p, by if p.id in done.written else None), ensure_ascii=False)
                               + "\n" for p in done.probes), encoding="utf-8")
    written = sum(len(v) for v in done.written.values())
    if args.json:
        print_json({"out": str(out), "probes": len(done.probes), "paraphrased": len(done.written),
                    "paraphrases": written, "kept_own": list(done.kept_own), "none_found": list(done.none_found),
                    "skipped_bad": loaded.skipped, "tag": GENERATED_TAG})
        return 0
    none = f" ({', '.join(done.none_found[:5])}{' ...' if len(done.none_found) > 5 else ''})" if done.none_found else ""
    print(f"wrote {Path(out)}: {len(done.probes)} probes; {written} paraphrases for {len(done.written)} of them "
          f"(tagged `{GENERATED_TAG}`), {len(done.kept_own)} kept their own, {len(done.none_found)} got none{none}")
    if done.written:
        print("read them before they decide a category: a model may change a question's meaning as it rewords it")
    return 0

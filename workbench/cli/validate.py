"""`workbench validate SPEC`: load a suite (or a probe file) and report what is in it."""

from __future__ import annotations

import argparse
import json
from collections import Counter

from workbench.printable import printable

HELP = "check a suite or probe file: count probes, tags, paraphrases and bad rows"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "spec", metavar="SUITE_OR_FILE", help="suite YAML, suite name, probe file, or hf:dataset[:config]"
    )
    p.add_argument(
        "--format", default="auto", help="auto (default), jsonl, csv, parquet, hf, truthfulqa, ..."
    )
    p.add_argument(
        "--skip-bad", action="store_true", help="skip bad rows (counted) instead of stopping at the first"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    from workbench.probes import resolve_probes

    suite, result = resolve_probes(args.spec, format=args.format, skip_bad=args.skip_bad)
    n = len(result.probes)
    tags = Counter(tag for probe in result.probes for tag in probe.tags)
    if args.json:
        summary = {
            "suite": suite.name,
            "n": n,
            "skipped": result.skipped,
            "problems": list(result.problems),
            "tags": dict(tags.most_common()),
        }
        print(json.dumps(summary))  # ASCII: a format character (U+202E) in a tag or id is escaped too
        return 0
    with_para = sum(1 for p in result.probes if p.paraphrases)
    with_fact = sum(1 for p in result.probes if p.subject)
    print(printable(f"suite {suite.name}: {n} probes from {result.source}"))
    print(f"  paraphrases: {with_para}/{n} probes ({100 * with_para / n:.0f}%)")
    print(f"  subject known: {with_fact}/{n} probes")
    if tags:
        print(printable(f"  tags ({len(tags)}): " + ", ".join(f"{t} {c}" for t, c in tags.most_common(15))))
        if len(tags) > 15:
            print(f"    ... and {len(tags) - 15} more")
    if result.skipped:
        print(f"  skipped {result.skipped} bad rows:")
        for problem in result.problems:
            print(f"    {printable(problem)}")
        if result.skipped > len(result.problems):
            print(f"    ... and {result.skipped - len(result.problems)} more")
    return 0

"""`workbench attribute RUN`: why each failed probe failed (knowledge axis x data axis), stored with the run."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from workbench.cli._common import atomic_output, bounded, check_output_file, print_json
from workbench.cli._index_engine import add_symlink_argument
from workbench.printable import printable

HELP = ("attribute a run's failures: behavior (unstable, prompt-sensitive, over-abstain), data (conflict, ...; "
        "with a corpus) or knowledge:unknown (without one)")
INDEX_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help="run id (a unique prefix, or `latest`)")
    p.add_argument("--corpus", metavar="FILE_OR_INDEX",
                   help="a corpus the model was trained on, whole or in part (e.g. your post-training set; "
                        "indexed into the workspace first), or a built corpus index; default: the workspace's "
                        "index if there is one")
    p.add_argument("--text-field", default="text", help="corpus field holding the text (default: text)")
    p.add_argument("--id-field", default="id", help="corpus field holding the document id (default: id)")
    p.add_argument("--skip-bad", action="store_true", help="skip bad corpus rows (counted) instead of stopping")
    add_symlink_argument(p)
    p.add_argument("--quality-report", metavar="FILE",
                   help="also write the corpus rows that contradict accepted answers to FILE (JSONL)")
    p.add_argument("--top", type=bounded(0, 10_000), default=3,
                   help="examples shown per category, 0-10000 (default 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def open_index(args: argparse.Namespace) -> Any:
    """The corpus index to use (either engine: the one the workspace or --corpus holds), building an FTS5
    index from a corpus file when one is given; None without any."""
    from workbench.attribution.build import build_index
    from workbench.attribution.engine import engine_of, find_workspace_index, infinigram_dir, open_engine
    from workbench.attribution.index import CorpusIndex, default_index_path
    from workbench.errors import WorkbenchError

    default = default_index_path(args.workspace)
    if args.corpus is None:
        return find_workspace_index(args.workspace)
    path = Path(args.corpus)
    if path.suffix.lower() in INDEX_SUFFIXES or engine_of(path) or (
            path.is_dir() and (engine_of(default_index_path(path)) or engine_of(infinigram_dir(path)))):
        return open_engine(path)
    if not path.exists() and not args.corpus.startswith("hf:"):
        raise WorkbenchError(f"corpus `{args.corpus}` does not exist")
    from workbench.cli.index import require_documents

    report = build_index(args.corpus, default, text_field=args.text_field, id_field=args.id_field,
                         skip_bad=args.skip_bad, follow_symlinks=args.follow_symlinks)
    require_documents(report, args.corpus)
    if report.skipped and not args.json:
        print(f"note: {report.skipped} bad corpus rows skipped")
    return CorpusIndex.open(default)


def run(args: argparse.Namespace) -> int:
    from workbench.attribution.attribute import attribute_results, missing_signals
    from workbench.attribution.decide import HOW_TO_GET
    from workbench.attribution.types import save_attributions
    from workbench.results import load_results
    from workbench.store import Store

    if args.quality_report:  # refused before any work, not after the attributions are stored
        check_output_file(args.quality_report, "--quality-report")
    store = Store.open(args.workspace)
    results = load_results(store, store.get_run(args.run).id)
    index = open_index(args)
    used = None if index is None else {"engine": index.stats().get("engine", "fts5"), "path": index.stats()["path"]}
    try:
        items = attribute_results(results, index)
        save_attributions(store, results.run.id, items)
        missing = missing_signals(results, index)
        exported = None
        if args.quality_report and index is not None:
            from workbench.attribution.quality import contradicting_rows, export_jsonl

            with atomic_output(args.quality_report, "--quality-report") as tmp:
                exported = export_jsonl(contradicting_rows(index, results.probes), tmp)
    finally:
        if index is not None:
            index.close()
    counts = Counter(a.category for a in items)
    if args.json:
        print_json({"run_id": results.run.id, "categories": dict(counts),
                    "probes": [{"probe_id": a.probe_id, "category": a.category, "confidence": a.confidence,
                                "knowledge": a.knowledge, "fix": a.fix, "evidence": a.evidence} for a in items],
                    "missing_signals": {m: HOW_TO_GET[m] for m in missing}, "corpus_index": used,
                    **({"quality_report": {"path": args.quality_report, "rows": exported}}
                       if exported is not None else {})})
        return 0
    print(f"run {results.run.id}: {len(items)} failed probes of {len(results.probes)}")
    for cat, n in counts.most_common():
        print(f"  {cat:<27} {n}")
        for a in [a for a in items if a.category == cat][: args.top]:
            print(printable(f"      {a.probe_id} ({a.knowledge}, confidence {a.confidence:.2f}): "
                            f"{a.evidence['why']}"))
            rows = a.evidence["data"].get("conflict_rows") or a.evidence["data"].get("support_rows") or []
            for row in rows[:2]:
                print(printable(f"          {row['doc_id']}: {row['snippet']}"))
    for m in missing:
        print(f"note: no {m}: {HOW_TO_GET[m]}")
    if args.quality_report and index is None:
        print("note: --quality-report needs a corpus (--corpus)")
    elif exported is not None:
        print(f"quality report: {exported} contradicting corpus rows -> {args.quality_report}")
    return 0

"""`workbench index CORPUS`: build the corpus index of the data axis (resumable; once per corpus)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from workbench.cli._common import bounded, print_json, workspace_dir
from workbench.cli._index_engine import add_engine_arguments, add_symlink_argument, build_with_engine

HELP = "index a training corpus (JSONL, Parquet, text, hf:name) for attribution's data axis"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus", metavar="CORPUS",
                   help="corpus.jsonl | corpus.parquet | lines.txt | a directory of .txt | hf:name[:config]")
    p.add_argument("--text-field", default="text", help="field/column holding the text (default: text)")
    p.add_argument("--id-field", default="id",
                   help="field/column holding the document id (default: id; '' numbers the rows)")
    p.add_argument("--skip-bad", action="store_true", help="skip bad rows (counted) instead of stopping")
    p.add_argument("--rebuild", action="store_true", help="discard the existing index and build anew")
    p.add_argument("--batch-size", type=bounded(1, 1_000_000), default=10_000,
                   help="rows per committed batch, 1-1000000 (default 10000)")
    p.add_argument("--json", action="store_true", help="print the build report as JSON")
    add_engine_arguments(p)
    add_symlink_argument(p)


def run(args: argparse.Namespace) -> int:
    from workbench.attribution import build_index, default_index_path
    from workbench.attribution.corpus import open_corpus
    from workbench.errors import WorkbenchError

    if args.batch_size < 1:
        raise WorkbenchError("--batch-size must be at least 1")
    workspace_dir(args.workspace, writing="the corpus index")
    total = None
    if not args.json and sys.stderr.isatty():  # the hint may read metadata: only for a visible bar
        total = open_corpus(args.corpus, text_field=args.text_field, id_field=args.id_field,
                            follow_symlinks=args.follow_symlinks).total_hint()
    with _progress(enabled=not args.json, total=total) as update:
        report = build_with_engine(args, update) if args.engine != "fts5" else build_index(
            args.corpus, default_index_path(args.workspace), text_field=args.text_field, id_field=args.id_field,
            skip_bad=args.skip_bad, rebuild=args.rebuild, batch_size=args.batch_size, progress=update,
            follow_symlinks=args.follow_symlinks)
    require_documents(report, args.corpus)
    if args.json:
        print_json(report.as_dict())
    elif report.up_to_date:
        print(f"{report.index} is up to date: {report.rows_total} rows from {report.source} (nothing to do)")
    else:
        resumed = f", resumed after {report.resumed_from} rows" if report.resumed_from else ""
        skipped = f", {report.skipped} bad rows skipped" if report.skipped else ""
        rate = report.rows_added / report.seconds if report.seconds > 0 else 0.0
        print(f"indexed {report.rows_added} rows ({report.rows_total} in all{resumed}{skipped}) "
              f"in {report.seconds:.1f}s ({rate:,.0f} rows/s) -> {report.index}")
    return 0


def require_documents(report: Any, corpus: str) -> None:
    """An index with no document answers every data-axis question with "missing": refuse it (exit 2)."""
    from workbench.errors import WorkbenchError

    if report.rows_total == 0:
        skipped = f" ({report.skipped} bad rows skipped)" if report.skipped else ""
        raise WorkbenchError(f"{corpus}: no documents to index{skipped}; the corpus is empty or has no usable row")


@contextmanager
def _progress(enabled: bool, total: int | None) -> Iterator[Callable[[int], None]]:
    """A rich progress display on a terminal; silent otherwise (pipes, CI, --json)."""
    if not enabled or not sys.stderr.isatty():
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), "[progress.description]{task.description}", BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task("indexing", total=total)
        yield lambda done: prog.update(task, completed=done)

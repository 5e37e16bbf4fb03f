"""`workbench index --engine infini-gram`: the options and the build of the second corpus-index engine
(kept apart from `index.py`, which builds the FTS5 default)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from workbench.cli._common import bounded


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default="fts5", choices=("fts5", "infini-gram"),
                   help="fts5 (default: SQLite, small corpora) or infini-gram (suffix arrays, pretraining scale; "
                        "needs `pip install 'hallucination-workbench[infinigram]'`)")
    p.add_argument("--tokenizer", default="bytes", metavar="MODEL|bytes",
                   help="infini-gram: index the model's own tokens (a model directory), or folded UTF-8 "
                        "bytes (default: whole-word, case-insensitive matching in any script)")
    p.add_argument("--window", type=bounded(0, 1 << 30), metavar="TOKENS",
                   help="infini-gram: co-occurrence window in tokens (0: the whole document; "
                        "default 1000 bytes / 256 model tokens)")


def add_symlink_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--follow-symlinks", action="store_true",
                   help="read symlinked files and folders inside a corpus directory (refused by default: a link "
                        "can pull any file the user can read into the index)")


def build_with_engine(args: argparse.Namespace, progress: Callable[[int], None]) -> Any:
    from workbench.attribution.engine import infinigram_dir
    from workbench.attribution.infinigram_build import build_infinigram

    return build_infinigram(args.corpus, infinigram_dir(args.workspace), tokenizer=args.tokenizer,
                            text_field=args.text_field, id_field=args.id_field, skip_bad=args.skip_bad,
                            rebuild=args.rebuild, batch_size=args.batch_size, window=args.window, progress=progress,
                            follow_symlinks=args.follow_symlinks)

"""`workbench card DIR`: (re)write the card of a job's adapter or of a fix set; `--push OWNER/NAME` uploads it."""

from __future__ import annotations

import argparse

from workbench.cli._common import print_json

HELP = "write the model card of a job's adapter, or the dataset card of a fix set (--push: to the Hub)"
EPILOG = ("Jobs and `workbench fix` write these cards themselves, and a gate or a release decision on an adapter "
          "rewrites its card; this command writes one again (e.g. after moving a folder) and pushes it. A push "
          "needs a hub login (`hf auth login`) and refuses while HF_HUB_OFFLINE is set.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", help="a job's adapter directory (OUTPUT_DIR/adapter) or a fix set directory")
    p.add_argument("--push", metavar="OWNER/NAME", help="then upload the folder to this hub repo (created if needed)")
    p.add_argument("--public", action="store_true", help="with --push: a public repo (default: private)")
    p.add_argument("--base-model", metavar="OWNER/NAME",
                   help="an adapter's base model by its Hub id (needed to push an adapter of a local model)")
    p.add_argument("--json", action="store_true")
    p.epilog = EPILOG


def run(args: argparse.Namespace) -> int:
    from workbench.cards import card_of, push_to_hub
    from workbench.errors import WorkbenchError
    from workbench.store import Store

    if args.public and not args.push:
        raise WorkbenchError("--public needs --push OWNER/NAME")
    store = Store.open(args.workspace)
    if args.push:
        url = push_to_hub(args.folder, args.push, private=not args.public, store=store, base_model=args.base_model)
        out = {"folder": args.folder, "pushed": url}
    else:
        kind, path = card_of(args.folder, store, args.base_model)
        out = {"folder": args.folder, "card": str(path), "kind": kind}
    if args.json:
        print_json(out)
    else:
        print(f"pushed {args.folder} to {out['pushed']}" if args.push else f"{out['kind']} card: {out['card']}")
    return 0

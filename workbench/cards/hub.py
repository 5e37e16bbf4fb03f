"""`push_to_hub` for a job's adapter (a model repo) and a fix set (a dataset repo), card first.

Written for users with a hub account; the workbench itself never needs one. Offline (`HF_HUB_OFFLINE=1`) it
refuses before anything is read or sent, rather than letting huggingface_hub fail deep in a request.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.cards._files import CARD, FIXSET_FILE
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.store import Store

_TRUE = {"1", "on", "yes", "true"}


def offline() -> bool:
    """huggingface_hub's own switch (read here, not from its constants, which are fixed at its import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def push_to_hub(folder: str | Path, repo_id: str, *, private: bool = True, store: Store | None = None,
                token: str | None = None, base_model: str | None = None) -> str:
    """Write the folder's card, then upload it: an adapter as a model repo (every file of the folder), a fix set
    as a dataset repo (its splits as Parquet through `DatasetDict.push_to_hub`, then the card and fixset.json).
    Returns the repo's URL. Private by default: a fix set holds the model's failures. An adapter trained on a local
    model needs `base_model`, the base's Hub id: the Hub refuses a card whose `base_model` is a path."""
    from workbench.cards.dataset import card_of
    from workbench.cards.model import base_of, is_hub_id, is_job_adapter

    if is_job_adapter(folder):
        base = base_model or base_of(folder)
        if not is_hub_id(base):
            raise WorkbenchError(f"{folder}: its base model `{base}` is a local path, and a Hub card names the base "
                                 "by its Hub id: pass --base-model OWNER/NAME")
    if offline():
        raise WorkbenchError(f"cannot push {folder} to `{repo_id}`: HF_HUB_OFFLINE is set (unset it, and log in "
                             "with `hf auth login` or pass a token, to push)")
    if "/" not in repo_id or repo_id.count("/") > 1:
        raise WorkbenchError(f"--push `{repo_id}`: a hub repo id is OWNER/NAME")
    kind, card = card_of(folder, store, base_model)
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    repo_type = "model" if kind == "model" else "dataset"
    url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
    if kind == "model":
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model",
                          commit_message="adapter and model card from the Hallucination Workbench")
    else:
        from datasets import load_from_disk

        load_from_disk(str(folder)).push_to_hub(repo_id, private=private, token=token)
        for name in (CARD, FIXSET_FILE):  # after the splits: push_to_hub writes a README of its own
            api.upload_file(path_or_fileobj=str(card.parent / name), path_in_repo=name, repo_id=repo_id,
                            repo_type="dataset", commit_message=f"{name} from the Hallucination Workbench")
    return str(url)

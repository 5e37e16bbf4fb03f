"""Writing a fix set: its rows as a `datasets.DatasetDict` (sft, dpo, prompts) with the manifest (`fixset.json`)
beside them. `FixSetInfo` is everything the manifest says beyond the rows."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finetune.chatform import TURN_COLUMNS
from finetune.fixset.manifest import DPO_COLUMNS, MANIFEST, PROMPT_COLUMNS, SFT_COLUMNS, FixRows, FixSetManifest
from workbench.probes import Suite


@dataclass(frozen=True)
class FixSetInfo:
    """What a fix set's manifest records beside its rows (`FixSetManifest` documents each field there).

    Attributes:
        run_id, model, strategy: The run the rows come from, its model, and the strategy (or the tag breaker's
            `break:TAG`).
        suite: The suite settings the rows were rendered with (template, stop, abstention phrases, grader).
        phrase: What abstention rows say; `note` why it is not the suite's first phrase (empty when it is).
        tokenizer: The model's tokenizer when the caller has it loaded (None: loaded again here for the phrase's
            tokens; two loads took 24 s on SmolLM2).
        heldout, skipped, validation, reserved, targets, replayed: the manifest's `heldout_probe_ids`, `skipped`,
            `validation`, `reserved_probe_ids`, `targets`, `replayed_probe_ids`.
        rehearsal, guard, bare_anchors, replay_capped, unguarded: as the manifest's fields of those names.
        field: the manifest's `field_targets`.
    """

    run_id: str
    model: str
    strategy: str
    suite: Suite
    phrase: str
    note: str = ""
    tokenizer: Any = None
    heldout: Sequence[str] = ()
    skipped: dict[str, str] = field(default_factory=dict)
    validation: Sequence[dict[str, Any]] = ()
    reserved: Sequence[str] = ()
    rehearsal: dict[str, Any] | None = None
    targets: Sequence[dict[str, Any]] = ()
    bare_anchors: int = 0
    replayed: Sequence[str] = ()
    guard: dict[str, Any] | None = None
    replay_capped: bool = False
    unguarded: bool = False
    field: Sequence[dict[str, Any]] = ()


def model_tokenizer(model: str) -> Any | None:
    """The model's tokenizer; None when it cannot load here (a remote id offline)."""
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model)
    except Exception:  # any loader failure means the same: no tokenizer to check against
        return None


def rows_digest(rows: FixRows) -> str:
    """sha256 of every row of every split, in order (a job records it for lineage)."""
    digest = hashlib.sha256()
    for name, items, columns in (("sft", rows.sft, SFT_COLUMNS), ("dpo", rows.dpo, DPO_COLUMNS),
                                 ("prompts", rows.prompts, PROMPT_COLUMNS)):
        for r in items:
            digest.update(json.dumps([name, *(r[c] for c in columns)], ensure_ascii=False).encode())
            digest.update(b"\n")
    return digest.hexdigest()


def write_fixset(out: Path, rows: FixRows, info: FixSetInfo) -> FixSetManifest:
    """Write the rows as a `datasets` DatasetDict (sft, dpo, prompts) with `fixset.json` beside it."""
    from datasets import DatasetDict

    chat = info.suite.template == "chat"  # turns are message lists (finetune/chatform.py)
    out.mkdir(parents=True, exist_ok=True)
    splits = DatasetDict({"sft": _table(rows.sft, SFT_COLUMNS, chat), "dpo": _table(rows.dpo, DPO_COLUMNS, chat),
                          "prompts": _table(rows.prompts, PROMPT_COLUMNS, chat)})
    # One shard each: datasets 5.2 writes no shard for an empty split and then cannot load it back.
    splits.save_to_disk(str(out), num_shards={"sft": 1, "dpo": 1, "prompts": 1})
    named = {"sft": rows.sft, "dpo": rows.dpo, "prompts": rows.prompts}
    suite = info.suite
    manifest = FixSetManifest(
        path=str(out), run_id=info.run_id, model=info.model, strategy=info.strategy,
        counts={k: _count(v, "category") for k, v in named.items()},
        sources={k: _count(v, "source") for k, v in named.items()},
        train_rows={k: sum(r["split"] == "train" for r in v) for k, v in named.items()},
        sha256=rows_digest(rows), abstention_phrase=info.phrase,
        new_tokens=_new_tokens(info.model, info.phrase, info.tokenizer), heldout_probe_ids=list(info.heldout),
        skipped=info.skipped, template=suite.template, stop=list(suite.stop),
        abstention_phrases=list(suite.abstention_phrases), grader=suite.grader,
        grader_options=dict(suite.grader_options), abstention_note=info.note, validation=list(info.validation),
        reserved_probe_ids=list(info.reserved), rehearsal=info.rehearsal, targets=list(info.targets),
        bare_anchors=info.bare_anchors, replayed_probe_ids=list(info.replayed), guard=info.guard,
        replay_capped=info.replay_capped, unguarded=info.unguarded, max_tokens=suite.max_tokens,
        field_targets=list(info.field))
    data = manifest.to_dict()
    data.pop("path")
    if not data["field_targets"]:
        del data["field_targets"]  # a set without field probes keeps the manifest it always had
    (out / MANIFEST).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return manifest


def _table(items: list[dict[str, Any]], columns: Sequence[str], chat: bool) -> Any:
    """One split as a `datasets.Dataset` with explicit features (an empty split keeps its columns' types)."""
    from datasets import Dataset, Features, List, Value

    message = {"role": Value("string"), "content": Value("string")}

    def feature(column: str) -> Any:
        if column in ("answers", "incorrect_answers"):
            return List(Value("string"))
        return List(message) if chat and column in TURN_COLUMNS else Value("string")

    feats = Features({c: feature(c) for c in columns})
    return Dataset.from_dict({c: [r[c] for r in items] for c in columns}, features=feats)


def _count(items: list[dict[str, Any]], key: str) -> dict[str, int]:
    return dict(sorted(Counter(r[key] for r in items).items()))


def _new_tokens(model: str, phrase: str, tok: Any = None) -> list[str]:
    """The abstention phrase's tokens under the model's tokenizer (`tok`, else loaded: a whitespace split if it
    cannot load)."""
    tok = tok or model_tokenizer(model)
    return phrase.split() if tok is None else [str(t) for t in tok.tokenize(" " + phrase)]

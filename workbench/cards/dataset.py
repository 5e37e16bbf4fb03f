"""The dataset card of a fix set: README.md beside its splits, written from its `fixset.json`.

What a fix set holds (rows per split, category and source; training vs held-out rows), where it comes from
(evaluation run, model, strategy, sha256, guard set) and the licence of the probes it was built from where the
source is a public set this module knows (`LICENCES`; any other source reads "not known"). The front matter is
huggingface_hub's `DatasetCardData`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.cards._files import CARD, FIXSET_FILE, LICENCES, TAG, atomic_write, read_json

if TYPE_CHECKING:
    from workbench.store import Store

UNKNOWN = "not known; check the source's terms"


def probe_sources(store: Store, run_id: str) -> list[str]:
    """The distinct sources of a run's probes (file paths, dataset ids), in order of first use."""
    seen: dict[str, None] = {}
    for p in store.probe_rows(run_id):
        seen.setdefault(str(p.get("source") or ""), None)
    return [s for s in seen if s]


def licence_of(source: str) -> str | None:
    name = source.lower().replace("-", "_")
    return next((lic for key, lic in LICENCES.items() if key in name), None)


def dataset_card(fixset: str | Path, sources: Sequence[str] = ()) -> str:
    """The dataset card (README.md text) of a fix set directory; `sources`: its run's probe sources."""
    from huggingface_hub import DatasetCardData

    path = Path(fixset)
    fix = read_json(path / FIXSET_FILE)
    counts: dict[str, dict[str, int]] = fix.get("counts", {})
    totals = {s: sum(c.values()) for s, c in counts.items()}
    licences = sorted({lic for s in sources if (lic := licence_of(s))})
    n = sum(totals.values())
    size = "n<1K" if n < 1000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "n>100K"
    data = DatasetCardData(pretty_name=f"fix set {path.name}", task_categories=["text-generation"],
                           size_categories=[size], license=licences[0] if len(licences) == 1 else None,
                           tags=[TAG, "fix-set", f"strategy:{fix.get('strategy')}"])
    lines = [f"# Fix set `{path.name}`", "",
             f"Targeted fine-tuning rows built by the Hallucination Workbench (`workbench fix`, strategy "
             f"`{fix.get('strategy')}`) from the attributions of evaluation run `{fix.get('run_id')}` of "
             f"`{fix.get('model')}`. Load it with `datasets.load_from_disk(this_folder)`; `fixset.json` is its "
             "full record.", "", "## Splits", "", "| split | rows | training | held out |", "|---|---|---|---|"]
    train = fix.get("train_rows", {})
    lines += [f"| {s} | {t} | {train.get(s, 0)} | {t - train.get(s, 0)} |" for s, t in totals.items()]
    lines += ["", "## Rows by category", "", "| split | category | rows |", "|---|---|---|"]
    lines += [f"| {s} | {c} | {k} |" for s, cats in counts.items() for c, k in cats.items()]
    lines += ["", "## Rows by source", "", "| split | source | rows |", "|---|---|---|"]
    lines += [f"| {s} | {c} | {k} |" for s, srcs in fix.get("sources", {}).items() for c, k in srcs.items()]
    guard = fix.get("guard")
    lines += ["", "## Lineage", "", f"- evaluation run: `{fix.get('run_id')}`", f"- model: `{fix.get('model')}`",
              f"- rows sha256: `{fix.get('sha256')}`",
              f"- held-out targeted probes: {len(fix.get('heldout_probe_ids', []))}; known facts held out for jobs "
              f"to check: {len(fix.get('validation', []))}"]
    if guard:
        lines.append(f"- guard set: {guard.get('known')} known facts, {guard.get('replayed')} replayed, "
                     f"{guard.get('validation')} held out")
    lines += ["", "## Licence of the source probes", ""]
    if not sources:
        lines.append("Not known: the probes' sources were not available when this card was written.")
    for s in sources:
        lic = licence_of(s)
        lines.append(f"- `{s}`: {lic or UNKNOWN}")
    return f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines) + "\n"


def write_dataset_card(fixset: str | Path, sources: Sequence[str] = ()) -> Path:
    """(Re)write README.md in the fix set directory."""
    return atomic_write(Path(fixset) / CARD, dataset_card(fixset, sources))


def card_of(folder: str | Path, store: Store | None = None, base_model: str | None = None) -> tuple[str, Path]:
    """Write the card a folder takes: ("model", path) for a job's adapter (`base_model`: the base's Hub id when
    the adapter names a local path), ("dataset", path) for a fix set."""
    from workbench.cards.model import is_job_adapter, write_model_card
    from workbench.errors import WorkbenchError

    p = Path(folder)
    if is_job_adapter(p):
        return "model", write_model_card(p, store, base_model)
    if base_model is not None:
        raise WorkbenchError(f"--base-model is for a job's adapter; {p} is not one")
    if (p / FIXSET_FILE).is_file():
        fix: dict[str, Any] = read_json(p / FIXSET_FILE)
        sources = probe_sources(store, fix["run_id"]) if store is not None and fix.get("run_id") else []
        return "dataset", write_dataset_card(p, sources)
    raise WorkbenchError(f"{p}: neither a job's adapter (adapter_config.json beside ../result.json) nor a fix set "
                         f"({FIXSET_FILE}); `workbench card` writes the card of one of those")

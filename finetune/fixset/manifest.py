"""A fix set's layout on disk: its split columns, the manifest (`fixset.json`) and the rows per split before they are
written (`FixRows`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from finetune.fixset.plan import ProbeFix

SFT_COLUMNS = ("prompt", "completion", "probe_id", "category", "source", "split")
DPO_COLUMNS = ("prompt", "chosen", "rejected", "probe_id", "category", "source", "split")
PROMPT_COLUMNS = ("prompt", "answers", "incorrect_answers", "probe_id", "category", "source", "split")
MANIFEST = "fixset.json"
#: Row categories that protect rather than fix (replay of known facts, rehearsal of corpus text): never targets.
UNTARGETED = ("replay", "rehearsal")
#: What a field probe's fix does with its reviewer's decision: teach the reference answer, teach abstention, leave
#: it to GRPO's reward, nothing (skipped), or keep it as a known fact (the run answered it right).
FIELD_TARGETS = {"inject": "answer", "dpo": "answer", "abstain": "abstain", "dpo-abstain": "abstain", "rl": "rl",
                 "skip": "skipped", "replay": "known", "validation": "known", "reserved": "known"}
#: The summary's words per target, in the order it lists them.
_FIELD_WORDS = {"answer": "taught their reference answer", "abstain": "abstention", "rl": "GRPO prompts",
                "skipped": "skipped", "known": "answered right (kept as known facts)"}
#: Row sources that teach an answer the model did not give (knowledge injection: the probe's answer, a --facts
#: answer, a reviewer's reference answer); the defaults give such a set more epochs (finetune/job/defaults.py).
INJECTION_SOURCES = ("inject", "facts", "field")
#: The split each job method trains on.
METHOD_SPLIT = {"sft": "sft", "dpo": "dpo", "grpo": "prompts"}


@dataclass(frozen=True)
class FixSetManifest:
    """What a fix set holds and where it came from (`fixset.json` beside the data).

    Attributes:
        path: The fix set directory (`datasets.load_from_disk` reads it).
        run_id: The evaluation run the attributions belong to (lineage).
        model: The model that run evaluated (the base model of a training job by default).
        strategy: auto | inject | abstain | dpo | rl.
        counts: Rows per split name ("sft"/"dpo"/"prompts") -> per category -> n; replay rows under "replay".
        sources: Rows per split name -> per source (inject, abstain, facts, own-sample, answer, replay, anchor).
        train_rows: Training rows per split name (split == "train").
        sha256: Hash of every row of both splits, in order (a job records it for lineage).
        abstention_phrase: What abstention rows say before the stop string: the suite's first abstention
            phrase as a model would say it ("I don't know"), or the first one the tokenizer can spell
            (finetune/abstention.py; `abstention_note` says why).
        new_tokens: The abstention phrase's tokens under the model's tokenizer; jobs make the rows of those
            the model never trained trainable (peft `trainable_token_indices`) when abstention rows exist.
        heldout_probe_ids: Targeted probes kept out of training.
        skipped: Probe id -> why it got no rows (e.g. data:missing under "inject" without --facts).
        template: The prompt template the rows were rendered with.
        stop: The suite's stop strings (the first ends every completion).
        abstention_phrases: Every abstention phrase of the suite (GRPO's grader counts them as not attempted).
        grader: The suite's grader name (GRPO's reward grades with it).
        grader_options: The suite's grader options.
        abstention_note: Why `abstention_phrase` is not the suite's first phrase; empty when it is.
        validation: Known probes no training row holds (probe_id, question, prompt, answers, incorrect_answers): jobs
            score them before and after training and record the broken ones.
        reserved_probe_ids: Known probes kept out of replay, rehearsal and the validation slice (`reserve_fraction`):
            no job sees them, so breakage measured on them is not the slice rollback chose a checkpoint by.
        rehearsal: What corpus rehearsal added to the SFT rows (finetune/rehearsal.py `RehearsalInfo`), or None.
        bare_anchors: Chat form only: DPO anchor rows whose model sentence held no accepted answer span to swap, so
            chosen / rejected are the bare accepted and other answers (plain fix sets: always 0, every anchor is bare).
        targets: The targeted training probes (probe_id, category, question, prompt, answers, incorrect_answers), the
            prompt the question rendered as the evaluation renders it: what a job scores as its targets fixed
            (finetune/job/scoring.py `Targets`), one verdict per probe as the gate sees it, not per paraphrase row.
        replayed_probe_ids: Known facts (run probes and guard facts) with replay rows or anchor pairs: the gate
            counts them apart from the known facts the job never saw (workbench/guard/lineage.py).
        guard: The guard set the rows drew on (workbench/guard): its key, facts known, how many were replayed
            and how many went to the validation slice (`paraphrases: true` when replayed under their paraphrase
            too); None when no guard set was given.
        replay_capped: Replay asked for more rows than MAX_REPLAY_REPEATS x the known facts hold: fewer were written.
        unguarded: No known fact at all protected this set (built with `allow_unguarded`).
        max_tokens: The run's answer budget (new tokens): a job answers its validation slice and its targets with it,
            as the gate will; None in a fix set written before it was recorded (the job then uses 16).
        field_targets: The run's field probes (from reviewed user reports, `workbench reports`), one entry each:
            probe_id, fix, target (FIELD_TARGETS: answer | abstain | rl | skipped | known), split, answer (the
            reference answer taught, or null), origin (reports, decision, reviewer). Left out of `fixset.json` when
            the run has none.
    """

    path: str
    run_id: str
    model: str
    strategy: str
    counts: dict[str, dict[str, int]]
    sources: dict[str, dict[str, int]]
    train_rows: dict[str, int]
    sha256: str
    abstention_phrase: str
    new_tokens: list[str]
    heldout_probe_ids: list[str]
    skipped: dict[str, str] = field(default_factory=dict)
    template: str = ""
    stop: list[str] = field(default_factory=list)
    abstention_phrases: list[str] = field(default_factory=list)
    grader: str = "match"
    grader_options: dict[str, Any] = field(default_factory=dict)
    abstention_note: str = ""
    validation: list[dict[str, Any]] = field(default_factory=list)
    reserved_probe_ids: list[str] = field(default_factory=list)
    rehearsal: dict[str, Any] | None = None
    targets: list[dict[str, Any]] = field(default_factory=list)
    bare_anchors: int = 0
    replayed_probe_ids: list[str] = field(default_factory=list)
    guard: dict[str, Any] | None = None
    replay_capped: bool = False
    unguarded: bool = False
    max_tokens: int | None = None
    field_targets: list[dict[str, Any]] = field(default_factory=list)

    def field_counts(self) -> dict[str, int]:
        """Field probes per target (answer, abstain, rl, skipped, known), the targets present only."""
        counts = {t: sum(e["target"] == t for e in self.field_targets) for t in _FIELD_WORDS}
        return {t: n for t, n in counts.items() if n}

    def field_summary(self) -> str | None:
        """The summary line (`3 field reports: 2 taught their reference answer, 1 abstention`); None without any."""
        counts = self.field_counts()
        if not counts:
            return None
        parts = ", ".join(f"{n} {_FIELD_WORDS[t]}" for t, n in counts.items())
        return f"{len(self.field_targets)} field reports: {parts}"

    @property
    def has_abstention(self) -> bool:
        """Abstention rows exist, or the rl strategy's reward pays for abstaining (its tokens must be learnable)."""
        return any(self.teaches_abstention(m) for m in ("sft", "dpo", "grpo"))

    def teaches_abstention(self, method: str) -> bool:
        """Whether a job of `method` on this set must learn to produce the abstention phrase. Only then
        do its tokens become trainable rows: an adapter with trainable-token deltas is not one vLLM's
        LoRARequest can load, so jobs that do not need them stay plain LoRA."""
        source = "targeted" if method == "grpo" else "abstain"  # rl: every targeted prompt may pay for silence
        return self.sources.get(METHOD_SPLIT[method], {}).get(source, 0) > 0

    def injects(self, method: str) -> bool:
        """Whether a job of `method` on this set trains on knowledge-injection rows (INJECTION_SOURCES)."""
        sources = self.sources.get(METHOD_SPLIT[method], {})
        return any(sources.get(s, 0) > 0 for s in INJECTION_SOURCES)

    def require_rows(self, method: str) -> str:
        """The split `method` trains on; a clear error when this set has no training rows there."""
        split = METHOD_SPLIT[method]
        if not self.train_rows.get(split):
            have = [m for m, sp in METHOD_SPLIT.items() if self.train_rows.get(sp)]
            hint = "rebuild it with `--strategy rl`" if method == "grpo" else "rebuild it with another --strategy"
            raise WorkbenchError(f"fix set `{self.path}` has no `{split}` training rows for method {method}; "
                                 f"{hint}" + (f", or use method {' / '.join(have)} on it" if have else ""))
        return split

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_manifest(path: str | Path) -> FixSetManifest:
    """The manifest of a fix set directory, with a clear error when it is not one."""
    p = Path(path) / MANIFEST
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise WorkbenchError(f"`{path}` is not a fix set (no {MANIFEST}); build one with `workbench fix`") from None
    except ValueError as e:
        raise WorkbenchError(f"{p}: not valid JSON ({e})") from None
    data["path"] = str(Path(path))
    return FixSetManifest(**data)


def check_data(path: str | Path) -> None:
    """Every split of the fix set at `path` loads (the Arrow files `datasets.load_from_disk` maps): a truncated or
    damaged file is a WorkbenchError naming it, never pyarrow's traceback once a job has started."""
    from datasets import load_from_disk

    folder = Path(path)
    for split in sorted(p.parent for p in folder.glob("*/state.json")):
        try:
            load_from_disk(str(split))
        except Exception as e:  # pyarrow's ArrowInvalid (a ValueError), OSError, a damaged state.json
            files = ", ".join(str(split / f) for f in _data_files(split)) or str(split)
            raise WorkbenchError(f"fix set `{path}`: split `{split.name}` cannot be read ({files}: "
                                 f"{type(e).__name__}: {e}); the file is damaged or truncated: build the fix set "
                                 "again with `workbench fix`") from None


def _data_files(split: Path) -> list[str]:
    """The Arrow files a split's `state.json` names (none when it cannot be read)."""
    try:
        state = json.loads((split / "state.json").read_text())
        return [str(f["filename"]) for f in state.get("_data_files", [])]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []


def field_entry(f: ProbeFix) -> dict[str, Any]:
    """A field probe's line of the manifest's `field_targets`."""
    return {"probe_id": f.probe_id, "fix": f.fix, "target": FIELD_TARGETS[f.fix], "split": f.split,
            "answer": f.answer if FIELD_TARGETS[f.fix] == "answer" else None, "origin": f.origin}


@dataclass
class FixRows:
    """A fix set's rows per split, before `write_fixset` (also used by finetune/inject.py's tag breaker)."""

    sft: list[dict[str, Any]] = field(default_factory=list)
    dpo: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)

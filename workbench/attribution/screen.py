"""Screen a proposed fine-tuning set before training.

Each SFT row is asked of the model as a probe (with samples, and its paraphrases if it has any) and
placed on the knowledge axis. Rows teaching facts the model does not know (Unknown) are flagged:
fine-tuning on unknown facts is learnt slowly and raises hallucination (Gekhman et al. 2024).
With a corpus index, rows whose subject the corpus pairs with another value of the same relation
(a wrong answer the model gives) are flagged as contradicting the corpus. Rows whose answer is not a short
factual answer (code, a table, several lines or sentences, a paragraph: `longform.py`) are not screened:
they are counted with the reason, never asked, and never flagged.

Rows: JSON Lines, or a JSON array (Alpaca's format), of objects with `question`/`prompt`/`instruction` (an
Alpaca row's non-empty `input` follows its instruction) and `answer`/`answers`/`completion`/`response`/`output`,
or `messages` (the first user turn and the assistant reply); optional `id`, `subject`, `relation`,
`paraphrases`.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.attribution.data_axis import AnswerSpace, find_conflict
from workbench.attribution.engine import CorpusEngine
from workbench.attribution.knowledge import ChanceModel, assess
from workbench.attribution.longform import LongForm, longform_reason
from workbench.errors import InputError, WorkbenchError
from workbench.probes import read_records
from workbench.results import RunResults
from workbench.safeopen import MAX_DATA_FILE_BYTES, open_input
from workbench.types import Probe

_QUESTION = ("question", "prompt", "instruction")
_ANSWER = ("answer", "answers", "completion", "response", "output")


@dataclass(frozen=True)
class ScreenedRow:
    row_id: str
    knowledge: str
    unknown: bool  # flagged: teaches a fact the model does not know
    contradicts: bool  # flagged: the corpus pairs the subject with another value
    evidence: dict[str, Any]


@dataclass(frozen=True)
class SftRows:
    """A fine-tuning file read for screening.

    Attributes:
        probes: The rows with a short factual answer, as probes to ask the model.
        skipped: Bad rows skipped (with skip_bad).
        not_screened: (row id, why) for rows whose answer is not a short factual answer.
    """

    probes: list[Probe]
    skipped: int
    not_screened: list[tuple[str, LongForm]]


def read_sft(path: str | Path, *, skip_bad: bool = False) -> SftRows:
    """SFT rows as probes; bad rows raise InputError (file, line, field) or are counted with skip_bad.
    A file without a usable row is a WorkbenchError (there is nothing to screen)."""
    p = Path(path)
    if not p.exists():
        raise WorkbenchError(f"{p}: no such file")
    probes: list[Probe] = []
    not_screened: list[tuple[str, LongForm]] = []
    skipped, first_line = 0, dict[str, int]()
    array = _is_array(p)
    # The probe readers, with their bounds (safeload): a JSON array as a whole, JSON Lines row by row.
    for n, item in enumerate(read_records(p, "json" if array else "jsonl"), start=1):
        try:
            if isinstance(item, InputError):
                raise item
            # a row's default id: its line in JSON Lines, its place in an array (one line may hold them all)
            probe = _probe(path, item.line, item.data, f"row-{n if array else item.line}")
            if probe.id in first_line:  # the run keys probes by id
                raise InputError(path, item.line, "id", f"duplicate id `{probe.id}` (first on line "
                                                        f"{first_line[probe.id]})")
            first_line[probe.id] = item.line
            if (reason := longform_reason(probe.answers[0])) is not None:
                not_screened.append((probe.id, reason))
            else:
                probes.append(probe)
        except InputError:
            if not skip_bad:
                raise
            skipped += 1
    if not probes and not not_screened:
        raise WorkbenchError(f"{p}: no usable row to screen" + (f" ({skipped} bad rows skipped)" if skipped else ""))
    return SftRows(probes, skipped, not_screened)


def _is_array(path: Path) -> bool:
    """A JSON array file (Alpaca's `[{"instruction": ..., "input": ..., "output": ...}, ...]`), not JSON Lines."""
    with open_input(path, max_bytes=MAX_DATA_FILE_BYTES, what="SFT file") as f:  # a FIFO would block a plain open
        head = f.read(4096).removeprefix(codecs.BOM_UTF8).lstrip()
    return head.startswith(b"[")


def _probe(path: str | Path, line_no: int, row: Mapping[str, Any], default_id: str) -> Probe:
    if "messages" in row:
        msgs = row["messages"] if isinstance(row["messages"], list) else []
        user = next((m.get("content") for m in msgs if isinstance(m, dict) and m.get("role") == "user"), None)
        reply = next((m.get("content") for m in msgs if isinstance(m, dict) and m.get("role") == "assistant"), None)
        question, answer, qf, af = user, reply, "messages", "messages"
    else:
        qf = next((f for f in _QUESTION if f in row), _QUESTION[0])
        # a missing answer is named as the row's format names it: Alpaca's instruction goes with `output`
        af = next((f for f in _ANSWER if f in row), "output" if qf == "instruction" else _ANSWER[0])
        question, answer = row.get(qf), row.get(af)
        extra = row.get("input")
        if qf == "instruction" and isinstance(question, str) and isinstance(extra, str) and extra.strip():
            question = f"{question.strip()}\n\n{extra.strip()}"  # Alpaca: the instruction, then its input
    if not isinstance(question, str) or not question.strip():
        raise InputError(path, line_no, qf, "missing or empty question")
    answers = answer if isinstance(answer, list) else [answer]
    if not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise InputError(path, line_no, af, "missing or empty answer")
    paraphrases = row.get("paraphrases") or []
    if not isinstance(paraphrases, list) or not all(isinstance(p, str) for p in paraphrases):
        raise InputError(path, line_no, "paraphrases", "must be a list of strings")
    subject, relation = row.get("subject"), row.get("relation")
    return Probe(id=str(row.get("id", default_id)), question=question.strip(),
                 answers=tuple(str(a).strip() for a in answers), paraphrases=tuple(paraphrases),
                 subject=subject if isinstance(subject, str) else None,
                 relation=relation if isinstance(relation, str) else None, source=str(path))


def screen_results(results: RunResults, index: CorpusEngine | None) -> list[ScreenedRow]:
    """Flags per row of an eval run over the SFT rows (see `read_sft`)."""
    chance = ChanceModel(results.probes)
    space = AnswerSpace(results.probes)
    n_docs = int(index.stats()["rows"]) if index is not None else 0  # type: ignore[call-overload]
    out = []
    for r in results.probes:
        kn = assess(r, chance.chance(r))
        conflict = find_conflict(index, r, space, n_docs) if index is not None and r.probe.subject else None
        support = (max(index.cooccur(r.probe.subject, a).count for a in r.probe.answers)
                   if index is not None and r.probe.subject else None)
        contradicts = conflict is not None and conflict.found.count > (support or 0)
        evidence: dict[str, Any] = {
            "greedy": [g.text for g in r.greedy], "samples_correct": kn.k, "samples": kn.n,
            "chance": round(kn.chance, 4), "p_value": kn.p_value, "support": support,
            "conflict_value": conflict.value if conflict else None,
            "conflict_rows": [{"doc_id": x.doc_id, "snippet": x.snippet} for x in conflict.found.rows]
            if conflict else [],
        }
        out.append(ScreenedRow(r.probe.id, kn.level, kn.level == "Unknown", contradicts, evidence))
    return out

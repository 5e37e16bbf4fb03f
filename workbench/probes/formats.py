"""Probe schemas: the generic probe format and public benchmarks (TruthfulQA, SimpleQA, Chinese
SimpleQA, PopQA, NQ-open, TriviaQA, HaluEval). Each turns one `Row` into a `Probe` or raises `InputError`
naming the field.

Detection (`detect`) looks at the column names of the first record, compared case- and
spacing-insensitively, and takes the first format in `FORMATS` order whose `required` columns are all
present (and whose `accepts` test, if it has one, passes on the first record's values): truthfulqa,
simpleqa, halueval, popqa, generic, chinese_simpleqa, nq_open, triviaqa. NQ-open and TriviaQA share their
columns (`question`, `answer`): NQ-open's `answer` is a list of strings, TriviaQA's an object with
`aliases`/`value`. With none of them complete, a `question` column still means the generic probe format
(its first row then reports what is missing).

Chinese SimpleQA (OpenStellarTeam) comes in two forms, both read as published: the CSV of its GitHub
repository and Hugging Face files (`metadata, problem, answer`, metadata a JSON object with `id`,
`primary_category`, `secondary_category`, `urls`; SimpleQA's columns, so read by the simpleqa format,
its categories as tags) and the Hugging Face dataset's rows (`id, question, answer,
primary_category, secondary_category, urls`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError, unknown_name
from workbench.probes._row import Row, dedup
from workbench.safeload import json_loads
from workbench.types import Probe

Converter = Callable[[Row, str], Probe]


@dataclass(frozen=True)
class Format:
    """A probe schema.

    Attributes:
        name: What `format=` and a suite's `format:` call it.
        required: Normalized column names that identify it (and must be present).
        convert: Row and source name to Probe.
        description: One line for help texts.
        accepts: For formats that share their columns with another: a test of the first record's
            (normalized) fields; detection takes this format only when it passes.
    """

    name: str
    required: tuple[str, ...]
    convert: Converter
    description: str
    accepts: Callable[[Mapping[str, Any]], bool] | None = None


def _generic(row: Row, source: str) -> Probe:
    return Probe(
        id=row.probe_id("id"),
        question=row.text("question", required=True) or "",
        answers=row.texts("answers", required=True),
        incorrect_answers=row.texts("incorrect_answers"),
        paraphrases=row.texts("paraphrases"),
        subject=row.text("subject"),
        relation=row.text("relation"),
        tags=row.texts("tags"),
        source=source,
        language=row.text("language"),
    )


def _truthfulqa(row: Row, source: str) -> Probe:
    best = row.text("best_answer")
    answers = dedup([*([best] if best else []), *row.texts("correct_answers")])
    if not answers:
        raise row.error("best_answer", "empty, and so is `Correct Answers`: at least one answer is needed")
    tags = [t for t in (row.text("category"), row.text("type")) if t]
    return Probe(
        id=row.probe_id("id"),
        question=row.text("question", required=True) or "",
        answers=answers,
        incorrect_answers=row.texts("incorrect_answers"),
        tags=tuple(tags),
        source=source,
    )


def _simpleqa_metadata(row: Row) -> dict[str, object]:
    value = row.get("metadata")
    if value is None or isinstance(value, dict):
        return value or {}
    if not isinstance(value, str):
        raise row.error("metadata", f"must be a dict or its text, got {type(value).__name__}")
    if not value.strip():
        return {}
    try:
        parsed = ast.literal_eval(value)  # literals only: no names, calls or attribute access
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        try:  # Chinese SimpleQA writes JSON (true/false/null are no Python literals)
            parsed = json_loads(value)
        except ValueError:
            raise row.error("metadata", f"not a Python dict literal or JSON object ({type(e).__name__})") from None
    if not isinstance(parsed, dict):
        raise row.error("metadata", f"must be a dict, got {type(parsed).__name__}")
    return parsed


# SimpleQA's metadata has topic/answer_type; Chinese SimpleQA's has primary/secondary_category.
_META_TAGS = ("topic", "answer_type", "primary_category", "secondary_category")


def _simpleqa(row: Row, source: str) -> Probe:
    meta = _simpleqa_metadata(row)
    tags = [str(meta[k]).strip() for k in _META_TAGS if isinstance(meta.get(k), str | int)]
    meta_id = meta.get("id")
    probe_id = row.probe_id("id")
    if row.get("id") is None and isinstance(meta_id, str | int) and str(meta_id).strip():
        probe_id = str(meta_id).strip()
    return Probe(
        id=probe_id,
        question=row.text("problem", required=True) or "",
        answers=(row.text("answer", required=True) or "",),
        tags=tuple(t for t in tags if t),
        source=source,
        language="zh" if "primary_category" in meta else None,
    )


def _chinese_simpleqa(row: Row, source: str) -> Probe:
    tags = [t for t in (row.text("primary_category"), row.text("secondary_category")) if t]
    return Probe(
        id=row.probe_id("id"),
        question=row.text("question", required=True) or "",
        answers=(row.text("answer", required=True) or "",),
        tags=tuple(tags),
        source=source,
        language="zh",
    )


def _popqa(row: Row, source: str) -> Probe:
    listed = row.get("possible_answers")
    if isinstance(listed, str) and listed.strip() and not listed.lstrip().startswith("["):
        raise row.error("possible_answers", f"must be a JSON list of strings, got {listed[:40]!r}")
    return Probe(
        id=row.probe_id("id"),
        question=row.text("question", required=True) or "",
        answers=row.texts("possible_answers", required=True, sep=None),
        subject=row.text("subj"),
        relation=row.text("prop"),
        source=source,
    )


def _triviaqa(row: Row, source: str) -> Probe:
    answer = row.get("answer")
    if isinstance(answer, str):
        answers: tuple[str, ...] = (row.text("answer", required=True) or "",)
    elif isinstance(answer, dict):
        prefix = row.names["answer"] + "."
        sub = Row(answer, path=row.path, line=row.line, index=row.index, stem=row.stem, prefix=prefix)
        value = sub.text("value")
        answers = dedup([*([value] if value else []), *sub.texts("aliases", sep=None)])
        if not answers:
            raise row.error("answer", "has no `value` and no `aliases`: at least one answer is needed")
    else:
        raise row.error("answer", "missing" if answer is None else "must be an object with `aliases`/`value`")
    return Probe(
        id=row.probe_id("question_id", "questionid", "id"),
        question=row.text("question", required=True) or "",
        answers=answers,
        source=source,
    )


def _nq_open(row: Row, source: str) -> Probe:
    return Probe(
        id=row.probe_id("id"),
        question=row.text("question", required=True) or "",
        answers=row.texts("answer", required=True, sep=None),
        source=source,
    )


def _answer_is_a_list(data: Mapping[str, Any]) -> bool:
    answer = data.get("answer")
    return isinstance(answer, list | tuple) or hasattr(answer, "tolist")  # Parquet gives numpy arrays


def _halueval(row: Row, source: str) -> Probe:
    wrong = row.text("hallucinated_answer")
    return Probe(
        id=row.probe_id("id"),
        question=row.text("question", required=True) or "",
        answers=(row.text("right_answer", required=True) or "",),
        incorrect_answers=(wrong,) if wrong else (),
        source=source,
    )


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "truthfulqa",
            ("question", "best_answer"),
            _truthfulqa,
            "TruthfulQA CSV: Type, Category, Question, Best Answer, Correct Answers, Incorrect Answers",
        ),
        Format("simpleqa", ("problem", "answer"), _simpleqa, "SimpleQA CSV: problem, answer, metadata"),
        Format(
            "halueval",
            ("question", "right_answer"),
            _halueval,
            "HaluEval QA: question, right_answer, hallucinated_answer",
        ),
        Format(
            "popqa",
            ("question", "possible_answers"),
            _popqa,
            "PopQA: question, possible_answers (JSON list), subj, prop",
        ),
        Format(
            "generic",
            ("question", "answers"),
            _generic,
            "question, answers; optional id, incorrect_answers, paraphrases, subject, relation, tags, language",
        ),
        Format(
            "chinese_simpleqa",
            ("question", "answer", "primary_category"),
            _chinese_simpleqa,
            "Chinese SimpleQA rows: id, question, answer, primary_category, secondary_category (its CSV "
            "form is read as simpleqa)",
        ),
        Format(
            "nq_open",
            ("question", "answer"),
            _nq_open,
            "NQ-open (lm-eval's nq_open): question, answer (a list of strings)",
            accepts=_answer_is_a_list,
        ),
        Format(
            "triviaqa", ("question", "answer"), _triviaqa, "TriviaQA: question, answer.aliases, answer.value"
        ),
    )
}

#: Names that pick how the source is read (the schema is then detected).
CONTAINERS = ("jsonl", "json", "csv", "tsv", "parquet", "hf")
#: Every accepted `format=` value.
FORMAT_NAMES = ("auto", *CONTAINERS, *(n for n in FORMATS if n != "generic"))


def detect(columns: Iterable[str], source: str, first: Mapping[str, Any] | None = None) -> Format:
    """The first format whose required columns are all present (names already normalized) and, for a
    format with an `accepts` test, whose test passes on `first` (the first record; without it, such a
    format is passed over)."""
    have = set(columns)
    for fmt in FORMATS.values():
        if set(fmt.required) <= have and (fmt.accepts is None or (first is not None and fmt.accepts(first))):
            return fmt
    if "question" in have:  # a probe file whose first row lacks `answers`: report that row, not the file
        return FORMATS["generic"]
    needs = "; ".join(f"{f.name}: {', '.join(f.required)}" for f in FORMATS.values() if f.name != "generic")
    raise WorkbenchError(
        f"{source}: cannot tell the probe format from its columns ({', '.join(sorted(have)) or 'none'}). "
        "A probe file needs `question` and `answers`; map other names with `columns` "
        '(e.g. {"question": "q", "answers": "a"}) or name a format with --format '
        f"(the public formats need these columns: {needs})."
    )


def get_format(name: str) -> Format:
    """A schema by name; "generic" is the plain probe format."""
    if name not in FORMATS:
        raise unknown_name("format", name, FORMAT_NAMES)
    return FORMATS[name]

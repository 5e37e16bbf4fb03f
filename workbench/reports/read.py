"""Field-report files read into reports: OpenAI-style chat JSONL, or CSV / JSONL with named columns.

A chat row holds `messages` (each a `role` and a `content`, a string or OpenAI's list of text parts) and optional
feedback, at the top level or under `feedback`: `rating`, `comment`, `reason`, `timestamp`, `conversation_id`. The
asked question is the last user turn that the model answered (the last one when none was answered); the turns
before it are its context, and the prompt the probe keeps.

A column row maps report fields to its columns (`--columns question=q,answer=a,comment=c`); without a mapping the
columns are taken by the fields' own names. Files are read by the probe loader's readers (`read_records`: UTF-8
checked, one record at most 1 MiB, JSON without duplicate keys), so a bad row names file, line and field.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import InputError, WorkbenchError, did_you_mean
from workbench.grading.normalize import normalize
from workbench.probes import read_records
from workbench.reports.redact import Redactor

#: Report fields a `--columns` mapping may name.
COLUMN_FIELDS = ("question", "answer", "comment", "rating", "reason", "timestamp", "conversation_id", "system")
FEEDBACK_FIELDS = ("rating", "comment", "reason", "timestamp", "conversation_id")
ROLES = ("system", "developer", "user", "assistant", "tool")
Message = dict[str, str]


@dataclass(frozen=True)
class Report:
    """One flagged conversation as read (and redacted): what `workbench reports import` stores."""

    id: str
    source: str
    line: int
    original: Mapping[str, Any]
    messages: tuple[Message, ...]  # the prompt: context turns, then the asked user turn last
    question: str
    answer: str | None
    comment: str | None
    feedback: Mapping[str, Any] = field(default_factory=dict)
    reported_at: str | None = None

    @property
    def question_key(self) -> str:
        """What groups reports: the normalised user turns, so "and when?" after two different questions are two
        questions, and "What is the capital of Australia?" / "what is the capital of australia" one."""
        turns = [m["content"] for m in self.messages if m["role"] == "user"]
        return " / ".join(normalize(x) or x.strip().lower() for x in turns)


def parse_columns(spec: str | None) -> dict[str, str]:
    """`question=q,answer=a` -> {"question": "q", "answer": "a"}; unknown fields get "Did you mean"."""
    if not spec:
        return {}
    out: dict[str, str] = {}
    for part in spec.split(","):
        name, eq, column = part.partition("=")
        name, column = name.strip(), column.strip()
        if not eq or not name or not column:
            raise WorkbenchError(f"--columns: `{part.strip()}` is not FIELD=COLUMN (e.g. question=prompt)")
        if name not in COLUMN_FIELDS:
            raise WorkbenchError(f"--columns: `{name}` is not a report field.{did_you_mean(name, COLUMN_FIELDS)} "
                                 f"Fields: {', '.join(COLUMN_FIELDS)}")
        if name in out:
            raise WorkbenchError(f"--columns: `{name}` is mapped twice")
        out[name] = column
    if "question" not in out:
        raise WorkbenchError("--columns must map `question` (e.g. question=prompt)")
    return out


def read_reports(path: Path, *, columns: Mapping[str, str], redactor: Redactor,
                 imported_at: str) -> Iterator[Report | InputError]:
    """Each record of `path` as a Report, or the InputError naming its line and field (the caller skips or stops)."""
    suffix = path.suffix.lower()
    container = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv"}.get(suffix)
    if container is None:
        raise WorkbenchError(f"{path}: cannot tell the file type from `{suffix or '(no extension)'}`; "
                             "field reports are read from .jsonl, .json, .csv or .tsv")
    header_checked = not columns or container not in ("csv", "tsv")
    for item in read_records(path, container):
        if isinstance(item, InputError):
            yield item
            continue
        if not header_checked:  # every row of a CSV has the header's columns: check the mapping once, on line 1
            _check_header(path, item.data, columns)
            header_checked = True
        # The id is taken before redaction: the same row imported again, with other redaction flags or none, is
        # recognised as already stored (and no unredacted copy slips in).
        content = json.dumps(item.data, sort_keys=True, ensure_ascii=False, default=str)
        rid = "rep-" + hashlib.sha256(f"{path.name}\0{item.line}\0{content}".encode()).hexdigest()[:12]
        data = redactor.value(dict(item.data))
        try:
            if not columns and "messages" in data:
                yield _chat(path, item.line, data, rid)
            else:
                yield _columns(path, item.line, data, columns, rid)
        except InputError as e:
            yield e


def _check_header(path: Path, row: Mapping[str, Any], columns: Mapping[str, str]) -> None:
    """Every column `--columns` names is in the CSV header; else an error naming it. Without this check a mapped
    `answer=bot_replyy` would read every row's answer as absent, silently."""
    header = [str(k) for k in row]
    present = {h.strip().lower() for h in header}
    for name, column in columns.items():
        if column.strip().lower() not in present:
            raise InputError(path, 1, column, f"--columns maps `{name}` to this column, which the header does not "
                             f"have.{did_you_mean(column, header)} Header: {', '.join(header)[:200]}")


def _chat(path: Path, line: int, data: dict[str, Any], rid: str) -> Report:
    raw = data["messages"]
    if not isinstance(raw, list) or not raw:
        raise InputError(path, line, "messages", "must be a non-empty list of {role, content} objects")
    messages: list[Message] = []
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise InputError(path, line, where, f"must be an object with `role` and `content`, got {type(m).__name__}")
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLES:
            if role is None:
                problem = "missing"
            elif not isinstance(role, str):
                problem = f"must be a string, got {type(role).__name__}"
            else:
                problem = f"unknown role `{role}`.{did_you_mean(role, ROLES)}"
            raise InputError(path, line, f"{where}.role", f"{problem} (roles: {', '.join(ROLES)})")
        messages.append({"role": "system" if role == "developer" else str(role),
                         "content": _content(path, line, f"{where}.content", m.get("content"))})
    users = [i for i, m in enumerate(messages) if m["role"] == "user" and m["content"].strip()]
    if not users:
        raise InputError(path, line, "messages", "no user turn with text: there is no question to keep")
    answered = [i for i in users if any(m["role"] == "assistant" for m in messages[i + 1:])]
    asked = answered[-1] if answered else users[-1]
    reply = next((m["content"] for m in messages[asked + 1:] if m["role"] == "assistant"), None)
    feedback = {**_feedback(path, line, data.get("feedback"), "feedback"),
                **{k: data[k] for k in FEEDBACK_FIELDS if data.get(k) is not None}}
    return _report(path, line, rid, data, messages[: asked + 1], reply, feedback)


def _content(path: Path, line: int, where: str, value: Any) -> str:
    """A turn's text: a string, or the text parts of OpenAI's content list joined by newlines (other parts, such as
    `image_url`, carry no text a probe can keep). A malformed part is an error naming it, never dropped."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""  # an assistant turn that only called a tool
    if not isinstance(value, list):
        raise InputError(path, line, where, f"must be a string or a list of content parts, got {type(value).__name__}")
    texts: list[str] = []
    for k, part in enumerate(value):
        at = f"{where}[{k}]"
        if not isinstance(part, dict):
            raise InputError(path, line, at, 'must be a content part such as {"type": "text", "text": "..."}, got '
                             f"{type(part).__name__}")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise InputError(path, line, f"{at}.type", "missing (`text`, `image_url`, ...)" if kind is None
                             else f"must be a string, got {type(kind).__name__}")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InputError(path, line, f"{at}.text", "missing" if text is None
                                 else f"must be a string, got {type(text).__name__}")
            texts.append(text)
    return "\n".join(texts)


def _feedback(path: Path, line: int, value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(path, line, where, f"must be an object (rating, comment, ...), got {type(value).__name__}")
    return {k: v for k, v in value.items() if v is not None}


def _columns(path: Path, line: int, data: dict[str, Any], columns: Mapping[str, str], rid: str) -> Report:
    mapping = dict(columns) or {f: f for f in COLUMN_FIELDS}
    lowered = {str(k).strip().lower(): k for k in data}

    def get(name: str) -> Any:
        column = mapping.get(name)
        key = lowered.get(column.strip().lower()) if column else None
        value = data.get(key) if key is not None else None
        if isinstance(value, str) and not value.strip():
            return None
        return value

    question_col = mapping["question"]
    if question_col.strip().lower() not in lowered:
        hint = did_you_mean(question_col, [str(k) for k in data])
        what = "the --columns mapping" if columns else "no --columns, so fields are read by their own names"
        raise InputError(path, line, question_col, f"missing ({what}).{hint} Columns: "
                         f"{', '.join(map(str, data))[:200]}")
    texts: dict[str, str | None] = {}
    for name in ("question", "answer", "comment", "reason", "system", "conversation_id"):
        value = get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, str | int)):
            raise InputError(path, line, mapping.get(name), f"must be text, got {type(value).__name__}")
        texts[name] = None if value is None else str(value)
    if texts["question"] is None:
        raise InputError(path, line, question_col, "blank: there is no question to keep")
    messages: list[Message] = [{"role": "system", "content": texts["system"]}] if texts["system"] else []
    messages.append({"role": "user", "content": texts["question"]})
    feedback = {name: get(name) for name in FEEDBACK_FIELDS if get(name) is not None}
    return _report(path, line, rid, data, messages, texts["answer"], feedback, fields=mapping)


def _report(path: Path, line: int, rid: str, data: dict[str, Any], messages: list[Message], answer: str | None,
            feedback: dict[str, Any], fields: Mapping[str, str] | None = None) -> Report:
    def name(f: str) -> str:
        return (fields or {}).get(f, f)

    rating = feedback.get("rating")
    if rating is not None and (isinstance(rating, bool) or not isinstance(rating, int | float | str)):
        raise InputError(path, line, name("rating"), f"must be a number or a word, got {type(rating).__name__}")
    if isinstance(rating, float) and not math.isfinite(rating):  # NaN would make `--json` output invalid JSON
        raise InputError(path, line, name("rating"), f"must be a finite number, got {rating}")
    comment = feedback.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise InputError(path, line, name("comment"), f"must be text, got {type(comment).__name__}")
    reported = _timestamp(path, line, name("timestamp"), feedback.get("timestamp"))
    return Report(id=rid, source=str(path), line=line, original=data, messages=tuple(messages),
                  question=messages[-1]["content"].strip(), answer=answer, comment=comment,
                  feedback={k: v for k, v in feedback.items() if k != "comment"}, reported_at=reported)


def _timestamp(path: Path, line: int, where: str, value: Any) -> str | None:
    """An ISO 8601 string or Unix seconds (milliseconds when that large), as a UTC ISO stamp."""
    if value is None:
        return None
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = value / 1000 if value > 1e11 else value
            stamp = dt.datetime.fromtimestamp(seconds, dt.UTC)
        elif isinstance(value, str):
            stamp = dt.datetime.fromisoformat(value.strip())
            stamp = stamp.replace(tzinfo=dt.UTC) if stamp.tzinfo is None else stamp.astimezone(dt.UTC)
        else:
            raise ValueError(type(value).__name__)
    except (ValueError, OverflowError, OSError):
        raise InputError(path, line, where, f"not a timestamp: {str(value)[:40]!r} (ISO 8601 or Unix seconds)"
                         ) from None
    return stamp.isoformat(timespec="microseconds")

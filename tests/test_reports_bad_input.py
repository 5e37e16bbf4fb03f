"""Malformed field-report files (workbench/reports/read.py): each way a row can be broken stops `workbench reports
import` with exit 2 naming the file, the line and the field, never a traceback or a silently dropped part; with
`--skip-bad` the row is counted and the rows around it are kept. A file-level problem (empty, a CSV header without a
mapped column) stops the import with or without `--skip-bad`. The files are written here, a bad row between good ones.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from clirun import assert_refused, workbench

from hallucination_workbench import main
from workbench.reports import Redactor, read_reports


def chat(question: str, **extra: Any) -> str:
    return json.dumps({"messages": [{"role": "user", "content": question},
                                    {"role": "assistant", "content": "Sydney."}], **extra})


def turn(content: Any, role: Any = "user") -> str:
    return json.dumps({"messages": [{"role": role, "content": content}]})


#: (case, the bad line 2 of a chat JSONL, what the error says after "line 2: ").
BAD_ROWS = [
    ("row-not-an-object", "[1, 2]", "expected a JSON object, got list"),
    ("messages-not-a-list", json.dumps({"messages": {"role": "user", "content": "hi"}}),
     "field `messages`: must be a non-empty list"),
    ("role-not-a-string", turn("hi", role=5), "field `messages[0].role`: must be a string, got int"),
    ("role-unknown", turn("hi", role="bot"), "field `messages[0].role`: unknown role `bot`. (roles: system, "),
    ("content-part-a-bare-string", turn(["What is", {"type": "text", "text": "x?"}]),
     "field `messages[0].content[0]`: must be a content part"),
    ("content-part-text-not-a-string", turn([{"type": "text", "text": 5}]),
     "field `messages[0].content[0].text`: must be a string, got int"),
    ("content-part-without-type", turn([{"text": "What is x?"}]), "field `messages[0].content[0].type`: missing"),
    ("content-an-object", turn({"type": "text", "text": "hi"}),
     "field `messages[0].content`: must be a string or a list of content parts, got dict"),
    ("rating-nan", '{"messages": [{"role": "user", "content": "hi"}], "rating": NaN}',
     "field `rating`: must be a finite number"),
    ("question-not-text", '{"question": true}', "field `question`: must be text, got bool"),  # a row by columns
]


def import_here(path: Path, ws: Path, *args: str) -> tuple[int, str, str]:
    """`workbench reports import PATH ARGS --json` in this process (the same `main`; a process start costs 1-3 s):
    (exit code, stdout, stderr). A traceback would raise here and fail the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["reports", "import", str(path), *args, "--workspace", str(ws), "--json"])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("case", "bad", "says"), BAD_ROWS, ids=[c[0] for c in BAD_ROWS])
def test_a_bad_row_is_named_and_skip_bad_counts_it(case: str, bad: str, says: str, tmp_path: Path) -> None:
    path = tmp_path / f"{case}.jsonl"
    path.write_text("\n".join([chat("What is the capital of Australia?"), bad, chat("Who wrote Dune?")]) + "\n",
                    encoding="utf-8")
    code, _, err = import_here(path, tmp_path / "ws")
    assert code == 2 and f"{path}, line 2: {says}" in err and "--skip-bad" in err, err
    code, out, err = import_here(path, tmp_path / "ws", "--skip-bad")
    assert code == 0, err
    got = json.loads(out)
    assert (got["read"], got["added"], got["skipped_bad"]) == (2, 2, 1)
    assert len(got["bad"]) == 1 and got["bad"][0].startswith(f"{path}, line 2: {says}"), got["bad"]


def test_text_parts_are_joined_and_other_parts_left_out(tmp_path: Path) -> None:
    path = tmp_path / "parts.jsonl"
    path.write_text(turn([{"type": "text", "text": "What is"}, {"type": "image_url", "image_url": {"url": "x"}},
                          {"type": "text", "text": "x?"}]) + "\n", encoding="utf-8")
    [report] = list(read_reports(path, columns={}, redactor=Redactor(), imported_at="now"))
    assert not isinstance(report, Exception) and report.question == "What is\nx?"


def test_a_row_that_is_not_utf8_is_named_by_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    latin1 = b'{"messages": [{"role": "user", "content": "caf\xe9?"}]}\n'
    path.write_bytes((chat("Who wrote Dune?") + "\n").encode() + latin1)
    code, _, err = import_here(path, tmp_path / "ws")
    assert code == 2 and f"{path}, line 2: not valid UTF-8 (byte 0xe9" in err, err
    csv = tmp_path / "latin1.csv"
    csv.write_bytes(b"prompt,reply\nWho wrote Dune?,Herbert\nWhat is caf\xe9?,x\n")
    code, _, err = import_here(csv, tmp_path / "ws", "--columns", "question=prompt")
    assert code == 2 and f"{csv}, line 3: field `prompt`: not valid UTF-8 (byte 0xe9)" in err, err


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"\n  \n"], ids=["empty", "bom-only", "blank-lines"])
def test_an_empty_file_is_refused_naming_it(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "flagged.jsonl"
    path.write_bytes(content)
    for flags in ((), ("--skip-bad",)):
        code, _, err = import_here(path, tmp_path / "ws", *flags)
        assert code == 2 and f"{path}: the file is empty" in err, err


def test_a_mapped_column_missing_from_the_csv_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tickets.csv"
    path.write_text("prompt,bot_reply\nWho wrote Dune?,Herbert\n", encoding="utf-8")
    for flags in ((), ("--skip-bad",)):  # a header is no row to skip: every row would read the answer as absent
        code, _, err = import_here(path, tmp_path / "ws", "--columns", "question=prompt,answer=bot_replyy", *flags)
        assert code == 2 and f"{path}, line 1: field `bot_replyy`: --columns maps `answer`" in err, err
        assert "Did you mean `bot_reply`?" in err and "Header: prompt, bot_reply" in err
    assert import_here(path, tmp_path / "ws", "--columns", "question=prompt,answer=bot_reply")[0] == 0


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    csv, jsonl = tmp_path / "excel.csv", tmp_path / "bom.jsonl"
    csv.write_bytes(b"\xef\xbb\xbfprompt,bot_reply\r\nWho wrote Dune?,Herbert\r\n")  # as Excel saves "CSV UTF-8"
    jsonl.write_bytes(b"\xef\xbb\xbf" + chat("Who painted the Mona Lisa?").encode() + b"\n")
    for path, args in ((csv, ("--columns", "question=prompt,answer=bot_reply")), (jsonl, ())):
        code, out, err = import_here(path, tmp_path / "ws", *args)
        assert code == 0 and json.loads(out)["added"] == 1, err
    [report] = list(read_reports(csv, columns={"question": "prompt", "answer": "bot_reply"}, redactor=Redactor(),
                                 imported_at="now"))
    assert not isinstance(report, Exception) and (report.question, report.answer) == ("Who wrote Dune?", "Herbert")


def test_the_command_names_the_first_bad_row_and_skip_bad_counts_them_all(tmp_path: Path) -> None:
    """As a user runs it: every bad row above in one export, between good rows."""
    path = tmp_path / "flagged.jsonl"
    lines = [chat("What is the capital of Australia?")]
    for k, (_, bad, _) in enumerate(BAD_ROWS):
        lines += [bad, chat(f"Question {k}?")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ws = str(tmp_path / "ws")
    assert_refused(workbench("reports", "import", str(path), "--workspace", ws, timeout=60),
                   f"{path}, line 2: {BAD_ROWS[0][2]}", "--skip-bad")
    proc = workbench("reports", "import", str(path), "--skip-bad", "--workspace", ws, "--json", timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert (got["read"], got["skipped_bad"]) == (len(BAD_ROWS) + 1, len(BAD_ROWS))
    for k, (_, _, says) in enumerate(BAD_ROWS):
        assert f"{path}, line {2 * k + 2}: {says}" in "\n".join(got["bad"]), (k, got["bad"])

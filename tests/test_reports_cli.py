"""`workbench reports import|list|show|decide|export` as a user runs them (subprocesses with time limits), on an
export written to look like the real ones: system prompts, multi-turn chats, OpenAI text parts, non-English,
duplicates, personal data, and broken rows between good ones (tests/data/reports)."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from clirun import assert_refused, workbench

from hallucination_workbench import main

DATA = Path(__file__).parent / "data" / "reports"
CHAT = DATA / "chat_export.jsonl"
CSV = DATA / "tickets.csv"
TIMEOUT = 60
GOOD_LINES = (1, 2, 3, 6, 7, 10, 11)  # the export's good rows; the others are broken on purpose


def wb(ws: Path, *args: str, here: bool = False) -> Any:
    """`workbench reports ARGS --json` as a subprocess; `here`: in this process (the same `main`), for the steps
    that only set a test up, since every process start costs 1-3 s on a busy machine."""
    argv = ["reports", *args, "--workspace", str(ws), "--json"]
    if here:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        return json.loads(out.getvalue())
    proc = workbench(*argv, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def queue(ws: Path, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = wb(ws, "list", *args)
    return out


def ids(ws: Path) -> dict[str, str]:
    """Each report's asked question -> its id (one `list` for a whole test: each command is a process)."""
    return {r["question"]: r["id"] for r in queue(ws)["reports"]}


def find(ids: dict[str, str], needle: str) -> str:
    found = [i for q, i in ids.items() if needle in q]
    assert found, needle
    return found[0]


def test_a_bad_row_stops_the_import_naming_file_line_and_field(tmp_path: Path) -> None:
    proc = workbench("reports", "import", str(CHAT), "--workspace", str(tmp_path / "ws"), timeout=TIMEOUT)
    assert_refused(proc, "chat_export.jsonl, line 4", "field `messages[0].role`", "Did you mean `user`?",
                   "--skip-bad")
    assert not (tmp_path / "ws" / "store.sqlite").exists() or sqlite3.connect(tmp_path / "ws" / "store.sqlite") \
        .execute("SELECT COUNT(*) FROM field_reports").fetchone()[0] == 0  # nothing half-imported


def test_import_skips_bad_rows_counting_them_groups_duplicates_and_redacts(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    out = wb(ws, "import", str(CHAT), "--skip-bad", "--redact-pii", "--redact", r"conv-000[17]")
    assert (out["read"], out["added"], out["skipped_bad"]) == (7, 7, 5)
    bad = "\n".join(out["bad"])
    for needle in ("line 4: field `messages[0].role`", "line 5: field `messages`: must be a non-empty list",
                   "line 8: field `messages`: no user turn", "line 9: field `timestamp`: not a timestamp",
                   "line 12: bad JSON"):
        assert needle in bad, (needle, bad)
    assert out["redacted"] == {"email": 1, "phone": 1, "pattern 1": 2}
    assert out["questions"] == 6  # the two Australia reports ask one question
    store = (ws / "store.sqlite").read_bytes()
    for secret in (b"jo.doe@example.com", b"7946", b"conv-0001", b"conv-0007"):
        assert secret not in store  # redacted before anything was stored, the original content included
    again = wb(ws, "import", str(CHAT), "--skip-bad")  # the same rows, without redaction: nothing new, nothing leaks
    assert (again["added"], again["already"]) == (0, 7)
    assert b"jo.doe@example.com" not in (ws / "store.sqlite").read_bytes()


def test_show_keeps_source_line_context_and_the_asked_turn(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    wb(ws, "import", str(CHAT), "--skip-bad", here=True)
    known = ids(ws)
    dune = wb(ws, "show", find(known, "first published"))
    assert (Path(dune["source"]).name, dune["line"]) == ("chat_export.jsonl", 3)
    assert [m["role"] for m in dune["messages"]] == ["system", "user", "assistant", "user"]  # "thanks" is not it
    assert dune["messages"][1]["content"] == "Who wrote the novel Dune?"  # text parts joined
    assert dune["answer"] == "Dune was first published in 1972."
    assert dune["comment"] == "The year is wrong: 1965." and dune["reported_at"].startswith("2026-11-03T07:00")
    assert json.loads(json.dumps(dune["original"]))["conversation_id"] == "conv-0003"
    german = wb(ws, "show", find(known, "Zugspitze"), here=True)
    assert german["messages"][0] == {"role": "system", "content": "Antworte auf Deutsch."}
    text = workbench("reports", "show", find(known, "长城"), "--workspace", str(ws), timeout=TIMEOUT)
    assert text.returncode == 0 and "长城全长约一千公里" in text.stdout and "line 7" in text.stdout


@pytest.mark.slow  # over 5 s on 2 cores
def test_decide_then_export_a_field_suite_with_provenance_that_loads(tmp_path: Path) -> None:
    ws, suite = tmp_path / "ws", tmp_path / "field"
    wb(ws, "import", str(CHAT), "--skip-bad", here=True)
    listed = queue(ws)
    assert listed["counts"] == {"new": 7, "decided": 0, "promoted": 0}
    known = {r["question"]: r["id"] for r in listed["reports"]}
    made = wb(ws, "decide", find(known, "Australia"), "--decision", "hallucinated", "--answer", "Canberra",
              "--reviewer", "ann", "--note", "checked")
    assert len(made) == 2  # the duplicate was decided with it
    wb(ws, "decide", find(known, "first published"), "--decision", "hallucinated", "--answer", "1965",
       "--reviewer", "ann", here=True)
    wb(ws, "decide", find(known, "Carthage"), "--decision", "should-refuse", "--reviewer", "bo", here=True)
    wb(ws, "decide", find(known, "poem"), "--decision", "not-factual", "--reviewer", "bo", here=True)
    assert wb(ws, "list", here=True)["counts"] == {"new": 2, "decided": 5, "promoted": 0}
    out = wb(ws, "export", "--suite", str(suite))
    assert (out["probes"], out["reports"], out["not_factual"], out["undecided"]) == (3, 4, 1, 2)
    assert queue(ws)["counts"] == {"new": 2, "decided": 1, "promoted": 4}
    rows = {r["answers"][0]: r for r in map(json.loads, (suite / "probes.jsonl").read_text().splitlines())}
    assert set(rows) == {"Canberra", "1965", "I don't know"}
    assert len(rows["Canberra"]["provenance"]["reports"]) == 2
    assert rows["Canberra"]["provenance"]["reviewer"] == "ann" and rows["Canberra"]["provenance"]["note"] == "checked"
    # Not every exported conversation had the same system prompt, so each keeps its own in its question.
    assert rows["Canberra"]["question"].startswith("system: You are Acme's support assistant.")
    assert "I don't know" in rows and not rows["I don't know"]["question"].startswith("system:")
    assert rows["1965"]["question"].endswith("user: And in which year was it first published?")
    assert "assistant: Frank Herbert wrote Dune." in rows["1965"]["question"]
    assert "field:should-abstain" in rows["I don't know"]["tags"]
    validated = workbench("validate", str(suite / "suite.yaml"), timeout=TIMEOUT)  # the project's own loader
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert "suite field: 3 probes" in validated.stdout, validated.stdout
    assert "template: chat" in (suite / "suite.yaml").read_text()
    wb(ws, "export", "--suite", str(tmp_path / "judged"), "--judge", "judge-model-dir", here=True)
    judged = (tmp_path / "judged" / "suite.yaml").read_text()
    assert "grader: match-judge" in judged and "model: judge-model-dir" in judged and "backend: hf" in judged
    # deciding a promoted report again makes it `decided` until the next export
    wb(ws, "decide", find(known, "Carthage"), "--decision", "hallucinated", "--answer", "unknown",
       "--reviewer", "bo", here=True)
    assert [r["question"][:8] for r in wb(ws, "list", "--status", "decided", here=True)["reports"]] == \
        ["Write me", "What was"]


def test_decide_refuses_a_factual_decision_without_a_reference(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    wb(ws, "import", str(CHAT), "--skip-bad", here=True)
    rid = find({r["question"]: r["id"] for r in wb(ws, "list", here=True)["reports"]}, "Zugspitze")
    for extra, needle in (([], "needs the reference answer"), (["--answer", "x", "--abstain"], "together"),
                          (["--abstain"], None)):
        proc = workbench("reports", "decide", rid, "--decision", "correct", *extra, "--workspace", str(ws),
                         timeout=TIMEOUT)
        assert_refused(proc, needle or "should-refuse")
    assert_refused(workbench("reports", "show", "rep-nope", "--workspace", str(ws), timeout=TIMEOUT), "no report")
    assert_refused(workbench("reports", "export", "--suite", str(tmp_path / "s"), "--workspace", str(ws),
                             timeout=TIMEOUT), "no decided factual report")


@pytest.mark.slow  # over 5 s on 2 cores
def test_csv_by_columns_and_filters_by_source_and_date(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    cols = "question=prompt,answer=bot_reply,comment=user_note,timestamp=created,conversation_id=ticket"
    proc = workbench("reports", "import", str(CSV), "--columns", cols, "--workspace", str(ws), timeout=TIMEOUT)
    assert_refused(proc, "tickets.csv, line 4", "field `prompt`", "blank")
    out = wb(ws, "import", str(CSV), "--columns", cols, "--skip-bad", "--redact-pii")
    assert (out["added"], out["skipped_bad"], out["redacted"]) == (2, 2, {"email": 1})
    assert "line 5: field `created`: not a timestamp" in "\n".join(out["bad"])
    wb(ws, "import", str(CHAT), "--skip-bad", here=True)
    assert len(queue(ws, "--source", "tickets")["reports"]) == 2
    since = wb(ws, "list", "--since", "2026-11-05", "--until", "2026-11-06", here=True)["reports"]
    assert sorted(r["question"][:5] for r in since) == ["What ", "Write"]
    mona = wb(ws, "show", find({r["question"]: r["id"] for r in wb(ws, "list", here=True)["reports"]}, "Mona Lisa"),
              here=True)
    assert mona["answer"] == "Michelangelo painted it." and mona["feedback"]["conversation_id"] == "T-101"
    assert_refused(workbench("reports", "import", str(CSV), "--columns", "questoin=prompt", "--workspace", str(ws),
                             timeout=TIMEOUT), "`questoin` is not a report field", "Did you mean `question`?")
    assert_refused(workbench("reports", "list", "--since", "yesterday", "--workspace", str(ws), timeout=TIMEOUT),
                   "not an ISO date")
    assert_refused(workbench("reports", "import", str(CSV), "--redact", "(", "--workspace", str(ws),
                             timeout=TIMEOUT), "not a valid regular expression")


def test_a_10_mb_export_imports_in_seconds(tmp_path: Path) -> None:
    # Made here, not shipped: the shipped rows repeated with distinct questions until the file passes 10 MB.
    big = tmp_path / "big.jsonl"
    lines = CHAT.read_text(encoding="utf-8").splitlines()
    good = [json.loads(lines[n - 1]) for n in GOOD_LINES]
    filler = " ".join(["context"] * 120)
    with big.open("w", encoding="utf-8") as f:
        i = 0
        while f.tell() < 10 * 1024 * 1024:
            row = json.loads(json.dumps(good[i % len(good)]))
            row["messages"].insert(0, {"role": "system", "content": filler})
            last_user = max(k for k, m in enumerate(row["messages"]) if m["role"] == "user")
            row["messages"][last_user]["content"] = f"Question number {i // 3}?"  # every third repeats one
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            i += 1
    start = time.monotonic()
    out = wb(tmp_path / "ws", "import", str(big))
    took = time.monotonic() - start
    assert out["added"] == i and out["questions"] < i
    assert took < 45, took  # measured 6-8 s on 2 busy cores
    big.unlink()

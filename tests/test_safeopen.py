"""Every user input opened one safe way (workbench.safeopen): FIFOs, devices and symlinks to them refused before
any read (a FIFO would hang a plain open), sizes checked before reading, long lines refused in bounded reads,
symlinks inside a corpus directory refused unless allowed. The library first, then the commands as a user
runs them (subprocesses with a hard limit: a hang fails the test instead of the suite)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from clirun import assert_refused, workbench

from finetune.fixset import build_fixset
from workbench.attribution.corpus import open_corpus
from workbench.errors import WorkbenchError
from workbench.probes._readers import read_records
from workbench.safeopen import (
    UnsafeInputError,
    iter_lines,
    member_files,
    open_input,
    read_bounded,
    read_input,
    read_input_text,
)

LIMIT_S = 60  # a command that hangs on a FIFO is killed here and the test fails


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe.yaml"
    os.mkfifo(p)
    return p


@pytest.fixture
def zero_link(tmp_path: Path) -> Path:
    p = tmp_path / "zero.yaml"
    p.symlink_to("/dev/zero")
    return p


def test_a_fifo_is_refused_at_once_not_opened(fifo: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(UnsafeInputError, match=r"pipe.yaml: is a FIFO \(named pipe\), not a regular file"):
        read_input(fifo, max_bytes=100)
    assert time.monotonic() - t0 < 1.0


def test_devices_and_links_to_them_are_refused(zero_link: Path, tmp_path: Path) -> None:
    with pytest.raises(UnsafeInputError, match="is a character device"):
        read_input(zero_link, max_bytes=100)
    with pytest.raises(UnsafeInputError, match="is a directory"):
        read_input(tmp_path, max_bytes=100)


def test_size_is_checked_before_reading_and_while_reading(tmp_path: Path) -> None:
    p = tmp_path / "big.txt"
    p.write_bytes(b"x" * 101)
    with pytest.raises(UnsafeInputError, match=r"big.txt: 101 bytes; a file may be at most 100"):
        read_input(p, max_bytes=100)
    assert read_input(p, max_bytes=101) == b"x" * 101
    with open_input(p, max_bytes=200) as f:  # the file grows after the size check: the read stops at the cap
        p.write_bytes(b"y" * 300)
        with pytest.raises(UnsafeInputError, match="more than 200 bytes"):
            read_bounded(f, p, max_bytes=200)


def test_a_symlink_itself_is_refused_when_links_are_not_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("ok")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert read_input(link, max_bytes=10) == b"ok"
    with pytest.raises(UnsafeInputError, match="is a symbolic link"):
        read_input(link, max_bytes=10, follow_symlinks=False)


def test_utf16_and_bad_utf8_are_named(tmp_path: Path) -> None:
    p = tmp_path / "t.txt"
    p.write_text('{"question": "q", "answer": "a"}\n', encoding="utf-16")
    with pytest.raises(UnsafeInputError, match=r"is UTF-16 \(byte-order mark\); save it as UTF-8"):
        read_input_text(p)
    p.write_bytes(b"ok\n\xff\n")
    with pytest.raises(UnsafeInputError, match=r"not valid UTF-8 .* at byte 3"):
        read_input_text(p)
    p.write_bytes(b"\xef\xbb\xbfok")
    assert read_input_text(p) == "ok"


def test_long_lines_are_skipped_in_bounded_reads(tmp_path: Path) -> None:
    p = tmp_path / "c.txt"
    p.write_bytes(b"short\n" + b"x" * 5000 + b"\nafter\n" + b"y" * 5000)
    with p.open("rb") as f:
        got = list(iter_lines(f, max_line=100))
    assert got == [(6, b"short\n"), (5001, None), (6, b"after\n"), (5000, None)]
    assert sum(n for n, _ in got) == p.stat().st_size  # offsets stay exact for a resumed index build


def test_corpus_directory_refuses_symlinks_unless_allowed(tmp_path: Path) -> None:
    d = tmp_path / "corpus"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("Alpha is in Beta.")
    (d / "sub" / "b.txt").write_text("Gamma.")
    outside = tmp_path / "secret.txt"
    outside.write_text("root:x:0:0")
    (d / "leak.txt").symlink_to(outside)
    with pytest.raises(UnsafeInputError, match=r"leak.txt is a symbolic link; .* --follow-symlinks"):
        member_files(d, ".txt")
    assert [p.name for p in member_files(d, ".txt", follow_symlinks=True)] == ["a.txt", "leak.txt", "b.txt"]
    (d / "leak.txt").unlink()
    (d / "loop").symlink_to(d)  # a linked folder: refused, and followed only once when allowed
    with pytest.raises(UnsafeInputError, match="loop is a symbolic link"):
        open_corpus(d)
    assert len(member_files(d, ".txt", follow_symlinks=True)) == 2
    (d / "loop").unlink()
    os.mkfifo(d / "pipe.txt")
    with pytest.raises(UnsafeInputError, match=r"pipe.txt: is a FIFO"):
        open_corpus(d)


def test_probe_readers_refuse_a_json_array_too_large_to_parse_and_a_parquet_bomb(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "zeros.json"
    p.write_text("[" + "0," * 10_000_001 + "0]")  # 20 MB, 10M values: refused before json parses it
    t0 = time.monotonic()
    with pytest.raises(WorkbenchError, match="more than 10,000,000 values; write it as JSON Lines"):
        list(read_records(p, "json"))
    assert time.monotonic() - t0 < 5
    n = 300  # 300 rows of one 1 MB string: under 1 KB on disk, 300 MB decoded
    col = pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array(["x" * 1_000_000]))
    bomb = tmp_path / "bomb.parquet"
    pq.write_table(pa.table({"question": col, "answer": ["a"] * n}), bomb, compression="zstd")
    assert bomb.stat().st_size < 5000
    with pytest.raises(WorkbenchError, match="bytes once decoded"):
        list(read_records(bomb, "parquet"))


def test_fix_facts_in_utf16_or_nested_deep_is_a_clean_error(tmp_path: Path) -> None:
    """--facts is read before the run is looked up: no store is needed to reach its reader."""
    facts = tmp_path / "facts.jsonl"
    facts.write_text('{"question": "q", "answer": "a"}\n', encoding="utf-16")
    with pytest.raises(WorkbenchError, match="is UTF-16"):
        build_fixset(None, "run", tmp_path / "out", facts=facts)  # type: ignore[arg-type]
    facts.write_text('{"question": "q", "answer": ' + "[" * 1000 + "]" * 1000 + "}\n")
    with pytest.raises(WorkbenchError, match=r"facts.jsonl, line 1: .*nested deeper than"):
        build_fixset(None, "run", tmp_path / "out", facts=facts)  # type: ignore[arg-type]


# The commands as a user runs them: each input role through a FIFO and a link to /dev/zero.
@pytest.mark.parametrize("kind", ["fifo", "zero_link"])
@pytest.mark.parametrize(("argv", "needle"), [
    (["train", "{f}"], "is a "),
    (["regress", "--baseline", "x", "--candidate", "y", "--policy", "{f}"], "is a "),
    (["validate", "{f}.jsonl"], "is a "),
    (["index", "{f}.jsonl"], "is a "),
    (["app", "--host", "0.0.0.0", "--auth-file", "{f}"], "is a "),
])
def test_commands_refuse_non_regular_inputs_without_hanging(kind: str, argv: list[str], needle: str,
                                                            tmp_path: Path) -> None:
    target = tmp_path / "in"
    if "{f}.jsonl" in argv:
        target = tmp_path / "in.jsonl"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    args = [a.replace("{f}.jsonl", str(target)).replace("{f}", str(target)) for a in argv]
    proc = workbench(*args, "--workspace", str(tmp_path / "ws"), timeout=LIMIT_S)
    assert_refused(proc, target.name, needle, "not a regular file")


def test_index_refuses_a_symlink_in_a_corpus_directory_and_indexes_nothing(tmp_path: Path) -> None:
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "a.txt").write_text("Alpha is the capital of Beta.")
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret")
    (d / "z.txt").symlink_to(secret)
    ws = tmp_path / "ws"
    proc = workbench("index", str(d), "--workspace", str(ws), timeout=LIMIT_S)
    assert_refused(proc, "z.txt is a symbolic link", "--follow-symlinks")
    assert not any(ws.rglob("*.sqlite"))
    ok = workbench("index", str(d), "--workspace", str(ws), "--follow-symlinks", "--json", timeout=LIMIT_S)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert json.loads(ok.stdout)["rows_total"] == 2


def test_index_skips_an_overlong_line_as_a_bad_row(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"Alpha is in Beta.\n" + b"x" * (2 << 20) + b"\nGamma is in Delta.\n")
    proc = workbench("index", str(corpus), "--workspace", str(tmp_path / "ws"), timeout=LIMIT_S)
    assert_refused(proc, "c.txt, line 2", "longer than 1,048,576 bytes")
    ok = workbench("index", str(corpus), "--workspace", str(tmp_path / "ws"), "--skip-bad", "--json",
                   timeout=LIMIT_S)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert (json.loads(ok.stdout)["rows_total"], json.loads(ok.stdout)["skipped"]) == (2, 1)

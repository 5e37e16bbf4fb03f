"""Generic probe files (JSONL, JSON, CSV, Parquet), Hugging Face datasets, and strict bad-row handling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workbench.errors import InputError, WorkbenchError
from workbench.probes import LoadResult, load_probes

DATA = Path(__file__).parent / "data" / "formats"


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_fields_unicode_and_default_ids() -> None:
    result = load_probes(DATA / "probes.jsonl")
    assert isinstance(result, LoadResult)
    assert (result.skipped, result.problems, result.source) == (0, (), str(DATA / "probes.jsonl"))
    first, second, third = result.probes
    assert first.id == "cap-fr" and first.answers == ("Paris", "paris, France")
    assert first.paraphrases == ("France's capital city is?",)
    assert (first.subject, first.relation, first.tags, first.source) == (
        "France",
        "capital",
        ("geo",),
        "probes.jsonl",
    )
    assert second.id == "probes-1"  # no id: "<stem>-<row index>"
    assert second.question == 'Who wrote "Faust"?' and second.incorrect_answers == ("Schiller",)
    assert third.id == "7" and third.answers == ("Tōkyō", "東京", "Tokyo")


def test_csv_quoting_newlines_lists_and_unicode() -> None:
    probes = {p.id: p for p in load_probes(DATA / "probes.csv").probes}
    assert probes["q1"].question == 'Which city is called "the Big Apple"?'
    assert probes["q1"].answers == ("New York", "New York City")  # a JSON list in a cell
    assert probes["q1"].tags == ("city", "nickname")
    assert probes["q2"].answers == ("Rhine", "Rhein") and probes["q2"].subject == "Köln"  # `;`-separated
    assert probes["q3"].question == "A question\nover two lines, with a comma?"
    assert probes["q3"].answers == ("yes, indeed", "yes")
    assert probes["q4"].answers == ("Leonardo da Vinci",) and probes["q4"].paraphrases == ()


@pytest.mark.parametrize(
    ("line", "field", "problem"),
    [
        (2, "answers", "missing"),
        (3, "answers", "must be a list of strings"),
        (4, "answers", "empty"),
        (5, None, "bad JSON"),
        (6, "id", "duplicate id `ok-1` (first on line 1)"),
        (7, None, "not valid UTF-8 (byte 0xe9"),
        (8, "question", "blank"),
        (9, None, "expected a JSON object"),
    ],
)
def test_jsonl_each_bad_row_names_file_line_and_field(
    tmp_path: Path, line: int, field: str | None, problem: str
) -> None:
    # keep line 1 (the first `ok-1`) and the bad line; blank the rest so line numbers stay put
    lines = (DATA / "bad.jsonl").read_bytes().split(b"\n")
    kept = [x if i in (0, line - 1) else b"" for i, x in enumerate(lines)]
    path = tmp_path / "one.jsonl"
    path.write_bytes(b"\n".join(kept))
    with pytest.raises(InputError) as info:
        load_probes(path)
    err = info.value
    assert (err.line, err.field) == (line, field)
    assert problem in err.problem
    assert str(err).startswith(f"{path}, line {line}: ")


def test_jsonl_skip_bad_counts_and_keeps_messages() -> None:
    result = load_probes(DATA / "bad.jsonl", skip_bad=True)
    assert [p.id for p in result.probes] == ["ok-1", "ok-2"]
    assert result.skipped == 8 and len(result.problems) == 8
    assert [int(m.split("line ")[1].split(":")[0]) for m in result.problems] == [2, 3, 4, 5, 6, 7, 8, 9]


def test_jsonl_stops_at_first_bad_row_without_skip_bad() -> None:
    with pytest.raises(InputError, match=r"bad\.jsonl, line 2: field `answers`: missing"):
        load_probes(DATA / "bad.jsonl")


def test_csv_bad_rows_use_record_start_lines() -> None:
    result = load_probes(DATA / "bad.csv", skip_bad=True)
    assert [p.id for p in result.probes] == ["ok-1", "ok-2"]
    expected = [
        (3, "field `answers`: empty"),  # a quoted record spanning lines 3-4
        (5, "4 fields, the header has 3"),
        (6, "field `question`: blank"),
        (7, "field `answers`: bad JSON list"),
        (8, "field `id`: duplicate id `ok-1` (first on line 2)"),
        (9, "field `question`: not valid UTF-8 (byte 0xe9)"),
    ]
    assert result.skipped == len(expected)
    for message, (line, text) in zip(result.problems, expected, strict=True):
        assert message.startswith(f"{DATA / 'bad.csv'}, line {line}: {text}"), message


def test_unclosed_csv_quote_is_fatal_even_with_skip_bad() -> None:
    with pytest.raises(InputError, match=r"unclosed\.csv, line 3: malformed CSV"):
        load_probes(DATA / "unclosed.csv", skip_bad=True)


def test_problems_keep_only_the_first_twenty(tmp_path: Path) -> None:
    rows = [{"question": f"q{i}", "answers": []} for i in range(30)] + [{"question": "ok", "answers": ["a"]}]
    result = load_probes(_write_jsonl(tmp_path / "many.jsonl", rows), skip_bad=True)
    assert result.skipped == 30 and len(result.problems) == 20 and len(result.probes) == 1


def test_all_rows_bad_is_an_error_even_with_skip_bad(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "allbad.jsonl", [{"question": "q"}])
    with pytest.raises(WorkbenchError, match="every row is bad"):
        load_probes(path, skip_bad=True)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nope.csv", "no such file"),
        ("empty.jsonl", "the file is empty"),
        ("header_only.csv", "no probes in it"),
        ("probes.txt", "cannot tell the file type from the extension `.txt`"),
    ],
)
def test_unreadable_files_give_clear_errors(name: str, message: str) -> None:
    with pytest.raises(WorkbenchError, match=message):
        load_probes(DATA / name)


def test_unknown_format_suggests_the_closest() -> None:
    with pytest.raises(WorkbenchError, match="Did you mean `jsonl`"):
        load_probes(DATA / "probes.jsonl", format="jsnl")


def test_format_names_the_container_for_an_odd_extension(tmp_path: Path) -> None:
    path = tmp_path / "probes.txt"
    path.write_bytes((DATA / "probes.jsonl").read_bytes())
    assert len(load_probes(path, format="jsonl").probes) == 3


def test_column_mapping_and_unknown_column(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "mapped.jsonl", [{"q": "Capital of Peru?", "a": "Lima", "key": "p1"}])
    (probe,) = load_probes(path, columns={"question": "q", "answers": "a", "id": "key"}).probes
    assert (probe.id, probe.question, probe.answers) == ("p1", "Capital of Peru?", ("Lima",))
    with pytest.raises(WorkbenchError, match="Did you mean `q`"):
        load_probes(path, columns={"question": "qq", "answers": "a"})
    with pytest.raises(WorkbenchError, match="probe field"):
        load_probes(path, columns={"questoin": "q"})


def test_unknown_columns_cannot_be_detected(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "odd.jsonl", [{"prompt": "x", "target": "y"}])
    with pytest.raises(WorkbenchError, match=r"cannot tell the probe format .*prompt, target"):
        load_probes(path)


def test_json_array_reports_item_lines(tmp_path: Path) -> None:
    path = tmp_path / "arr.json"
    path.write_text('[\n {"question": "a?", "answers": ["a"]},\n\n {"question": "b?",\n  "answers": []}\n]\n')
    with pytest.raises(InputError) as info:
        load_probes(path)
    assert (info.value.line, info.value.field) == (4, "answers")
    with pytest.raises(InputError, match=r"broken_array\.json, line 3: bad JSON"):
        load_probes(DATA / "broken_array.json", skip_bad=True)


def test_single_pretty_printed_json_object(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text('\n{\n  "question": "Only one?",\n  "answers": ["yes"]\n}\n')
    (probe,) = load_probes(path).probes
    assert (probe.id, probe.answers) == ("one-0", ("yes",))


def test_parquet_round_trip_and_bad_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": ["a", "b", "c"],
            "question": ["Capital of Italy?", "Empty?", "Ünïcode?"],
            "answers": [["Rome", "Roma"], [], ["ja"]],
            "tags": [["geo"], None, None],
        }
    )
    path = tmp_path / "probes.parquet"
    pq.write_table(table, path)
    with pytest.raises(InputError) as info:
        load_probes(path)
    assert (info.value.line, info.value.field) == (2, "answers")  # 1-based row number
    result = load_probes(path, skip_bad=True)
    assert [(p.id, p.answers, p.tags) for p in result.probes] == [
        ("a", ("Rome", "Roma"), ("geo",)),
        ("c", ("ja",), ()),
    ]
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(WorkbenchError, match="could not read Parquet"):
        load_probes(bad)


def test_hf_dataset_with_column_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    calls: list[tuple[Any, ...]] = []

    def fake_load(name: str, config: str | None = None, split: str | None = None) -> Any:
        calls.append((name, config, split))
        rows = [{"q": "Largest planet?", "a": ["Jupiter"]}, {"q": "Smallest planet?", "a": []}]
        return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    result = load_probes("hf:org/planets:main", columns={"question": "q", "answers": "a"}, skip_bad=True)
    assert calls == [("org/planets", "main", None)]
    assert [(p.id, p.answers, p.source) for p in result.probes] == [
        ("planets-0", ("Jupiter",), "hf:org/planets:main")
    ]
    assert result.skipped == 1 and result.problems[0].startswith(
        "hf:org/planets:main, line 2: field `answers`"
    )


def test_hf_dataset_offline_failure_is_a_workbench_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WorkbenchError) as info:
        load_probes("hf:nobody/no-such-set", split="train")
    assert (
        "could not load Hugging Face dataset `nobody/no-such-set` (offline? HF_HUB_OFFLINE is set): "
        in str(info.value)
    )

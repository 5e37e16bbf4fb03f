"""Suite YAML specs, resolve_probes, and the `workbench validate` command."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli import validate
from workbench.errors import InputError, WorkbenchError
from workbench.probes import DEFAULT_ABSTENTIONS, Suite, load_suite, resolve_probes
from workbench.probes import suite as suite_module

DATA = Path(__file__).parent / "data" / "formats"


def _suite_file(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_fixture_suite_defaults_and_relative_data() -> None:
    suite = load_suite(DATA / "suite.yaml")
    assert (suite.name, suite.data, suite.max_tokens, suite.tags) == (
        "fixture-suite",
        "probes.jsonl",
        8,
        ["fixture"],
    )
    assert suite.template == "Question: {question}\nAnswer:"
    assert (suite.format, suite.grader, suite.stop, suite.split) == ("auto", "match", ["\n"], None)
    assert (
        suite.abstention_phrases == list(DEFAULT_ABSTENTIONS) and "i don't know" in suite.abstention_phrases
    )
    assert Path(suite.data_source()) == (DATA / "probes.jsonl").resolve()
    assert Suite.model_fields["template"].description  # every field documented


def test_every_field_has_a_docstring() -> None:
    assert all(f.description for f in Suite.model_fields.values())


def test_resolve_suite_adds_tags_and_loads_relative_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    suite, result = resolve_probes(DATA / "suite.yaml")
    assert suite.name == "fixture-suite" and len(result.probes) == 3
    assert result.probes[0].tags == ("geo", "fixture") and result.probes[2].tags == ("fixture",)


def test_unknown_key_names_file_and_suggests(tmp_path: Path) -> None:
    path = _suite_file(tmp_path, "name: x\ndata: d.jsonl\ntemplte: 'Q: {question}'\n")
    with pytest.raises(WorkbenchError) as info:
        load_suite(path)
    assert str(path) in str(info.value)
    assert "unknown key `templte`. Did you mean `template`?" in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "missing required key `data`"),
        ("name: x\ndata: d.jsonl\ntemplate: 'Answer:'\n", "`template`: must contain {question}"),
        ("name: x\ndata: d.jsonl\ntemplate: 'Q: {question'\n", "`template`: bad template"),
        ("name: x\ndata: d.jsonl\nformat: truthfulq\n", "Did you mean `truthfulqa`?"),
        ("name: x\ndata: d.jsonl\ngrader: judg\n", "Did you mean `judge`?"),
        (
            "name: x\ndata: d.jsonl\nmax_tokens: 0\n",
            "`max_tokens`: Input should be greater than or equal to 1",
        ),
        (
            "name: x\ndata: d.jsonl\nmax_tokens: 5000\n",
            "line 3: `max_tokens`: Input should be less than or equal to 4096",
        ),
        ("name: x\ndata: d.jsonl\nstop: ['.', '']\n", "line 3: `stop`: an empty stop string would end every answer"),
        ("name: x\ndata: d.jsonl\ncolumns: {questoin: q}\n", "`questoin` is not a probe field"),
        ("- name\n- data\n", "a suite must be a YAML mapping"),
        ("name: x\ndata: [unclosed\n", "invalid YAML"),
    ],
)
def test_bad_suites(tmp_path: Path, text: str, message: str) -> None:
    path = _suite_file(tmp_path, text)
    with pytest.raises(WorkbenchError) as info:
        load_suite(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_chat_template_is_accepted(tmp_path: Path) -> None:
    suite = load_suite(
        _suite_file(tmp_path, "name: x\ndata: d.jsonl\ntemplate: chat\nsystem_prompt: Be brief.\n")
    )
    assert (suite.template, suite.system_prompt) == ("chat", "Be brief.")


def test_yaml_is_loaded_safely(tmp_path: Path) -> None:
    path = _suite_file(tmp_path, "name: !!python/object/apply:os.system ['echo pwned']\ndata: d.jsonl\n")
    with pytest.raises(WorkbenchError, match="invalid YAML"):
        load_suite(path)


def test_suite_by_name_and_unknown_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "probes.jsonl").write_bytes((DATA / "probes.jsonl").read_bytes())
    _suite_file(tmp_path, "name: capitals\ndata: probes.jsonl\n", "capitals.yaml")
    monkeypatch.setattr(suite_module, "suites_dir", lambda: tmp_path)
    assert load_suite("capitals").name == "capitals"
    suite, result = resolve_probes("capitals")
    assert suite.name == "capitals" and len(result.probes) == 3
    with pytest.raises(WorkbenchError, match=r"unknown suite `capitls`\. Did you mean `capitals`\?"):
        load_suite("capitls")


def test_missing_suite_file() -> None:
    with pytest.raises(WorkbenchError, match="no such suite file"):
        load_suite(DATA / "nope.yaml")


def test_resolve_data_file_gives_default_suite() -> None:
    suite, result = resolve_probes(DATA / "truthfulqa.csv")
    assert (suite.name, suite.template, suite.grader) == ("truthfulqa", "Q: {question} A:", "match")
    assert len(result.probes) == 3
    with pytest.raises(WorkbenchError, match="not a popqa file"):
        resolve_probes(DATA / "truthfulqa.csv", format="popqa")


def test_resolve_bad_data_stops_or_skips() -> None:
    with pytest.raises(InputError, match=r"line 2: field `answers`: missing"):
        resolve_probes(DATA / "bad.jsonl")
    _, result = resolve_probes(DATA / "bad.jsonl", skip_bad=True)
    assert result.skipped == 8


def test_resolve_hf_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    rows = [{"question": "Largest ocean?", "answers": ["Pacific"]}]
    monkeypatch.setattr(
        datasets, "load_dataset", lambda name, config=None, split=None: datasets.Dataset.from_list(rows)
    )
    suite, result = resolve_probes("hf:org/oceans")
    assert (suite.name, suite.data, len(result.probes)) == ("org/oceans", "hf:org/oceans", 1)
    assert result.probes[0].source == "hf:org/oceans"


def _validate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command as the dispatcher does: WorkbenchError -> exit 2 with the message on stderr."""
    parser = argparse.ArgumentParser()
    validate.add_arguments(parser)
    try:
        code = validate.run(parser.parse_args(argv))
    except WorkbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _validate(capsys, str(DATA / "suite.yaml"))
    assert code == 0
    assert "suite fixture-suite: 3 probes" in out and "paraphrases: 1/3 probes (33%)" in out
    assert "fixture 3" in out and "geo 1" in out


def test_validate_json_with_skip_bad(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _validate(capsys, str(DATA / "bad.csv"), "--skip-bad", "--json")
    assert code == 0
    summary = json.loads(out)
    assert set(summary) == {"suite", "n", "skipped", "problems", "tags"}
    assert (summary["suite"], summary["n"], summary["skipped"]) == ("bad", 2, 6)
    assert summary["problems"][0].endswith("line 3: field `answers`: empty: at least one answer is needed")
    _, out, _ = _validate(capsys, str(DATA / "truthfulqa.csv"), "--json")
    assert json.loads(out)["tags"] == {"Adversarial": 2, "Misconceptions": 1, "Proverbs": 1,
                                       "Non-Adversarial": 1, "Language": 1}  # fmt: skip


def test_validate_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _validate(capsys, str(DATA / "bad.jsonl"))
    assert code == 2 and out == ""
    assert "bad.jsonl, line 2: field `answers`: missing" in err
    code, _, err = _validate(capsys, str(DATA / "probes.jsonl"), "--format", "csvv")
    assert code == 2 and "Did you mean `csv`?" in err


def test_imports_stay_light() -> None:
    code = (
        "import sys, workbench.probes, workbench.cli.validate;"
        "heavy = [m for m in ('torch', 'pandas', 'datasets', 'pyarrow') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    root = Path(__file__).parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == ""

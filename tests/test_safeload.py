"""Hostile user files are refused with a message, never expanded, recursed into or half-read."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.prompting import check_template, render
from workbench.safeload import MAX_NODES, json_loads, read_yaml_file, yaml_load

BOMB = """a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""


def test_yaml_anchor_bomb_is_refused_before_it_expands() -> None:
    with pytest.raises(ValueError, match=f"more than {MAX_NODES:,} values"):
        yaml_load(BOMB)


def test_yaml_duplicate_key_names_the_key_and_first_line() -> None:
    with pytest.raises(Exception, match=r"duplicate key `name` \(first on line 1\)"):
        yaml_load("name: a\ndata: x\nname: b\n")


def test_yaml_merge_keys_still_work() -> None:
    assert yaml_load("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n")["other"] == {"x": 1, "y": 2}


def test_yaml_file_errors_name_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "suite.yaml"
    p.write_text("name: a\n  bad: [\n")
    with pytest.raises(ValueError, match=rf"{p.name}, line \d+: invalid YAML"):
        read_yaml_file(p)
    p.write_text("x" * 100)
    with pytest.raises(ValueError, match=r"100 bytes; a spec file may be at most 10$"):
        read_yaml_file(p, max_bytes=10)
    with pytest.raises(ValueError, match="is a directory"):
        read_yaml_file(tmp_path)


@pytest.mark.parametrize(("text", "problem"), [
    ("[" * 5000 + "]" * 5000, "nested deeper"),
    ('{"a": 1, "a": 2}', "duplicate key `a`"),
    ('{"n": ' + "9" * 5000 + "}", "integer of 5000 digits"),
    ('{"q": "\\ud800"}', "lone surrogate"),
])
def test_json_record_problems_are_value_errors(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        json_loads(text)


def test_json_record_size_cap() -> None:
    with pytest.raises(ValueError, match="bytes in one record"):
        json_loads('"' + "x" * (2 << 20) + '"')
    assert json_loads('"' + "x" * (2 << 20) + '"', max_bytes=None) == "x" * (2 << 20)


@pytest.mark.parametrize(("template", "problem"), [
    ("{question:>100000000}", "no format spec"),
    ("{question!r}", "no format spec or conversion"),
    ("{question.__class__.__mro__}", "unknown placeholder"),
    ("{0} {question}", "unknown placeholder `{0}`"),
    ("{other} {question}", "unknown placeholder `{other}`"),
    ("{} {question}", "unknown placeholder `{}`"),
    ("Q: A:", "must contain {question}"),
    ("{question", "bad template"),
])
def test_templates_allow_only_the_question_placeholder(template: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_template(template)


def test_template_rendering() -> None:
    assert render("Q: {question} {{json}} A:", "Why?") == "Q: Why? {json} A:"
    assert render("{question} / {question}", "x") == "x / x"
    assert check_template("chat") == "chat"

"""The known-facts guard pool (evals/data/guard): simple factual questions the project ships, one file per language.
A base model's guard set is the part of the pool it answers right, so every row must load through the project's own
probe loader and grade as written: each accepted answer CORRECT, "I don't know." NOT_ATTEMPTED, no answer given away
by its question, one paraphrase asking the same thing in other words."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from workbench.grading.match import MatchGrader
from workbench.grading.normalize import contains_phrase, normalize
from workbench.probes import resolve_probes
from workbench.probes._row import PROBE_FIELDS
from workbench.types import Probe, Verdict

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "evals" / "data" / "guard"
SOURCE = POOL / "SOURCE.md"
EVERYDAY = ROOT / "tests" / "data" / "formats" / "everyday_facts.jsonl"
#: Rows per language at least (SOURCE.md, "Counts").
MINIMUM = {"en": 420, "fr": 45, "de": 45, "es": 45, "zh": 45}
#: Topic tag name -> the code in the row ids (SOURCE.md, "Topics").
TOPICS = {
    "geography": "geo", "chemistry": "chem", "physics": "phys", "biology": "bio", "body": "body",
    "astronomy": "astro", "arts": "arts", "inventions": "inv", "history": "hist", "maths": "math", "time": "time",
    "languages": "lang", "sports": "sport", "colours": "colour", "food": "food", "objects": "obj", "words": "word",
}
#: Carried-over everyday facts whose question was reworded (its answer stood in the old question).
REWORDED = {"everyday-50"}
ID = re.compile(r"^guard-(en|fr|de|es|zh)-([a-z]+)-(\d{4})$")


@pytest.fixture(scope="module")
def pool() -> dict[str, tuple[Probe, ...]]:
    """Each language's probes as the project's loader reads them (bad rows counted, not raised, to report them all)."""
    out = {}
    for lang in MINIMUM:
        path = POOL / f"everyday_{lang}.jsonl"
        _suite, result = resolve_probes(path, skip_bad=True)
        assert (result.skipped, result.problems) == (0, ()), f"{path.name}: bad rows: {result.problems}"
        assert result.format == "generic", result.format
        out[lang] = result.probes
    return out


def _all(pool: dict[str, tuple[Probe, ...]]) -> list[Probe]:
    return [p for probes in pool.values() for p in probes]


def test_the_pool_holds_one_file_per_language_and_its_source_note() -> None:
    assert sorted(p.name for p in POOL.iterdir()) == sorted(
        ["SOURCE.md", *(f"everyday_{lang}.jsonl" for lang in MINIMUM)]
    )


@pytest.mark.parametrize("lang", sorted(MINIMUM))
def test_each_file_has_only_probe_fields_and_at_least_its_documented_rows(
    lang: str, pool: dict[str, tuple[Probe, ...]]
) -> None:
    lines = (POOL / f"everyday_{lang}.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    # The loader ignores unknown keys: a misspelt field ("paraphrase") would be lost without a word.
    fields = {"id", "question", "answers", "paraphrases", "tags", "language"}
    assert fields <= set(PROBE_FIELDS)
    assert all(set(row) == fields for row in rows), [row["id"] for row in rows if set(row) != fields]
    assert all(isinstance(row["paraphrases"], list) and isinstance(row["answers"], list) for row in rows)
    assert len(pool[lang]) == len(rows) >= MINIMUM[lang]
    assert {p.language for p in pool[lang]} == {lang}


def test_ids_are_unique_across_the_pool_and_name_language_and_topic(pool: dict[str, tuple[Probe, ...]]) -> None:
    probes = _all(pool)
    dup = [i for i, n in Counter(p.id for p in probes).items() if n > 1]
    assert not dup, dup
    codes = {code: name for name, code in TOPICS.items()}
    for lang, rows in pool.items():
        numbers: dict[str, list[int]] = {}
        for p in rows:
            m = ID.match(p.id)
            assert m, p.id
            assert m.group(1) == lang and f"topic:{codes.get(m.group(2))}" in p.tags, p.id
            numbers.setdefault(m.group(2), []).append(int(m.group(3)))
        # numbered 0001, 0002, ... per topic: a new row takes the next number, none is reused
        assert all(sorted(n) == list(range(1, len(n) + 1)) for n in numbers.values()), numbers


def test_tags_name_the_pool_the_language_and_one_documented_topic(pool: dict[str, tuple[Probe, ...]]) -> None:
    source = SOURCE.read_text(encoding="utf-8")
    assert all(f"`topic:{name}`" in source for name in TOPICS), "SOURCE.md lists every topic"
    for lang, rows in pool.items():
        for p in rows:
            assert "guard" in p.tags, p.id
            assert [t for t in p.tags if t.startswith("lang:")] == [f"lang:{lang}"], p.id
            topics = [t.removeprefix("topic:") for t in p.tags if t.startswith("topic:")]
            assert len(topics) == 1 and topics[0] in TOPICS, (p.id, topics)
    used = {t for p in _all(pool) for t in p.tags if t.startswith("topic:")}
    assert used == {f"topic:{name}" for name in TOPICS}


def test_questions_and_paraphrases_are_unique_across_the_pool(pool: dict[str, tuple[Probe, ...]]) -> None:
    seen: dict[str, str] = {}
    clashes = []
    for p in _all(pool):
        for text in p.variants():
            key = normalize(text)
            if key in seen:
                clashes.append((seen[key], p.id, text))
            seen.setdefault(key, p.id)
    assert not clashes, clashes


def test_each_row_has_exactly_one_paraphrase_in_other_words(pool: dict[str, tuple[Probe, ...]]) -> None:
    for p in _all(pool):
        assert len(p.paraphrases) == 1, p.id
        assert normalize(p.paraphrases[0]) != normalize(p.question), p.id


def test_answers_are_short_and_no_question_gives_its_answer_away(pool: dict[str, tuple[Probe, ...]]) -> None:
    for p in _all(pool):
        assert all(1 <= len(a.split()) <= 3 for a in p.answers), (p.id, p.answers)
        for text in p.variants():
            given = [a for a in p.answers if contains_phrase(normalize(text), normalize(a))]
            assert not given, (p.id, text, given)


def test_the_match_grader_takes_every_answer_and_counts_i_dont_know_as_not_attempted(
    pool: dict[str, tuple[Probe, ...]],
) -> None:
    grader = MatchGrader()
    for p in _all(pool):
        wrong = [a for a in p.answers if grader.grade(p, a) is not Verdict.CORRECT]
        assert not wrong, (p.id, wrong)
        assert grader.grade(p, f"The answer is {p.answers[0]}.") is Verdict.CORRECT, p.id
        assert grader.grade(p, "I don't know.") is Verdict.NOT_ATTEMPTED, p.id


def test_the_everyday_facts_are_carried_over_with_their_answers(pool: dict[str, tuple[Probe, ...]]) -> None:
    old = {row["id"]: row for row in map(json.loads, EVERYDAY.read_text(encoding="utf-8").splitlines())}
    carried = {}
    for p in pool["en"]:
        was = [t.removeprefix("was:") for t in p.tags if t.startswith("was:")]
        assert ("everyday" in p.tags) == bool(was), p.id
        if was:
            assert len(was) == 1 and was[0] not in carried, (p.id, was)
            carried[was[0]] = p
    assert set(carried) == set(old)
    for old_id, p in carried.items():
        row = old[old_id]
        assert list(p.answers[: len(row["answers"])]) == row["answers"], (p.id, old_id)
        assert (p.question == row["question"]) == (old_id not in REWORDED), (p.id, old_id)


def test_the_pool_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "data/guard/*" in config["tool"]["setuptools"]["package-data"]["evals"]

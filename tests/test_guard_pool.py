"""The known-facts guard pool (evals/data/guard): simple factual questions the project ships, one or two files per
language.
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
#: Each pool file, its language and its rows at least (SOURCE.md, "Files").
FILES = {
    "everyday_en.jsonl": ("en", 420), "general_en.jsonl": ("en", 1500), "everyday_fr.jsonl": ("fr", 45),
    "everyday_de.jsonl": ("de", 45), "everyday_es.jsonl": ("es", 45), "everyday_zh.jsonl": ("zh", 45),
}
LANGUAGES = ("en", "fr", "de", "es", "zh")
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
def files() -> dict[str, tuple[Probe, ...]]:
    """Each file's probes as the project's loader reads them (bad rows counted, not raised, to report them all)."""
    out = {}
    for name in FILES:
        _suite, result = resolve_probes(POOL / name, skip_bad=True)
        assert (result.skipped, result.problems) == (0, ()), f"{name}: bad rows: {result.problems}"
        assert result.format == "generic", result.format
        out[name] = result.probes
    return out


@pytest.fixture(scope="module")
def pool(files: dict[str, tuple[Probe, ...]]) -> dict[str, tuple[Probe, ...]]:
    """Each language's probes, its files' rows in order."""
    return {lang: tuple(p for name, probes in files.items() if FILES[name][0] == lang for p in probes)
            for lang in LANGUAGES}


def _all(pool: dict[str, tuple[Probe, ...]]) -> list[Probe]:
    return [p for probes in pool.values() for p in probes]


def test_the_pool_holds_its_documented_files_and_its_source_note() -> None:
    assert sorted(p.name for p in POOL.iterdir()) == sorted(["SOURCE.md", *FILES])


def test_the_source_note_gives_each_files_rows_and_each_topics_count(files: dict[str, tuple[Probe, ...]]) -> None:
    """SOURCE.md's "Files" and "Counts" tables say what the files hold (a row added or withdrawn updates both)."""
    source = SOURCE.read_text(encoding="utf-8")
    for name, probes in files.items():
        assert re.search(rf"^\| `{re.escape(name)}` \| [^|]+ \| {len(probes)} \|$", source, re.M), name
    counts = {m.group(1): [c.strip() for c in m.group(2).split("|")[:-1]]
              for m in re.finditer(r"^\| `topic:(\w+)` \|((?: [^|]+ \|)+)$", source, re.M) if "`" not in m.group(2)}
    assert set(counts) == set(TOPICS)
    for topic, cells in counts.items():
        got = [sum(f"topic:{topic}" in p.tags for p in probes) for probes in files.values()]
        assert cells[:-1] == [str(n) if n else "-" for n in got] and cells[-1] == str(sum(got)), (topic, cells, got)


@pytest.mark.parametrize("name", list(FILES))
def test_each_file_has_only_probe_fields_and_at_least_its_documented_rows(
    name: str, files: dict[str, tuple[Probe, ...]]
) -> None:
    lang, minimum = FILES[name]
    lines = (POOL / name).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    # The loader ignores unknown keys: a misspelt field ("paraphrase") would be lost without a word.
    fields = {"id", "question", "answers", "paraphrases", "tags", "language"}
    assert fields <= set(PROBE_FIELDS)
    assert all(set(row) == fields for row in rows), [row["id"] for row in rows if set(row) != fields]
    assert all(isinstance(row["paraphrases"], list) and isinstance(row["answers"], list) for row in rows)
    assert len(files[name]) == len(rows) >= minimum
    assert {p.language for p in files[name]} == {lang}


#: Rows withdrawn from the pool (SOURCE.md, "What the rows avoid"): their numbers are never given to another row.
WITHDRAWN = frozenset({"guard-en-chem-0030", "guard-en-lang-0093", "guard-en-lang-0094", "guard-en-lang-0098",
                       "guard-en-lang-0104", "guard-en-word-0025", "guard-en-word-0056"})


def test_ids_are_unique_across_the_pool_and_name_language_and_topic(pool: dict[str, tuple[Probe, ...]]) -> None:
    probes = _all(pool)
    dup = [i for i, n in Counter(p.id for p in probes).items() if n > 1]
    assert not dup, dup
    assert not WITHDRAWN & {p.id for p in probes}  # withdrawn means gone
    codes = {code: name for name, code in TOPICS.items()}
    for lang, rows in pool.items():
        numbers: dict[str, list[int]] = {}
        for p in rows:
            m = ID.match(p.id)
            assert m, p.id
            assert m.group(1) == lang and f"topic:{codes.get(m.group(2))}" in p.tags, p.id
            numbers.setdefault(m.group(2), []).append(int(m.group(3)))
        for pid in WITHDRAWN:  # a withdrawn row's number stays taken
            m = ID.match(pid)
            if m and m.group(1) == lang:
                numbers.setdefault(m.group(2), []).append(int(m.group(3)))
        # numbered 0001, 0002, ... per language and topic over the language's files: a new row takes the next
        # number, none is reused
        assert all(sorted(n) == list(range(1, len(n) + 1)) for n in numbers.values()), numbers


def test_the_general_facts_continue_each_topics_numbering_and_carry_no_other_tags(
    files: dict[str, tuple[Probe, ...]],
) -> None:
    everyday: dict[str, int] = {}
    for p in files["everyday_en.jsonl"]:
        m = ID.match(p.id)
        assert m, p.id
        everyday[m.group(2)] = max(everyday.get(m.group(2), 0), int(m.group(3)))
    for p in files["general_en.jsonl"]:
        m = ID.match(p.id)
        assert m and int(m.group(3)) > everyday.get(m.group(2), 0), p.id
        topic = next(name for name, code in TOPICS.items() if code == m.group(2))
        assert list(p.tags) == ["guard", "lang:en", f"topic:{topic}"], p.id


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


def test_the_guard_loads_the_whole_shipped_pool(files: dict[str, tuple[Probe, ...]]) -> None:
    """`load_pool` refuses an id or a question asked twice across files: the shipped pool must pass it whole."""
    from workbench.guard.pool import load_pool, shipped_pool

    assert sorted(f.name for f in shipped_pool()) == sorted(FILES)
    assert len(load_pool(shipped_pool())) == sum(map(len, files.values()))


def test_the_pool_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "data/guard/*" in config["tool"]["setuptools"]["package-data"]["evals"]


def test_the_demos_everyday_pool_is_the_everyday_files_alone() -> None:
    from workbench.guard.pool import NONE, everyday_pool, load_pool, pool_files

    given = everyday_pool()
    files = pool_files(given)
    assert given[0] == NONE and len(files) == 5 and all(f.name.startswith("everyday_") for f in files)
    assert len(load_pool(files)) < len(load_pool(pool_files(None)))  # the general file left out

"""Outputs the documentation shows, checked against what the commands print: a page's ```text block is a set of
lines, each of which some line of the real output must start with. In a shown line, UPPER_CASE words (GATE_ID,
CANDIDATE_RUN, N) and numbers stand for the values of one run; everything else must be printed as shown."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def sections(page: Path) -> dict[str, str]:
    """A Markdown page's `## ` sections by heading."""
    parts = re.split(r"^## (.+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def fenced(text: str, lang: str) -> list[str]:
    """The bodies of the ```lang blocks of a Markdown text."""
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def pattern(line: str, flat: bool = False) -> re.Pattern[str]:
    """A shown line as a pattern: UPPER_CASE words and numbers match any value; `flat`: white space left out."""
    parts = re.split(r"\b([A-Z][A-Z_]*|\d+(?:\.\d+)?)\b", line)

    def literal(text: str) -> str:
        return re.escape("".join(text.split()) if flat else text)

    return re.compile("".join(literal(p) if i % 2 == 0 else r"\S+?" if p[0].isdigit() else r"\S+"
                              for i, p in enumerate(parts)))


def assert_shows(lines: list[str], output: str, replace: dict[str, str] | None = None, wrapped: bool = False) -> None:
    """Each shown line (after `replace`, e.g. the default workspace for the test's) starts some line of `output`,
    runs of spaces counted as one. `wrapped`: the output is a terminal's, wrapped at its width (rich breaks lines
    between words and inside long ones): the shown line must then appear in it with all white space left out."""
    printed = [" ".join(out.split()) for out in output.splitlines()]
    flat = "".join(output.split())
    for line in lines:
        for old, new in (replace or {}).items():
            line = line.replace(old, new)
        if wrapped:
            assert pattern(line, flat=True).search(flat), (line, output[-3000:])
            continue
        want = pattern(" ".join(line.split()))
        assert any(want.match(out) for out in printed), (line, output[-3000:])

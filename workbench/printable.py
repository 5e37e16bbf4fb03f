"""Stored text as a terminal may show it.

Reviewer names and reasons typed in the app, probe ids and questions from a user's file, model answers: all of it
is untrusted, and a terminal obeys what it prints. An ESC sequence in a review reason can recolour the screen,
clear it, set the window title or (on some terminals) write to the clipboard; a newline forges a line of output;
a right-to-left override (U+202E) makes text read backwards. `printable` writes every such character as an
escape (`\\x1b`, `\\n`, `\\u202e`) so a reader sees exactly what is stored. JSON output needs none of this:
`json.dumps` escapes control characters itself.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories a terminal may act on rather than show: controls (C0, DEL, C1), format characters
#: (bidirectional overrides, zero-width characters) and the line and paragraph separators.
_ACTIVE = frozenset({"Cc", "Cf", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(value: object, *, lines: bool = False) -> str:
    """`value` as text with every control, format and separator character escaped (None: ""). `lines`: newlines
    are kept (a message of several lines of our own, such as an error naming stored text), everything else a
    terminal acts on is still escaped."""
    text = "" if value is None else str(value)
    if text.isprintable():  # the common case, in C
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _ACTIVE and not (lines and c == "\n") else c
                   for c in text)


def _escape(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def printable_name(value: str, what: str) -> str:
    """`value` stripped, when it holds nothing a terminal acts on (a reviewer name is an identity: shown in
    listings, reports and the app, compared by its exact text); a WorkbenchError naming `what` otherwise."""
    from workbench.errors import WorkbenchError

    name = value.strip()
    if not name.isprintable():
        bad = next(c for c in name if not c.isprintable())
        raise WorkbenchError(f"{what} `{printable(name)}` holds a control or formatting character ({_escape(bad)}); "
                             "a name must be plain printable text")
    return name

"""Redaction of personal data in field reports, applied to every string of a record before anything is stored.

E-mail addresses and phone numbers have built-in patterns (`--redact-pii`); a team adds its own (`--redact REGEX`:
account numbers, ticket ids, names it knows). Each match becomes a placeholder naming its kind, so a reviewer still
sees that something was there; the counts per kind are reported by the import.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from workbench.errors import WorkbenchError

# Deliberately plain: local@domain.tld, no quoted local parts (which exports never hold).
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# A leading + or (, then 7 to 15 digits with spaces, dots, dashes or brackets between them (E.164 allows 15).
# Years and counts in answers ("1969", "12,000") stay: fewer than 7 digits, or a comma inside.
PHONE = re.compile(r"(?<![\w+])(?:\+|\(\d)?\d(?:[\s.()-]{0,2}\d){6,14}(?![\w])")


class Redactor:
    """The patterns an import applies, in order, and how many matches of each it replaced."""

    def __init__(self, *, pii: bool = False, patterns: Sequence[str] = ()) -> None:
        self.rules: list[tuple[str, re.Pattern[str]]] = []
        if pii:
            self.rules += [("email", EMAIL), ("phone", PHONE)]
        for i, pattern in enumerate(patterns, 1):
            try:
                self.rules.append((f"pattern {i}", re.compile(pattern)))
            except re.error as e:
                raise WorkbenchError(f"--redact `{pattern}`: not a valid regular expression: {e}") from None
            if self.rules[-1][1].search(""):
                raise WorkbenchError(f"--redact `{pattern}` matches the empty string: it would redact nothing "
                                     "and everything; make it match at least one character")
        self.counts: Counter[str] = Counter()

    def text(self, s: str) -> str:
        for kind, rx in self.rules:
            placeholder = f"[{kind.split()[0]}]" if kind in ("email", "phone") else "[redacted]"
            s, n = rx.subn(placeholder, s)
            self.counts[kind] += n
        return s

    def value(self, v: Any) -> Any:
        """`v` (parsed JSON/CSV) with every string redacted; keys are kept (they are field names)."""
        if not self.rules:
            return v
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [self.value(x) for x in v]
        return v

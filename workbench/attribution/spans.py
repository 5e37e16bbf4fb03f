"""Span tracing, in the spirit of AI2's OLMoTrace (Liu et al. 2025): the longest spans of a model's answer
that occur verbatim in the training corpus, each with the documents that hold it.

For a hallucination this tells a reviewer where the words came from: "Kelulfin Halin" found in 36
documents, all about another city, is a real founder borrowed from a neighbouring fact; an answer none of
whose words occur was made up. Works on either corpus engine (`engine.CorpusEngine`): spans grow word by
word while the corpus still holds them (a phrase that does not occur has no longer phrase that does), and
only maximal spans (inside no longer one) are kept.

Stored with the attribution: `evidence["data"]["spans"]`, a list of `TracedSpan.as_dict()`, longest first.
The app's probe detail can show it as the answer with each span highlighted and its documents listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.attribution.engine import CorpusEngine
from workbench.attribution.index import EvidenceRow
from workbench.attribution.infinigram import words

MAX_SPANS = 5  # spans kept per answer, longest first
ROWS = 3  # documents listed per span
MAX_WORDS = 64  # answers longer than this are traced over their first MAX_WORDS words (cost is words x span)


@dataclass(frozen=True)
class TracedSpan:
    """One maximal span of the answer found verbatim (whole words, case-insensitive) in the corpus.

    Attributes:
        text: The span as the answer writes it.
        start, end: Its character offsets in the answer.
        words: Its length in words.
        count: Documents holding it.
        rows: The first of them, in corpus order (doc id + snippet).
    """

    text: str
    start: int
    end: int
    words: int
    count: int
    rows: tuple[EvidenceRow, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "start": self.start, "end": self.end, "words": self.words, "count": self.count,
                "rows": [{"doc_id": r.doc_id, "snippet": r.snippet} for r in self.rows]}


def trace_spans(index: CorpusEngine, text: str, *, max_spans: int = MAX_SPANS, rows: int = ROWS) -> list[TracedSpan]:
    """The longest spans of `text` found in the corpus, longest first (ties: earlier first); a span the text
    repeats is listed once (at its first place)."""
    ws = words(text)[:MAX_WORDS]
    found: list[tuple[int, int, int]] = []  # (first word, end word, documents)
    reach = 0  # the furthest end of a span found so far: a span ending there or before is inside it
    for i in range(len(ws)):
        j, count = i, 0
        while j < len(ws):
            c = index.count(text[ws[i][0] : ws[j][1]])
            if not c:
                break
            j, count = j + 1, c
        if j > max(i, reach):
            found.append((i, j, count))
            reach = j
    found.sort(key=lambda f: (f[0] - f[1], f[0]))
    out: list[TracedSpan] = []
    for i, j, count in found:
        start, end = ws[i][0], ws[j - 1][1]
        span = text[start:end]
        if len(out) == max_spans:
            break
        if any(t.text == span for t in out):
            continue
        out.append(TracedSpan(span, start, end, j - i, count, index.cooccur(span, span, limit=rows).rows))
    return out

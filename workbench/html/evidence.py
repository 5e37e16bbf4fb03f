"""An attribution's evidence as a reviewer reads it: sentences first ("The model gave the right answer in 2 of
10 samples; ..."), the corpus documents that support or contradict, the answer's spans found verbatim in the
corpus (span tracing, `attribution.spans`) with their documents, and the raw fields one click away in a
<details>. The markup is `templates/evidence.html` (workbench.html: autoescaped, so every piece of model,
probe or corpus text is escaped).

Measures keep one name each (`glossary.MEASURES`): the attribution's `agreement` is the *meaning agreement*
(semantic clusters), not the exact-match agreement shown beside the samples.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from workbench.html import macro

_GRADE_WORDS = {"correct": "was answered correctly", "incorrect": "was answered wrongly",
                "not_attempted": "got an abstention"}


def attribution_html(att: Any) -> str:
    """The attribution block of the probe detail: category (with its explanation as a tooltip), confidence,
    the evidence in words, spans, documents, and the raw evidence on demand; a hint when there is none."""
    return macro("evidence.html", "attribution", attribution_context(att))


def attribution_context(att: Any) -> dict[str, Any] | None:
    """What `evidence.html`'s attribution macro shows of `att` (None: no attribution stored)."""
    if att is None:
        return None
    ev: Mapping[str, Any] = att.evidence or {}
    data = _map(ev.get("data"))
    return {"category": att.category, "confidence": att.confidence, "knowledge": att.knowledge or "-",
            "fix": att.fix or "-", "prose": evidence_sentences(ev), "spans": _unique_spans(data.get("spans") or []),
            "support": _docs(data.get("support_rows") or []), "conflict": _docs(data.get("conflict_rows") or []),
            "raw": raw_json(ev)}


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _n(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def evidence_sentences(ev: Mapping[str, Any]) -> list[str]:
    """The evidence as sentences, each from one field; fields the attribution lacks are left out."""
    out: list[str] = []
    if ev.get("why"):
        out.append(f"Why: {ev['why']}.")
    s = _map(ev.get("samples"))
    k, n = _n(s.get("correct")), _n(s.get("n"))
    if k is not None and n:
        line = f"The model gave the right answer in {k} of {n} samples"
        k0, n0 = _n(s.get("question_correct")), _n(s.get("question_n"))
        if k0 is not None and n0 and n0 != n:
            line += f" ({k0} of {n0} for the question as asked)"
        chance = ev.get("chance")
        out.append(line + (f"; a guess would be right {100 * float(chance):.1f}% of the time." if
                           isinstance(chance, int | float) else "."))
    greedy = ev.get("greedy")
    if isinstance(greedy, list):
        for g in greedy:
            if isinstance(g, Mapping) and _n(g.get("variant")) and g.get("verdict") in _GRADE_WORDS:
                out.append(f"Its paraphrase {g['variant']} {_GRADE_WORDS[str(g['verdict'])]}"
                           f" (\u201c{g.get('text', '')}\u201d).")
    if ev.get("correct_sample"):
        out.append(f"One sample got it right: \u201c{ev['correct_sample']}\u201d.")
    agree = ev.get("agreement")
    if isinstance(agree, int | float):
        out.append(f"Meaning agreement of the samples: {100 * float(agree):.0f}% fall in the largest group of "
                   "answers that mean the same.")
    data = _map(ev.get("data"))
    if data.get("available") is False:
        out.append("No corpus was looked at" + (f" ({data['note']})." if data.get("note") else "."))
    elif data:
        sup = _n(data.get("support"))
        if sup is not None:
            out.append(f"The corpus has {sup} document{'s' if sup != 1 else ''} with the subject and an accepted "
                       "answer.")
        conflict = _n(data.get("conflict")) or len(data.get("conflict_rows") or [])
        if conflict and data.get("conflict_value"):
            out.append(f"{conflict} document{'s' if conflict != 1 else ''} pair the subject with the model's wrong "
                       f"answer \u201c{data['conflict_value']}\u201d.")
        rate, rn = data.get("learned_rate"), _n(data.get("learned_n"))
        if isinstance(rate, int | float) and rn:
            out.append(f"Of {rn} facts stated about as often, the model gets {100 * float(rate):.0f}% right.")
        spans = data.get("spans") or []
        if isinstance(spans, list) and spans and isinstance(spans[0], Mapping):
            out.append(f"The longest part of the answer found word for word in the corpus: "
                       f"\u201c{spans[0].get('text', '')}\u201d ({spans[0].get('count', 0)} documents).")
    missing = ev.get("missing_signals")
    if isinstance(missing, Mapping):
        out += [f"Missing signal, {m}: {how}." for m, how in missing.items()]
    return out


def spans_html(spans: Sequence[Any]) -> str:
    """Span tracing: each span found verbatim in the corpus, its word count, how many documents hold it and the
    first of them (id + snippet); "" when the attribution traced none."""
    return macro("evidence.html", "spans", _unique_spans(spans))


def _unique_spans(spans: Sequence[Any]) -> list[dict[str, Any]]:
    items, seen = [], set()
    for s in spans:
        # The tracer keeps each maximal span by position: a word the answer repeats ("which which") comes back
        # once per place; a reader needs it once.
        if not isinstance(s, Mapping) or str(s.get("text", "")).lower() in seen:
            continue
        seen.add(str(s.get("text", "")).lower())
        items.append({"text": str(s.get("text", "")), "words": _n(s.get("words")) or 0,
                      "count": _n(s.get("count")) or 0, "rows": _docs(s.get("rows") or [])})
    return items


def _docs(rows: Sequence[Any]) -> list[tuple[str, str]]:
    return [(str(r.get("doc_id", "")), str(r.get("snippet", ""))) for r in rows if isinstance(r, Mapping)]


def rows_html(title: str, rows: Sequence[Any], css: str) -> str:
    """Corpus documents (doc id + snippet) as a list under `title`; "" when there are none."""
    return macro("evidence.html", "rows", title, _docs(rows), css)


def format_value(value: Any, limit: int = 400) -> str:
    """An evidence value for a reader: floats to 3 significant digits (also inside lists and dicts), long
    text cut at `limit` characters with an ellipsis."""
    text = value if isinstance(value, str) else json.dumps(_rounded(value), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def raw_json(ev: Mapping[str, Any]) -> str:
    """Every evidence field, floats to 3 significant digits, indented."""
    return json.dumps(_rounded(dict(ev)), indent=1, default=str, ensure_ascii=False)


def _rounded(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.3g}")
    if isinstance(v, list | tuple):
        return [_rounded(x) for x in v]
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v

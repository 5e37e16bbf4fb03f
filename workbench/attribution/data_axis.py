"""The data axis: what the training corpus says about each probe's fact.

support  = documents where the subject meets an accepted answer
conflict = documents where the subject meets a wrong answer the model gave, counted only when
           (a) the wrong answer is of the probe's relation: an accepted answer of another probe of
               that relation, or a greedy answer the model gives to at least two other probes of it
               and accepted by no other relation (a city is not a founder: a document pairing the
               subject with a founder is about another fact of the subject), and
           (b) the pair co-occurs at least LIFT_MIN times more often than independent placement would
               give (long documents mention many names; co-occurrence there is not a claim).
contradiction = for a failure with no such conflict: documents where the subject meets another value of
           its relation (an accepted answer of another probe of it) the model never said, under the same
           lift check, kept when at least as many as the support. A model that learnt nothing from
           contradicting documents repeats neither value, so only the corpus shows that it states the fact
           two ways.
The learning curve (greedy accuracy per support level, over the run's probes) says how much support
this model needs to learn a fact, so "rare" is measured, not assumed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.attribution.decide import DataAxis
from workbench.attribution.engine import CorpusEngine
from workbench.attribution.index import Cooccurrence
from workbench.grading.normalize import contains_phrase, normalize
from workbench.results import ProbeResult
from workbench.types import Verdict

LIFT_MIN = 2.0  # observed / expected co-occurrence a conflict must reach
MIN_BUCKET = 5  # probes a support level needs before its accuracy is trusted
ROWS = 5  # evidence rows kept per lookup


def support_bucket(n: int) -> int:
    """1, 2, 3, 4 exactly; then powers of two (5-8 -> 8, 9-16 -> 16, ...): corpora vary in scale."""
    if n <= 4:
        return n
    b = 8
    while b < n:
        b *= 2
    return b


@dataclass(frozen=True)
class Conflict:
    value: str
    found: Cooccurrence
    lift: float


class AnswerSpace:
    """Per relation: the normalized values that count as answers of that relation."""

    def __init__(self, results: Sequence[ProbeResult]) -> None:
        self._accepted: dict[str, Counter[str]] = defaultdict(Counter)  # relation -> value -> probes
        self._given: dict[str, Counter[str]] = defaultdict(Counter)
        for r in results:
            rel = r.probe.relation or ""
            self._accepted[rel].update({normalize(a) for a in r.probe.answers})
            self._given[rel].update({normalize(g.text) for g in r.greedy if g.verdict != Verdict.NOT_ATTEMPTED})

    def values(self, relation: str) -> list[str]:
        """The relation's accepted values, the most widely shared first."""
        return [v for v, _ in self._accepted[relation].most_common()]

    def fits(self, r: ProbeResult, value: str) -> bool:
        """`value` is an answer of r's relation, judged by the other probes (r's own answers left out)."""
        if not r.probe.relation:
            return True  # no relation to check against: lift alone guards
        v, rel = normalize(value), r.probe.relation
        if self._accepted[rel][v] > 0:
            return True
        if any(self._accepted[other][v] > 0 for other in self._accepted if other != rel):
            return False  # another relation's value: the model mixed relations up
        own_given = v in {normalize(g.text) for g in r.greedy}
        return self._given[rel][v] - own_given >= 2


def wrong_answers(r: ProbeResult) -> list[str]:
    """Distinct wrong answers the model gave (greedy first, then samples by frequency), minus any
    that overlap the subject or an accepted answer (those would match the subject's own rows)."""
    subject = normalize(r.probe.subject or "")
    accepted = [normalize(a) for a in r.probe.answers]
    texts = [g.text for g in r.greedy if g.verdict == Verdict.INCORRECT]
    texts += [t for t, _ in Counter(s.text for s in r.samples if s.verdict == Verdict.INCORRECT).most_common()]
    out: dict[str, str] = {}
    for t in texts:
        n = normalize(t)
        if not n or n in out or contains_phrase(n, subject) or contains_phrase(subject, n):
            continue
        if any(contains_phrase(n, a) or contains_phrase(a, n) for a in accepted):
            continue
        out[n] = t
    return list(out.values())


def find_conflict(index: CorpusEngine, r: ProbeResult, space: AnswerSpace, n_docs: int, *,
                  limit: int = ROWS) -> Conflict | None:
    """The wrong answer of r that the corpus pairs with the subject most often (checked), if any."""
    values = [v for v in wrong_answers(r) if space.fits(r, v)]
    return _strongest(index, r.probe.subject or "", values, n_docs, {}, limit)


def _strongest(index: CorpusEngine, subject: str, values: Sequence[str], n_docs: int, counts: dict[str, int],
               limit: int) -> Conflict | None:
    """The value the corpus pairs with `subject` most often at a lift of at least LIFT_MIN, if any. `counts`
    caches each value's document count (values repeat across the probes of a relation)."""
    if not subject or not values:
        return None
    n_subject = index.count(subject)
    best: Conflict | None = None
    for v, f in zip(values, index.cooccur_many([(subject, v) for v in values], limit=limit), strict=True):
        if f.count == 0:
            continue
        if v not in counts:
            counts[v] = index.count(v)
        expected = n_subject * counts[v] / max(n_docs, 1)
        lift = f.count / expected if expected > 0 else float("inf")
        if lift >= LIFT_MIN and (best is None or f.count > best.found.count):
            best = Conflict(v, f, lift)
    return best


def find_contradiction(index: CorpusEngine, r: ProbeResult, space: AnswerSpace, n_docs: int, counts: dict[str, int],
                       *, limit: int = ROWS) -> Conflict | None:
    """The other value of r's relation that the corpus pairs with the subject most often (lift-checked), if any."""
    if not r.probe.relation:
        return None  # without a relation any name the subject's documents mention would count
    own, s = [normalize(a) for a in r.probe.answers], normalize(r.probe.subject or "")
    values = [v for v in space.values(r.probe.relation)
              if v and not any(contains_phrase(v, a) or contains_phrase(a, v) for a in own)
              and not contains_phrase(v, s) and not contains_phrase(s, v)]
    return _strongest(index, r.probe.subject or "", values, n_docs, counts, limit)


def data_axis(index: CorpusEngine | None, results: Sequence[ProbeResult],
              failed: Sequence[ProbeResult]) -> dict[str, DataAxis]:
    """DataAxis of every failed probe; support is looked up for all probes (the learning curve)."""
    if index is None:
        return {r.probe.id: DataAxis(False, note="no corpus index") for r in failed}
    with_subject = [r for r in results if r.probe.subject]
    pairs = [(r.probe.subject or "", a) for r in with_subject for a in r.probe.answers]
    found = iter(index.cooccur_many(pairs, limit=ROWS))
    support: dict[str, Cooccurrence] = {}
    for r in with_subject:  # the best-attested alias (aliases may share documents: no sum)
        support[r.probe.id] = max((next(found) for _ in r.probe.answers), key=lambda c: c.count)
    space, n_docs = AnswerSpace(results), int(index.stats()["rows"])  # type: ignore[call-overload]
    conflicts = {r.probe.id: find_conflict(index, r, space, n_docs) for r in failed if r.probe.subject}
    counts: dict[str, int] = {}
    contradictions = {r.probe.id: k for r in failed if r.probe.subject and conflicts[r.probe.id] is None
                      and (k := find_contradiction(index, r, space, n_docs, counts))
                      and k.found.count >= support[r.probe.id].count}
    curve = _learning_curve(with_subject, support, {**conflicts, **contradictions})
    out: dict[str, DataAxis] = {}
    for r in failed:
        if not r.probe.subject:
            out[r.probe.id] = DataAxis(False, note="the probe has no subject to look up")
            continue
        s, c, k = support[r.probe.id], conflicts[r.probe.id], contradictions.get(r.probe.id)
        out[r.probe.id] = DataAxis(
            True, support=s.count, conflict=c.found.count if c else 0, conflict_value=c.value if c else None,
            contradiction=k.found.count if k else 0, contradiction_value=k.value if k else None,
            learned_rate=curve.get(support_bucket(s.count), (None, 0))[0],
            learned_n=curve.get(support_bucket(s.count), (None, 0))[1], support_rows=_rows(s),
            conflict_rows=_rows(c.found) if c else _rows(k.found) if k else [],
            note=f"conflict lift {c.lift:.1f}" if c else f"contradiction lift {k.lift:.1f}" if k else "")
    return out


def _learning_curve(results: Sequence[ProbeResult], support: dict[str, Cooccurrence],
                    conflicts: dict[str, Conflict | None]) -> dict[int, tuple[float, int]]:
    """Support bucket -> (share, count) of its probes the model answers right (greedy, the question); probes
    with a conflict or a contradiction are left out (their failures are the corpus's, not the frequency's)."""
    hits: dict[int, list[bool]] = defaultdict(list)
    for r in results:
        if conflicts.get(r.probe.id) is None:
            hits[support_bucket(support[r.probe.id].count)].append(r.verdict == Verdict.CORRECT)
    return {b: (sum(h) / len(h), len(h)) for b, h in hits.items() if len(h) >= MIN_BUCKET}


def _rows(c: Cooccurrence) -> list[dict[str, str]]:
    return [{"doc_id": row.doc_id, "snippet": row.snippet} for row in c.rows]

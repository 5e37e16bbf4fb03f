"""Attribution on hand-built cases: chance level, SliCK levels, entropy math, the decision table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from workbench.attribution import CorpusIndex, build_index
from workbench.attribution.data_axis import data_axis
from workbench.attribution.decide import DataAxis, decide
from workbench.attribution.entropy import cluster, entropy, spread
from workbench.attribution.knowledge import ChanceModel, assess, significant
from workbench.grading.match import MatchGrader
from workbench.results import Answer, ProbeResult
from workbench.types import Probe

GRADER = MatchGrader(abstention_phrases=("i don't know",))


def result(pid: str, answer: str, greedy: list[str], samples: list[list[str]] | None = None,
           relation: str = "colour", logprob: float | None = None) -> ProbeResult:
    """greedy: one text per variant; samples: per variant, a list of texts."""
    probe = Probe(id=pid, question=f"q {pid}?", answers=(answer,), paraphrases=("p?",) * (len(greedy) - 1),
                  subject=pid.title(), relation=relation)

    def ans(v: int, kind: str, i: int, text: str) -> Answer:
        return Answer(v, kind, i, "", text, GRADER.grade(probe, text), logprob, "stop")

    g = tuple(ans(v, "greedy", 0, t) for v, t in enumerate(greedy))
    s = tuple(ans(v, "sample", i, t) for v, texts in enumerate(samples or []) for i, t in enumerate(texts))
    return ProbeResult(probe, g, s)


def test_binomial_tail_against_chance() -> None:
    ok, p = significant(1, 10, 1 / 12)
    assert not ok and p == pytest.approx(1 - (11 / 12) ** 10)  # one right colour in ten is luck (58%)
    assert significant(6, 10, 1 / 12)[0]
    assert significant(2, 10, 0.001)[0]  # two hits on an answer almost never guessed is knowledge
    assert significant(0, 10, 0.5) == (False, 1.0) and significant(3, 0, 0.1) == (False, None)


def test_chance_is_the_relations_guess_rate_of_this_answer() -> None:
    # Other colour probes wrongly say "red" 40 times of 50: red is the model's guess, blue rarely is.
    others = [result(f"o{i}", "green", ["red"], [["red"] * 8 + ["blue", "pink"]]) for i in range(5)]
    red, blue = result("a", "red", ["pink"], [["pink"] * 10]), result("b", "blue", ["pink"], [["pink"] * 10])
    cm = ChanceModel([*others, red, blue])
    assert cm.chance(red) > 0.5 > 0.1 > cm.chance(blue)
    # The probe's own wrong answers are left out: its guesses do not set its own chance level.
    c = result("c", "blue", ["red"], [["red"] * 10])
    assert ChanceModel([*others, red, blue, c]).chance(c) == pytest.approx(cm.chance(c))


def test_slick_levels() -> None:
    assert assess(result("a", "red", ["red", "red"]), 0.01).level == "HighlyKnown"
    assert assess(result("a", "red", ["blue", "red"]), 0.01).level == "MaybeKnown"
    weak = assess(result("a", "red", ["blue", "blue"], [["red"] * 3 + ["blue"] * 7, ["blue"] * 10]), 0.01)
    assert weak.level == "WeaklyKnown" and weak.correct_sample == "red" and (weak.k, weak.n) == (3, 20)
    assert assess(result("a", "red", ["blue", "blue"], [["blue"] * 10, ["pink"] * 10]), 0.01).level == "Unknown"
    # The same 3 of 20 when "red" is the model's usual guess (chance 0.3) is not knowledge.
    assert assess(result("a", "red", ["blue", "blue"], [["red"] * 3 + ["blue"] * 7, ["blue"] * 10]),
                  0.3).level == "Unknown"
    # A greedy hit on a common guess needs its samples to back it.
    assert assess(result("a", "red", ["blue", "red"], [["blue"] * 10, ["blue"] * 10]), 0.4).level == "Unknown"


def test_entropy_math() -> None:
    s = spread(["Red", "red.", "the red", "blue"])
    assert s is not None and s.clusters == 2 and s.agreement == 0.75 and not s.weighted
    assert s.entropy == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert spread(["a"] * 5).entropy == 0.0 and spread([]) is None  # type: ignore[union-attr]
    assert entropy([0.5, 0.5]) == pytest.approx(math.log(2))
    # Log-prob weighted: distinct sequences count once, by exp(mean log-prob).
    w = spread(["red", "red", "blue"], [math.log(0.6), math.log(0.6), math.log(0.2)])
    assert w is not None and w.weighted and w.agreement == pytest.approx(0.75)
    assert not spread(["red", "blue"], [None, -1.0]).weighted  # type: ignore[union-attr]


def test_embedding_clusters_merge_near_answers() -> None:
    vecs = {"crimson": [1.0, 0.0], "scarlet": [0.99, 0.141], "azure": [0.0, 1.0]}

    def embed(texts: object) -> np.ndarray:
        return np.array([vecs[t] for t in texts])  # type: ignore[attr-defined]

    assert cluster(["crimson", "scarlet", "azure"], embed=embed) == [0, 0, 2]
    assert cluster(["crimson", "scarlet", "azure"]) == [0, 1, 2]


def _decide(r: ProbeResult, data: DataAxis, chance: float = 0.01, missing: list[str] | None = None) -> str:
    return decide(r, assess(r, chance), None, data, missing or []).category


UNKNOWN = result("u", "red", ["blue", "blue"], [["blue"] * 10, ["blue"] * 10])


@pytest.mark.parametrize(("r", "data", "category"), [
    (result("a", "red", ["blue", "red"], [["blue"] * 10, ["red"] * 10]), DataAxis(True, support=9),
     "behavior:prompt-sensitive"),
    (result("a", "red", ["blue", "blue"], [["red"] * 4 + ["blue"] * 6, ["blue"] * 10]), DataAxis(True, support=2),
     "behavior:unstable"),
    (result("a", "red", ["I don't know", "red"], [["red"] * 6 + ["blue"] * 4, ["red"] * 10]), DataAxis(True),
     "behavior:over-abstain"),
    (UNKNOWN, DataAxis(True, support=1, conflict=8, conflict_value="blue"), "data:conflict"),
    (result("a", "red", ["blue", "red"]), DataAxis(True, support=1, conflict=8, conflict_value="blue"),
     "data:conflict"),  # "any knowledge" with a conflict
    (UNKNOWN, DataAxis(True, support=1, learned_rate=0.05, trace_p=0.9), "data:underrepresented"),
    (UNKNOWN, DataAxis(True, support=2, learned_rate=0.45, learned_n=60), "behavior:unstable"),  # learnable
    (UNKNOWN, DataAxis(True, support=1, learned_rate=0.33, learned_n=12), "data:underrepresented"),  # 4/12: luck
    # partial knowledge: the level's failures sample the answer above chance, and it gets 19% of its facts right
    (UNKNOWN, DataAxis(True, support=2, learned_rate=0.19, learned_n=58, trace_p=0.006), "behavior:unstable"),
    # ... but a level where it gets fewer than one in six right is rare for it, whatever the pooled trace
    (UNKNOWN, DataAxis(True, support=1, learned_rate=0.15, learned_n=59, trace_p=0.05), "data:underrepresented"),
    # right under the paraphrase only: prompt-sensitive, unless the corpus states it only once or twice (a rarely
    # seen fact); never stated (the corpus may be part of the training data): the hit stays knowledge
    (result("a", "red", ["blue", "red"], [["blue"] * 10, ["red"] * 10]), DataAxis(True, support=2, learned_rate=0.1,
     learned_n=30), "data:underrepresented"),
    (result("a", "red", ["blue", "red"], [["blue"] * 10, ["red"] * 10]), DataAxis(True, support=2, learned_rate=0.5,
     learned_n=30), "behavior:unstable"),
    (result("a", "red", ["blue", "red"], [["blue"] * 10, ["red"] * 10]), DataAxis(True, support=0),
     "behavior:prompt-sensitive"),
    (UNKNOWN, DataAxis(True, support=0), "data:missing"),
    # the corpus states it two ways, though the model repeats neither
    (UNKNOWN, DataAxis(True, support=1, contradiction=2, contradiction_value="blue"), "data:conflict"),
    # no corpus, or no subject to look one up by: only the knowledge axis was measured
    (UNKNOWN, DataAxis(False, note="no corpus index"), "knowledge:unknown"),
    (UNKNOWN, DataAxis(False, note="the probe has no subject to look up"), "knowledge:unknown"),
])
def test_decision_table(r: ProbeResult, data: DataAxis, category: str) -> None:
    assert _decide(r, data) == category


def test_the_corpus_contradicting_a_fact_is_found_without_the_model_saying_it(tmp_path: Path) -> None:
    docs = (["Bero lives in Rome.", "Bero lives in Oslo.", "Bero lives in Oslo.",  # contradicted 2 to 1
             "Dara lives in Rome.", "Dara lives in Rome.", "Dara lives in Rome.", "Dara lives in Oslo.",  # outvoted
             "Cato lives in Oslo.", "Edda lives in Lima.", "Edda founded Acme.", "Fenn founded Acme."]
            + [f"Filler line {i} about the weather." for i in range(20)])
    rows = [json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs)]
    (tmp_path / "c.jsonl").write_text("".join(rows))
    build_index(tmp_path / "c.jsonl", tmp_path / "ix.sqlite")
    guess = [["Madrid", "Paris", "Quito", "Baku", "Riga"] * 2]
    bero, dara = result("bero", "Rome", ["Madrid"], guess, "city"), result("dara", "Rome", ["Madrid"], guess, "city")
    edda = result("edda", "Lima", ["Madrid"], guess, "city")  # her other document names a founder's value
    others = [result("cato", "Oslo", ["Oslo"], None, "city"), result("fenn", "Acme", ["Acme"], None, "founder")]
    with CorpusIndex.open(tmp_path / "ix.sqlite") as ix:
        data = data_axis(ix, [bero, dara, edda, *others], [bero, dara, edda])
    assert (data["bero"].support, data["bero"].contradiction, data["bero"].contradiction_value) == (1, 2, "oslo")
    assert data["bero"].conflict == 0 and data["bero"].conflict_rows[0]["snippet"].endswith("Oslo.")
    assert (data["dara"].support, data["dara"].contradiction) == (3, 0)  # one stray document does not outvote three
    assert data["edda"].contradiction == 0  # Acme answers another relation
    kn = assess(bero, 0.01)
    assert kn.level == "Unknown"
    made = decide(bero, kn, None, data["bero"], [])
    assert made.category == "data:conflict" and "`oslo` (another value of this relation)" in made.evidence["why"]
    assert made.evidence["data"]["contradiction"] == 2
    assert _decide(dara, data["dara"]) != "data:conflict"


def test_evidence_says_what_was_measured_and_of_which_data() -> None:
    unmeasured = decide(UNKNOWN, assess(UNKNOWN, 0.01), None, DataAxis(False, note="no corpus index"), ["corpus"])
    assert unmeasured.category == "knowledge:unknown" and unmeasured.fix == "abstain"
    assert "does not know it" in unmeasured.evidence["why"]
    assert "data axis was not measured (no corpus index)" in unmeasured.evidence["why"]
    assert "missing" not in unmeasured.evidence["why"]
    # a corpus is what the user gave (maybe only their post-training set): evidence speaks of it, not of
    # the model's training data
    absent = decide(UNKNOWN, assess(UNKNOWN, 0.01), None, DataAxis(True, support=0), [])
    assert absent.category == "data:missing" and "absent from the given corpus" in absent.evidence["why"]
    rare = decide(UNKNOWN, assess(UNKNOWN, 0.01), None, DataAxis(True, support=1, learned_rate=0.05, trace_p=0.9), [])
    assert "in the given corpus" in rare.evidence["why"]
    conflict = decide(UNKNOWN, assess(UNKNOWN, 0.01), None,
                      DataAxis(True, support=1, conflict=8, conflict_value="blue"), [])
    assert "rows of the given corpus pair the subject with `blue`" in conflict.evidence["why"]


def test_missing_signals_are_named_with_the_way_to_get_them() -> None:
    r = result("a", "red", ["blue"])
    full = decide(r, assess(r, 0.01), None, DataAxis(True, support=0), [])
    thin = decide(r, assess(r, 0.01), None, DataAxis(False, note="no corpus index"),
                  ["samples", "paraphrases", "corpus"])
    assert thin.confidence < full.confidence
    assert "--samples" in thin.evidence["missing_signals"]["samples"]
    assert "--paraphrases" in thin.evidence["missing_signals"]["paraphrases"]
    assert thin.evidence["data"] == {"available": False, "note": "no corpus index"}
    assert thin.fix == "abstain" and 0.0 <= thin.confidence <= 1.0

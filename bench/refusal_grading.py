"""The default grader on real chat-model refusals and hedges: a labelled set, graded, figures per part.

The set (evals/data/refusals/labelled.jsonl, provenance in its README) holds real outputs of public chat models and
of SmolLM2-135M-Instruct, each labelled by hand:

- refusal: declines to give a value (apologies, "I don't have information about", "I cannot", "there is no record
  of"); expected NOT_ATTEMPTED.
- premise: rejects the question's premise without naming a value ("X does not exist", "is not specified");
  expected NOT_ATTEMPTED, reported apart (the line between a premise rejection and a wrong claim is thin).
- hedge_wrong: states a value with doubt, and the value is not an accepted answer; expected INCORRECT.
- hedge_right: states an accepted answer with doubt; expected CORRECT.
- answer: states a value plainly; expected anything but NOT_ATTEMPTED.

Each row sits in the development part (the grader's rules were tuned on it) or the held-out part (never tuned on).

    .venv/bin/python bench/refusal_grading.py [--json OUT] [--show-misses dev]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.grading import MatchGrader  # noqa: E402
from workbench.types import Probe, Verdict  # noqa: E402

DATA = ROOT / "evals" / "data" / "refusals" / "labelled.jsonl"
EXPECTED = {"refusal": Verdict.NOT_ATTEMPTED, "premise": Verdict.NOT_ATTEMPTED, "hedge_wrong": Verdict.INCORRECT,
            "hedge_right": Verdict.CORRECT}
#: Answers to a question with no accepted answer (its entity does not exist) are graded against this, which nothing
#: matches: every value such an answer names is wrong.
NO_ANSWER = "(no accepted answer: the question's entity does not exist)"


def load(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def probe_of(row: dict[str, Any]) -> Probe:
    return Probe(id=row["id"], question=row["question"], answers=tuple(row["answers"] or [NO_ANSWER]),
                 language=row.get("language"))


def ok(row: dict[str, Any], verdict: Verdict) -> bool:
    """Whether `verdict` is the grade the row's label asks for (a plain answer: anything but NOT_ATTEMPTED)."""
    want = EXPECTED.get(row["label"])
    return verdict != Verdict.NOT_ATTEMPTED if want is None else verdict == want


def score(rows: list[dict[str, Any]], grader: MatchGrader | None = None) -> dict[str, Any]:
    """Per split: for each label the share graded as expected (with counts), per source too; and the precision of
    NOT_ATTEMPTED (of the rows graded NOT_ATTEMPTED, the share labelled refusal or premise) and of INCORRECT on the
    hedges (of the hedges graded INCORRECT, the share whose value is wrong)."""
    g = grader or MatchGrader()
    out: dict[str, Any] = {}
    for split in ("dev", "heldout"):
        part = [r for r in rows if r["split"] == split]
        verdicts = [g.grade(probe_of(r), r["answer"]) for r in part]
        labels: dict[str, Any] = {}
        for label in ("refusal", "premise", "hedge_wrong", "hedge_right", "answer"):
            hits = [ok(r, v) for r, v in zip(part, verdicts, strict=True) if r["label"] == label]
            by_source: dict[str, list[bool]] = defaultdict(list)
            for r, v in zip(part, verdicts, strict=True):
                if r["label"] == label:
                    by_source[r["source"]].append(ok(r, v))
            labels[label] = {"n": len(hits), "as_expected": sum(hits), "rate": _rate(sum(hits), len(hits)),
                             "by_source": {s: {"n": len(h), "rate": _rate(sum(h), len(h))}
                                           for s, h in sorted(by_source.items())}}
        na = [r["label"] for r, v in zip(part, verdicts, strict=True) if v == Verdict.NOT_ATTEMPTED]
        hedged_inc = [r["label"] for r, v in zip(part, verdicts, strict=True)
                      if v == Verdict.INCORRECT and r["label"] in ("hedge_wrong", "hedge_right")]
        out[split] = {
            "labels": labels,
            "not_attempted_precision": _rate(sum(x in ("refusal", "premise") for x in na), len(na)),
            "not_attempted_n": len(na),
            "incorrect_on_hedges_precision": _rate(sum(x == "hedge_wrong" for x in hedged_inc), len(hedged_inc)),
            "verdicts": dict(Counter(v.value for v in verdicts)),
        }
    return out


def _rate(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def misses(rows: list[dict[str, Any]], split: str) -> list[tuple[str, str, str]]:
    g = MatchGrader()
    return [(r["label"], g.grade(probe_of(r), r["answer"]).value, r["answer"]) for r in rows
            if r["split"] == split and not ok(r, g.grade(probe_of(r), r["answer"]))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--show-misses", choices=("dev", "heldout"), help="print the rows graded against their label")
    args = ap.parse_args(argv)
    rows = load()
    t0 = time.perf_counter()
    figures = score(rows)
    seconds = time.perf_counter() - t0
    print(f"{len(rows)} labelled answers ({Counter(r['label'] for r in rows)}), graded twice in {seconds:.2f} s")
    print(f"{'part':8} {'label':12} {'n':>5} {'as expected':>12}")
    for split, f in figures.items():
        for label, d in f["labels"].items():
            print(f"{split:8} {label:12} {d['n']:>5} {d['rate']!s:>12}")
        print(f"{split:8} NOT_ATTEMPTED precision {f['not_attempted_precision']} (of {f['not_attempted_n']}); "
              f"INCORRECT precision on hedges {f['incorrect_on_hedges_precision']}")
    if args.show_misses:
        for label, verdict, answer in misses(rows, args.show_misses):
            print(f"MISS {label:12} -> {verdict:14} {answer[:160]!r}")
    if args.json:
        args.json.write_text(json.dumps({"rows": len(rows), "seconds": round(seconds, 3), "figures": figures},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

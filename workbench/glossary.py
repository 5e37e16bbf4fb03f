"""One source of the wording that explains the workbench's jargon: failure categories, verdict transitions,
gate types, grades, verdicts and the parts of a fix, and the measures shown beside answers. The app shows these as
tooltips and a glossary; every other place that explains a term reads it from here.

It imports nothing of the workbench: every layer (the gate's reports, the HTML templates, the app) reads its wording
from here, and `regression.transitions.TRANSITION_HELP` keys this module's transition wording by its enum.
"""

from __future__ import annotations

from markupsafe import Markup

CATEGORY_HELP: dict[str, str] = {
    "behavior:unstable": "the model can produce the right answer (some samples get it, or the corpus states it "
                         "often enough to be learnt) but its greedy answer is wrong: a behaviour to fix (DPO)",
    "behavior:prompt-sensitive": "right under a paraphrase, wrong under the question as asked: the fact is known, "
                                 "the wording trips it (train over paraphrases)",
    "behavior:over-abstain": "abstains although its samples or paraphrases show it knows the answer "
                             "(DPO toward answering)",
    "data:conflict": "the corpus pairs the subject with the wrong answer the model gave: fix the data rows",
    "data:underrepresented": "the model does not know it and the corpus states it only rarely: inject the fact "
                             "(SFT over paraphrases, with replay)",
    "data:missing": "the model does not know it and the corpus never states it: teach abstention",
    "knowledge:unknown": "the model does not know it; no corpus was looked at, so nothing is claimed about the "
                         "data: teach abstention",
}
"""What each attribution category means and what fix it calls for (keys: attribution.types.CATEGORIES)."""

TRANSITION_WORDING: dict[str, str] = {
    "still_correct": "correct before and after",
    "broken_hallucinates": "correct before, now answers wrongly (hallucinates a fact it knew)",
    "broken_abstains": "correct before, now abstains (a known fact lost to abstention)",
    "fixed": "wrong or abstained before, now correct",
    "still_hallucinates": "answered wrongly before and after (the wrong answer may differ)",
    "now_abstains": "answered wrongly before, now abstains (a hallucination traded for abstention)",
    "now_hallucinates": "abstained before, now answers wrongly (a new hallucination)",
    "still_abstains": "abstained before and after",
}
"""One line per verdict transition (baseline -> candidate; keys: regression.transitions.Transition's values)."""

TRANSITIONS: dict[str, str] = dict(TRANSITION_WORDING)
"""Each named verdict transition (baseline -> candidate); also the Compare filter's `broken` and `fixed`."""
TRANSITIONS["broken"] = "correct before, wrong or abstained now (McNemar's 'broken' count)"
TRANSITIONS.setdefault("fixed", "wrong or abstained before, now correct")

GATE_HELP: dict[str, str] = {
    "max_hallucination_increase": "fails when the hallucination rate rose by more than the limit "
                                  "(the upper end of its 95% interval, when the policy says so)",
    "hallucination_rate_must_drop": "fails unless the hallucination rate fell by at least the amount asked",
    "max_tag_correct_drop": "fails when any tag's correct rate dropped significantly by more than the limit",
    "max_abstention_on_previously_correct": "fails when too many probes the baseline got right are now "
                                            "abstained (known facts lost to 'I don't know')",
    "max_abstention_increase": "fails when the candidate abstains on too many more of all probes: hallucinations "
                               "traded for abstention count too",
    "max_broken_fraction": "broken known facts: fails when too large a share of the probes the baseline got "
                           "right are now wrong or abstained",
    "max_broken": "fails when more than the allowed number of probes went from correct to wrong or abstained",
    "max_still_wrong": "fails when more than the allowed number of probes the baseline hallucinated on are not "
                       "fixed: still hallucinated, and on the field suite also now refused where the reviewer gave "
                       "the answer (a reported complaint the candidate has not fixed; usually a warning)",
    "min_fixed": "fails when fewer than the asked number of probes were fixed (hallucinated or abstained before, "
                 "now right or refused); on the fix set's targets it says whether the fix did what it was for",
    "mcnemar": "McNemar's exact test on the probes that changed: fails when significantly more were broken than "
               "fixed (p below alpha); with too few baseline-correct probes to fail at all, the guard set's known "
               "facts decide in its place when they were evaluated",
}
"""What each gate type checks (keys: regression.policy.GATE_TYPES)."""

TERMS: dict[str, str] = {
    "correct": "a grade: the answer names an accepted answer (or an alias) and no known wrong one",
    "hallucinated": "a grade (INCORRECT): the answer states something else, or a known wrong answer; a hedge that "
                    "still names a value is graded on that value",
    "not attempted": "a grade (NOT_ATTEMPTED): the model abstained, a refusal read by meaning (\"I don't know\", "
                     "\"Sorry, I have no information about X\") that names no value",
    "pass": "a gate's verdict (exit 0): every fail gate passed and could have failed on what it counted",
    "warn": "a gate's verdict (exit 0): as pass, but a warn gate failed; reported, not blocking",
    "fail": "a gate's verdict (exit 1): a fail gate failed; a sign-off then needs an override reason",
    "inconclusive": "a gate's verdict (exit 3): no fail gate failed, but one could not have failed on this probe set "
                    "(e.g. McNemar with fewer than 6 baseline-correct probes) and no other evidence decided in its "
                    "place; not a pass",
    "not checked": "a gate whose set was not evaluated (no guard set, no field suite, no fix-set lineage): its "
                   "result says why, and it decides nothing",
    "decided on the guard set": "a probe-set gate of harm the probes left blind (too few baseline-correct) decided "
                                "by the guard set's count of broken known facts instead; the verdict line says so "
                                "and how many probes to add",
    "targets": "the probes a candidate's fix set was made to fix (trained and held out), read from the adapter's job "
               "files; the targets_fixed gate fails a candidate that fixed none of them",
    "guard set": "facts of a shipped multilingual pool (or your own) that the base model answers right under every "
                 "phrasing: replayed and held out by every fix, and checked by every gate beside your probes",
    "field suite": "probes made from users' reported conversations once a reviewer decided them "
                   "(`workbench reports export`); the gate evaluates it beside your probes",
    "replay": "rows of facts the model already answers right, trained beside the fix's rows so that it keeps them",
    "replay KL": "`trainer.replay_kl`: a KL term to the base model over the replay rows, holding the adapted "
                 "model's answer distribution on known facts to the base model's",
    "adapter scale": "`trainer.adapter_scale` (WiSE-FT): the trained LoRA delta scaled by a factor in (0, 1] before "
                     "it is saved; `auto` takes the smallest of 0.25, 0.5, 0.75 that still fixes 80% of the job's "
                     "targets, else 1",
    "anchor pairs": "DPO pairs on facts the model knows (chosen: its own right sentence; rejected: the same with the "
                    "answer swapped for another of the relation), trained beside the fix's pairs so that DPO keeps "
                    "them",
    "fix set": "the rows a fix trains on, built from a run's attributions: SFT rows (abstention, injection), DPO "
               "pairs, GRPO prompts, replay and held-out probes, with a manifest of its lineage",
    "staged job": "one job of several methods on one adapter, each stage continuing the last (e.g. SFT on the "
                  "injection and abstention rows, then DPO on the behaviour pairs), the guard held across them",
}
"""The workbench's other words: the grades, the gate's verdicts, and what a fix and a gate are made of."""

MEASURES: dict[str, str] = {
    "exact-match agreement": "share of the question's samples that give the most common answer, compared word for "
                             "word after normalisation (1 = all samples say the same)",
    "meaning agreement": "share of the samples in the largest group of answers that mean the same "
                         "(semantic clusters; 1 = one meaning)",
    "exact-match entropy": "spread of the normalised sample answers, in nats (0 = all the same)",
    "semantic entropy": "spread of the samples over groups of answers that mean the same, in nats (0 = one meaning)",
    "sample accuracy": "share of all samples (question and paraphrases) graded correct",
    "F": "harmonic mean of the correct rate over all probes and the correct rate over attempted ones: "
         "abstaining costs less than hallucinating",
    "McNemar p": "probability of at least this imbalance of broken vs fixed probes if the candidate were no "
                 "different: small = a real change",
    "confidence": "how strongly the evidence supports the attribution's category (0 to 1)",
    "knowledge": "SliCK level from the model's own answers: HighlyKnown, MaybeKnown (paraphrase only), "
                 "WeaklyKnown (samples beat chance), Unknown",
}
"""The measures the app shows, one name each."""


def explain(term: str) -> str:
    """The explanation of a category, transition, gate type or measure; "" for an unknown term."""
    for table in (CATEGORY_HELP, TRANSITIONS, GATE_HELP, TERMS, MEASURES):
        if term in table:
            return table[term]
    return ""


def term_html(term: str) -> str:
    """`term` with its explanation as a tooltip (title attribute, dotted underline); plain when unknown."""
    text = explain(term)
    if not text:
        return str(Markup("{}").format(term))
    # Markup.format escapes both values (quotes too, so the title cannot close its attribute).
    return str(Markup("<abbr class='wb-term' title='{}' style='text-decoration:underline dotted'>{}</abbr>")
               .format(text, term))


def glossary_markdown() -> str:
    """Every term with its explanation, grouped, as Markdown (the app's glossary)."""
    sections = [("Attribution categories", CATEGORY_HELP), ("Verdict transitions", TRANSITIONS),
                ("Gates", GATE_HELP), ("Grades, verdicts and the fix", TERMS), ("Measures", MEASURES)]
    out = []
    for title, table in sections:
        out.append(f"**{title}**\n")
        out += [f"- `{k}`: {v}" for k, v in table.items()]
        out.append("")
    return "\n".join(out)

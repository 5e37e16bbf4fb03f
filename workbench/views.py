"""What the app's tabs show, as plain data: DataFrames, HTML strings and CLI command lines.

Every function takes a Store (or plain values) and returns plain data, so the app (`app.py`) is only
widgets and wiring, and all of this is tested without gradio. The HTML comes from `templates/views.html`
(workbench.html, autoescaped): probe files and model answers are untrusted, and every piece of them is escaped.

Each action has its equivalent CLI command (`cli_*`): the app shows it beside the result.
"""

from __future__ import annotations

import math
import re
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.grading.normalize import normalize
from workbench.html import macro
from workbench.html.evidence import attribution_context
from workbench.html.plots import delta_plot_html, group_deltas
from workbench.html.signoff import signoff_line
from workbench.html.verdict import verdict_context
from workbench.naming import candidate_name
from workbench.regression.comparison import ComparisonResult
from workbench.regression.policy import Policy
from workbench.regression.recorded import RecordedGate
from workbench.regression.stats import VERDICT_ORDER
from workbench.regression.transitions import Flip, Transition, flip_of, transition_of, verdict_changed
from workbench.results import ProbeResult
from workbench.store import RunRecord, Store, shown_time
from workbench.types import Verdict

RUN_COLUMNS = ("run", "created", "status", "candidate", "suite", "n", "correct %", "hallucinated %", "abstained %",
               "F", "release")
PROBE_COLUMNS = ("probe", "question", "accepted answer", "change", "baseline verdict", "baseline answer",
                 "candidate verdict", "candidate answer", "tags", "category")
TRUNCATED = " ✂ [cut at max_tokens]"
"""Appended to an answer the backend stopped at the token limit (finish_reason `length`): its grade may be
about a cut answer."""
METRIC_COLUMNS = ("metric", "baseline %", "candidate %", "delta pts", "ci low", "ci high")
TRANSITION_COLUMNS = ("baseline \\ candidate", *(str(v) for v in VERDICT_ORDER))
REVIEW_COLUMNS = ("id", "at", "reviewer", "target", "run", "probe", "old", "new", "reason")
GATE_COLUMNS = ("gate", "at", "baseline", "candidate run", "candidate", "verdict", "sign-off")
ANY_CHANGE = "any verdict change"
TRANSITION_FILTERS = (ANY_CHANGE, "broken", "fixed", *(str(t) for t in Transition if t != Transition.FIXED), "all",
                      *(f"{a} -> {b}" for a in VERDICT_ORDER for b in VERDICT_ORDER))
"""The Compare tab's transition filter: any verdict change (the default), McNemar's broken / fixed, each named
Transition (`now_abstains`: a hallucination traded for abstention, ...), all probes, or one matrix cell."""
_VERDICT_CSS = {"correct": "#1a7f37", "incorrect": "#cf222e", "not_attempted": "#9a6700"}


def empty(columns: Sequence[str]) -> pd.DataFrame:
    """A table with headers and no rows: what a table shows before its first result (not gradio's 1 2 3)."""
    return pd.DataFrame(columns=list(columns))


# -- CLI equivalents ---------------------------------------------------------------------------------


def _cli(workspace: str | Path, *args: str) -> str:
    return shlex.join(["workbench", *args, "--workspace", str(workspace)])


def cli_runs(workspace: str | Path) -> str:
    return _cli(workspace, "runs")


def cli_show(workspace: str | Path, run_id: str) -> str:
    return _cli(workspace, "show", run_id)


def cli_regress(workspace: str | Path, baseline: str, candidate: str) -> str:
    return _cli(workspace, "regress", "--baseline", baseline, "--candidate", candidate)


def cli_history(workspace: str | Path) -> str:
    return _cli(workspace, "history")


def cli_review(workspace: str | Path, run_id: str, *, target: str, value: str, reason: str,
               probe_id: str | None = None, reviewer: str = "", gate_id: str | None = None,
               confirm: bool = False, override_reason: str | None = None) -> str:
    args = ["review", run_id, "--target", target, "--value", value, "--reason", reason]
    if probe_id:
        args += ["--probe", probe_id]
    if gate_id:
        args += ["--gate", gate_id]
    if confirm:
        args += ["--confirm"]
    if override_reason:
        args += ["--override-reason", override_reason]
    if reviewer:
        args += ["--reviewer", reviewer]
    return _cli(workspace, *args)


def refusal(e: BaseException) -> str:
    """Markdown for a refused action, shown beside its form (the page's other results stay)."""
    return f"**not recorded**: {str(e).strip(chr(39) + chr(34))}"


# -- Runs tab ----------------------------------------------------------------------------------------


def run_label(run: RunRecord) -> str:
    """`run-... · SmolLM2 + sft fix of run-... step 120 · suite` for dropdowns (the candidate named by what made it:
    `naming.candidate_name`); an unfinished run (running, interrupted, failed) starts with its status in capitals,
    so it reads before the dropdown cuts the label."""
    mark = "" if run.status == "done" else f"⚠ {run.status.upper()} · "
    return f"{mark}{run.id} · {candidate_name(run.model, run.adapter)} · {run.suite}"


def run_choices(store: Store) -> list[tuple[str, str]]:
    """(label, run id) pairs, newest first."""
    return [(run_label(r), r.id) for r in reversed(store.list_runs())]


def finished_runs(store: Store) -> list[str]:
    """Ids of the finished (`done`) runs, newest first: the only ones the app preselects."""
    return [r.id for r in reversed(store.list_runs()) if r.status == "done"]


def default_pair(store: Store) -> tuple[str, str]:
    """(baseline, candidate) the app preselects: the latest recorded gate whose runs are both finished, else
    the two newest finished runs (older as baseline); "" where there is none. Unfinished runs never."""
    from workbench.regression.recorded import recorded_gates

    done = finished_runs(store)
    for g in reversed(recorded_gates(store)):
        if g.baseline_run in done and g.candidate_run in done:
            return g.baseline_run, g.candidate_run
    return (done[1] if len(done) > 1 else ""), (done[0] if done else "")


def _pct(m: Mapping[str, Any] | None, key: str) -> float | None:
    v = (m or {}).get(key)
    return round(100 * float(v), 1) if isinstance(v, int | float) else None


def runs_table(store: Store, *, text: str = "", status: str = "", suite: str = "") -> pd.DataFrame:
    """One row per run, newest first: the candidate by name (`naming.candidate_name`), its metrics and the latest
    release decision on it with what it stands on (`reviews.Standing.text`: the gate's verdict, an override, a later
    gate that did not clear). `text` matches run id, name, model or adapter path (case-insensitive); `status` and
    `suite` match exactly when given. Metrics are percentages of the greedy answers."""
    from workbench.reviews import standings

    decided = {s.decision.run_id: s for s in standings(store)}  # in the order recorded: a run's latest wins
    rows = []
    needle = text.strip().lower()
    for r in reversed(store.list_runs()):
        name = candidate_name(r.model, r.adapter)
        if needle and needle not in " ".join([r.id, name, r.model, r.adapter or ""]).lower():
            continue
        if (status and r.status != status) or (suite and r.suite != suite):
            continue
        m = (r.metrics or {}).get("overall")
        release = decided.get(r.id)
        rows.append([r.id, shown_time(r.created_at), r.status, name, r.suite, r.n_probes, _pct(m, "correct"),
                     _pct(m, "incorrect"), _pct(m, "not_attempted"), _pct(m, "f_score"),
                     release.text() if release else ""])
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def interrupted_note(store: Store) -> str:
    """Markdown naming each run whose process is gone (status `interrupted`) and how to resume it."""
    return macro("views.html", "interrupted", [(r.id, r.note) for r in reversed(store.list_runs()) if r.note])


def run_filters(store: Store) -> dict[str, list[str]]:
    """Values the Runs tab's filter dropdowns offer."""
    runs = store.list_runs()
    return {"status": sorted({r.status for r in runs}), "suite": sorted({r.suite for r in runs})}


# -- Compare tab -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareView:
    """The Compare tab's content for one baseline/candidate pair and filter."""

    summary_html: str
    metrics: pd.DataFrame  # metric, baseline %, candidate %, delta pts, ci low, ci high (selected group)
    transitions: pd.DataFrame  # 3x3 counts, rows baseline verdict, columns candidate verdict
    probes: pd.DataFrame  # PROBE_COLUMNS, filtered
    probe_ids: list[str]  # the probes listed, in order
    cli: str
    verdict: str
    delta_plot: str = ""  # per tag / category changes with intervals (plots.delta_plot_html)


def compare_runs(store: Store, baseline: str, candidate: str, *, tag: str = "", transition: str = ANY_CHANGE,
                 category: str = "") -> CompareView:
    """Paired comparison of two stored runs, as `workbench regress` computes it (reviewers' verdicts and
    categories applied: `gating.compare_stored`), without recording a gate. Filters apply to the
    probe list (`category` keeps probes either run's attribution puts there), and `tag` also selects the group
    whose metrics and transitions are shown. The list shows
    broken probes first, then the rest in natural id order (nq2 before nq10)."""
    from workbench.gating import compare_stored
    from workbench.results import load_results

    if transition not in TRANSITION_FILTERS:
        raise ValueError(f"`transition` must be one of {', '.join(TRANSITION_FILTERS)}, got {transition!r}")
    recorded, policy, policy_label = _recorded_policy(store, baseline, candidate)
    result, b_out, c_out = compare_stored(store, baseline, candidate, policy)
    b_res, c_res = load_results(store, b_out.run_id).by_id(), load_results(store, c_out.run_id).by_id()
    group = result.by_tag.get(tag, result.overall) if tag else result.overall
    metrics = pd.DataFrame([[m, round(100 * d.baseline, 1), round(100 * d.candidate, 1), round(100 * d.delta, 1),
                             round(100 * d.ci_low, 1), round(100 * d.ci_high, 1)]
                            for m, d in group.metrics.items()],
                           columns=list(METRIC_COLUMNS))
    transitions = pd.DataFrame([[str(VERDICT_ORDER[i]), *row] for i, row in enumerate(group.transitions.counts)],
                               columns=list(TRANSITION_COLUMNS))
    rows = []
    for pid in sorted(b_out.outcomes, key=lambda p: (flip_of(b_out.outcomes[p].verdict, c_out.outcomes[p].verdict)
                                                    != Flip.BROKEN, natural_key(p))):
        b, c = b_out.outcomes[pid], c_out.outcomes[pid]
        if tag and tag not in b.tags:
            continue
        if category and category not in (b.category, c.category):  # reviewed categories, as the gate reads them
            continue
        if not _transition_matches(transition, b.verdict, c.verdict):
            continue
        probe = b_res[pid].probe
        rows.append([pid, probe.question, " | ".join(probe.answers), str(transition_of(b.verdict, c.verdict)),
                     str(b.verdict), answer_cell(b_res[pid]), str(c.verdict), answer_cell(c_res[pid]),
                     ", ".join(b.tags), category_cell(b.category, c.category)])
    probes = pd.DataFrame(rows, columns=list(PROBE_COLUMNS))
    summary = macro("views.html", "compare_summary",
                    verdict_context(result, signoff_line(store, b_out.run_id, c_out.run_id), recorded, policy_label),
                    known_facts_lines(store, result), group.name, group.n, len(rows),
                    result.risk.line() if result.risk else "")
    return CompareView(summary, metrics, transitions, probes, [r[0] for r in rows],
                       cli_regress(store.workspace, b_out.run_id, c_out.run_id), result.verdict,
                       delta_plot_html(group_deltas(result, b_out, c_out)))


def _recorded_policy(store: Store, baseline: str, candidate: str) -> tuple[RecordedGate | None, Policy | None, str]:
    """The pair's latest recorded gate, the policy a what-if is computed under (the gate's own, else the built-in
    one: None) and that policy's name."""
    from workbench.regression.recorded import BUILT_IN, read_gates

    gates = read_gates(store, baseline=store.get_run(baseline).id, candidate=store.get_run(candidate).id)
    if not gates:
        return None, None, f"the {BUILT_IN}"
    gate = gates[-1]
    try:
        return gate, Policy.model_validate(gate.policy), f"the recorded gate's {gate.policy_label}"
    except ValueError:  # a policy this version cannot read (a gate type it does not know)
        return gate, None, f"the {BUILT_IN} (the recorded policy cannot be read)"


def category_cell(baseline: str | None, candidate: str | None) -> str:
    """The probe table's category cell, saying whose attribution it is: a run is attributed only where it
    failed, so a broken probe carries the candidate's, a fixed one the baseline's, a still-wrong one both
    ("data:missing (both)", or each run's when they differ). The gate's per-category counts use the baseline's."""
    if baseline and candidate:
        return f"{baseline} (both)" if baseline == candidate else f"{baseline} (baseline's) · {candidate} (candidate's)"
    if baseline:
        return f"{baseline} (baseline's)"
    return f"{candidate} (candidate's)" if candidate else ""


def compare_or_refusal(store: Store, baseline: str, candidate: str, *, tag: str = "", transition: str = ANY_CHANGE,
                       category: str = "") -> CompareView:
    """`compare_runs`, or, when it cannot compare (no pair picked, unfinished runs, different settings), an
    empty view whose summary says why: a refusal replaces the previous pair's result, never sits beside it."""
    try:
        if not baseline or not candidate:
            raise WorkbenchError("pick a baseline and a candidate run")
        return compare_runs(store, baseline, candidate, tag=tag, transition=transition, category=category)
    except (WorkbenchError, ValueError, KeyError) as e:
        return CompareView(macro("views.html", "refused", str(e).strip(chr(39) + chr(34))),
                           empty(METRIC_COLUMNS), empty(TRANSITION_COLUMNS), empty(PROBE_COLUMNS), [],
                           cli_regress(store.workspace, baseline, candidate) if baseline and candidate else "", "")


PAGE_SIZES = (25, 50, 100, 200)
"""Probe-table page sizes the app offers; 50 rows of wrapped answers fill about two screens at 1400x1000."""


@dataclass(frozen=True)
class ProbePage:
    """One page of the probe table after the search: the rows shown, every matching id (in order, for the
    detail's next/previous), the page number (1-based, clamped) and its "page k of n" label."""

    table: pd.DataFrame
    matching_ids: list[str]
    page: int
    pages: int
    label: str


def page_probes(df: pd.DataFrame, *, query: str = "", page: int = 1, size: int = 50) -> ProbePage:
    """Search then page the probe table: `query` keeps rows where any cell contains it (case-insensitive),
    `page` is clamped to 1..pages, `size` must be one of PAGE_SIZES."""
    if size not in PAGE_SIZES:
        raise ValueError(f"`page size` must be one of {', '.join(map(str, PAGE_SIZES))}, got {size}")
    needle = query.strip().lower()
    if needle and not df.empty:
        hit = df.astype(str).apply(lambda col: col.str.lower().str.contains(needle, regex=False)).any(axis=1)
        df = df[hit]
    pages = max(1, -(-len(df) // size))
    page = max(1, min(int(page), pages))
    part = df.iloc[(page - 1) * size: page * size].reset_index(drop=True)
    first = (page - 1) * size + 1 if len(df) else 0
    label = f"page {page} of {pages} · rows {first}-{first + len(part) - 1 if len(part) else 0} of {len(df)}"
    if needle:
        label += f" matching “{query.strip()}”"
    ids = [str(x) for x in df["probe"]] if "probe" in df.columns else []
    return ProbePage(part, ids, page, pages, label)


def answer_cell(pr: ProbeResult) -> str:
    """The greedy answer to the question, marked when the backend cut it at the token limit."""
    g = pr.greedy[0]
    return g.text + (TRUNCATED if g.finish_reason == "length" else "")


_CHANGE_CSS = {"broken_hallucinates": "#cf222e", "broken_abstains": "#cf222e", "fixed": "#1a7f37",
               "now_abstains": "#9a6700", "now_hallucinates": "#cf222e"}


def styled_probes(df: pd.DataFrame) -> Any:
    """The probe table with coloured verdicts and changes (a pandas Styler, which gr.Dataframe renders)."""
    def colour(css: Mapping[str, str]) -> Any:
        return lambda v: f"color: {css[v]}; font-weight: 600" if v in css else ""

    verdicts = [c for c in ("baseline verdict", "candidate verdict") if c in df.columns]
    styler = df.style.map(colour(_VERDICT_CSS), subset=verdicts)
    return styler.map(colour(_CHANGE_CSS), subset=["change"]) if "change" in df.columns else styler


_TRANSITION_RGB = {Transition.BROKEN_HALLUCINATES: (207, 34, 46), Transition.BROKEN_ABSTAINS: (207, 34, 46),
                   Transition.NOW_HALLUCINATES: (207, 34, 46), Transition.FIXED: (26, 127, 55),
                   Transition.NOW_ABSTAINS: (154, 103, 0)}  # unchanged cells: grey


def transition_heatmap(df: pd.DataFrame) -> Any:
    """The 3x3 transition matrix (`CompareView.transitions`) as a heatmap Styler: each cell's shade grows with
    its share of the largest cell; red where a probe got worse, green fixed, amber a hallucination traded for
    abstention, grey unchanged; an empty cell stays blank."""
    if df.empty:
        return df
    top = max(1, int(df.iloc[:, 1:].to_numpy().max()))
    cols = list(df.columns[1:])

    def shade(row: pd.Series) -> list[str]:
        out = [""]
        for col in cols:
            k = int(row[col])
            r, g, b = _TRANSITION_RGB.get(transition_of(Verdict(row.iloc[0]), Verdict(col)), (110, 119, 129))
            out.append(f"background-color: rgba({r},{g},{b},{0.15 + 0.6 * k / top:.2f})" if k else "")
        return out

    return df.style.apply(shade, axis=1)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders digit runs by value: nq2 before nq10."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def _transition_matches(kind: str, b: Verdict, c: Verdict) -> bool:
    if kind == "all":
        return True
    if kind == ANY_CHANGE:
        return verdict_changed(b, c)
    if "->" in kind:
        return kind == f"{b} -> {c}"
    if kind in ("broken", "fixed"):
        return str(flip_of(b, c)) == kind
    return str(transition_of(b, c)) == kind


def compare_filters(store: Store, baseline: str, candidate: str) -> dict[str, list[str]]:
    """Tags and attribution categories present in the pair (for the filter dropdowns)."""
    from workbench.results import load_results
    from workbench.reviews import effective_attributions

    tags = sorted({t for r in load_results(store, baseline).probes for t in r.probe.tags})
    cats = {a.category for run in (baseline, candidate) for a in effective_attributions(store, run).values()}
    return {"tag": tags, "category": sorted(cats), "transition": list(TRANSITION_FILTERS)}


# -- Probe detail ------------------------------------------------------------------------------------


def entropy(texts: Sequence[str]) -> float | None:
    """Count-based entropy (nats) of normalized answers; None without answers."""
    if not texts:
        return None
    counts = Counter(normalize(t) for t in texts)
    n = len(texts)
    return -sum(k / n * math.log(k / n) for k in counts.values()) + 0.0


def probe_detail(store: Store, probe_id: str, run_ids: Sequence[str]) -> str:
    """HTML: the probe (question, paraphrases, accepted and known-wrong answers), then per run its greedy
    answer per variant and samples with grades, agreement and entropy, reviewer overrides, and the
    attribution with its evidence (corpus rows that support or contradict)."""
    from workbench.results import load_results
    from workbench.reviews import effective_attributions, list_reviews

    probe_id = probe_id.strip()
    if not probe_id:
        return "<p><i>pick a probe</i></p>"
    probe: Any = None
    sections: list[dict[str, Any]] = []  # per run: its answers and attribution, or answers None (not answered)
    for rid in dict.fromkeys(r for r in run_ids if r):
        res = load_results(store, rid)
        pr = res.by_id().get(probe_id)
        if pr is None:
            sections.append({"run_id": res.run.id, "answers": None})
            continue
        probe = probe or pr.probe
        atts = effective_attributions(store, res.run.id)
        sections.append({"run_id": res.run.id,
                         "answers": _run_answers(res.run, pr, list_reviews(store, res.run.id, probe_id=probe_id)),
                         "attribution": attribution_context(atts.get(probe_id)),
                         "missing": _why_no_attribution(pr, bool(atts))})
    return macro("views.html", "probe_detail", probe_id, probe, sections, _VERDICT_CSS)


def _why_no_attribution(pr: ProbeResult, attributed: bool) -> str:
    """Why a probe of an attributed run has no attribution ("" for a run never attributed: the template says so)."""
    if not attributed:
        return ""
    if pr.verdict == Verdict.CORRECT:
        return "answered correctly: nothing to attribute (attribution explains a run's failures)"
    return "this run's attribution left this probe out (attributed before a reviewer changed its grade?)"


def detail_choices(store: Store, baseline: str, candidate: str, listed: Sequence[str] = ()) -> list[str]:
    """The probes Probe detail offers for a pair: the ones Compare lists, in its order, then every other probe of
    the baseline run in natural id order; [] without a pair."""
    from workbench.results import load_results

    if not baseline or not candidate:
        return []
    ids = sorted((r.probe.id for r in load_results(store, baseline).probes), key=natural_key)
    return list(dict.fromkeys([*(i for i in listed if i in set(ids)), *ids]))


def step_probe(probe_ids: Sequence[str], current: str, step: int) -> str:
    """The probe `step` places after `current` in the listed probes (negative: before), clamped to the list;
    the first (or, stepping back, the last) when `current` is not listed; `current` when nothing is listed."""
    if not probe_ids:
        return current
    if current not in probe_ids:
        return probe_ids[0] if step >= 0 else probe_ids[-1]
    return probe_ids[max(0, min(len(probe_ids) - 1, list(probe_ids).index(current) + step))]


def _run_answers(run: RunRecord, pr: Any, reviews: Sequence[Any]) -> dict[str, Any]:
    """What `views.html`'s run_answers macro shows of one run's answers to the probe."""
    verdict_reviews = [r for r in reviews if r.target == "verdict"]
    last = verdict_reviews[-1] if verdict_reviews else None
    ent = entropy([a.text for a in pr.samples if a.variant == 0])
    return {
        "model": candidate_name(run.model, run.adapter), "run_id": run.id,
        "override": None if last is None else {"old_value": last.old_value, "new_value": last.new_value,
                                               "reviewer": last.reviewer, "at": shown_time(last.at),
                                               "reason": last.reason},
        "agreement": f"{pr.agreement:.2f}" if pr.agreement is not None else "-",
        "entropy": "-" if ent is None else f"{ent:.2f}", "sample_accuracy": pr.sample_accuracy,
        "mean_logprob": "-" if pr.mean_logprob is None else f"{pr.mean_logprob:.2f}",
        "variants": [{"name": "question" if g.variant == 0 else f"paraphrase {g.variant}", "text": g.text,
                      "cut": TRUNCATED if g.finish_reason == "length" else "", "verdict": str(g.verdict),
                      "samples": [(a.text, str(a.verdict)) for a in pr.samples if a.variant == g.variant]}
                     for g in pr.greedy],
        # the exact text the model got (template applied), on demand
        "prompt": pr.greedy[0].prompt if pr.greedy else None,
    }


# -- Review tab --------------------------------------------------------------------------------------


def reviews_table(store: Store, run_id: str | None = None) -> pd.DataFrame:
    """The review log, newest first."""
    from workbench.reviews import list_reviews

    cols = list(REVIEW_COLUMNS)
    rows = [[r.id, r.at, r.reviewer, r.target, r.run_id, r.probe_id or "", r.old_value or "", r.new_value,
             r.reason + (f"; override: {r.override_reason}" if r.override_reason else "")]
            for r in reversed(list_reviews(store, run_id or None))]
    return pd.DataFrame(rows, columns=cols)


def gate_history_table(store: Store) -> pd.DataFrame:
    """Recorded gates (newest first) with the release decision on each (its override, later gates of the
    candidate that did not clear), and decisions outside any gate: `workbench history`'s rows."""
    from workbench.releases import release_history

    cols = list(GATE_COLUMNS)
    rows = []
    for h in reversed(release_history(store)):
        s = h["signoff"]
        rows.append([h["gate_id"] or "(no gate)", shown_time(h["created_at"]), h["baseline_run"] or "",
                     h["candidate_run"], candidate_name(h["model"], h["adapter"]), (h["verdict"] or "").upper(),
                     "" if s is None else f"{s['text']}; reason: {s['reason']}"])
    return pd.DataFrame(rows, columns=cols)


def known_facts_html(store: Store, result: ComparisonResult) -> str:
    """`known_facts_lines` as a list (`ul.known-facts`)."""
    return macro("views.html", "known_facts", known_facts_lines(store, result))


def known_facts_lines(store: Store, result: ComparisonResult) -> list[str]:
    """The known-facts lines of a comparison (probes, replayed and unreplayed apart) and the guard set's line from
    the latest recorded gate of the same pair: the app compares without evaluating anything, and the guard's runs
    are `workbench regress`'s to make."""
    from workbench.gating import latest_gate
    from workbench.regression.comparison import KnownFacts

    lines = [k.line() for k in result.known if k.scope == "probes"]
    gate_id, recorded = latest_gate(store, result.baseline_run_id, result.candidate_run_id) or ("", {})
    guard = [KnownFacts(**{k: v for k, v in d.items() if k != "broken"})
             for d in recorded.get("known_facts") or () if d.get("scope") == "guard"]
    if guard:
        lines.append(f"{guard[0].line()} (gate {gate_id})")
    elif recorded.get("guard_note"):
        lines.append(f"guard set: not checked by gate {gate_id} ({recorded['guard_note']})")
    else:
        lines.append("guard set: not evaluated for this pair yet (`workbench regress` evaluates it)")
    return lines

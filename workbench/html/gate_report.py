"""The gate's report files: `write_reports`, and the self-contained HTML report (inline CSS, inline SVG charts, no
scripts, no external assets) beside the Markdown, JUnit and JSON ones `workbench.regression.report` renders. Here,
above the gate's package, so that the gate never imports the HTML layer that shows it.

Stable hooks for tests and styling: #verdict, #headline, #broken-probes (right after the headline), #gates
(with what each gate could detect), #inconclusive (only then), #not-checked (only then), #metric-deltas,
#transition-matrix, #transition-counts, #tag-deltas, #fixed-probes, #other-changes, svg.tag-chart (one per tag,
plus one for "overall"). The markup is `templates/report.html` (workbench.html, autoescaped: all text is escaped); this
module gathers its values and the charts' coordinates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from workbench.html import render
from workbench.regression.comparison import ComparisonResult, GroupComparison, ProbeChange
from workbench.regression.report import render_json, render_markdown
from workbench.regression.report_junit import render_junit
from workbench.regression.stats import METRICS
from workbench.regression.transitions import TRANSITION_HELP, Flip
from workbench.regression.wording import (
    INCONCLUSIVE_NOTE,
    MAX_LISTED,
    METRIC_LABELS,
    VERDICT_LABELS,
    ci,
    count_pct,
    known_facts_lines,
    not_checked_line,
    p_value,
    pct,
    pts,
    status_label,
    transition_counts,
    verdict_line,
)

_BASE_COLOUR, _CAND_COLOUR = "#8da0cb", "#fc8d62"
Cell = dict[str, str]  # text, cls: the cell's CSS class ("text" left-aligns it; "" for a number)


def render_html(result: ComparisonResult) -> str:
    """The whole report as one HTML document."""
    others = [c for c in result.changes if c.flip == Flip.STILL_WRONG]
    guard_broken = [c for c in result.guard_changes if c.flip == Flip.BROKEN]
    return render(
        "report.html", r=result, title=f"Regression check: {result.candidate_label} vs {result.baseline_label}",
        verdict_line=verdict_line(result), inconclusive_note=INCONCLUSIVE_NOTE, not_checked=not_checked_line(result),
        headline=_table(["verdict", "baseline", "candidate", "Δ (pt)", "CI (pt)"],
                        ([_text(r.label), *(_num(x) for x in (count_pct(r.baseline_count, r.delta.baseline),
                                                              count_pct(r.candidate_count, r.delta.candidate),
                                                              pts(r.delta.delta), ci(r.delta)))]
                         for r in result.headline.rows)),
        transition_counts=transition_counts(result.overall.transitions),
        broken=_changes(result.broken), known_facts=known_facts_lines(result),
        guard_broken=_changes(guard_broken) if guard_broken else None,
        gates=_table(["status", "gate", "severity", "result", "could detect on this probe set", "details",
                      "description"],
                     ([{"text": status_label(g.status), "cls": f"text {g.status}"}, _text(g.name), _text(g.severity),
                       _text(g.message), _text(g.detectable.text if g.detectable else ""),
                       _text("; ".join((*g.details, *(g.detectable.details if g.detectable else ())))),
                       _text(g.description)] for g in result.gates)),
        metrics=_table(["metric", "baseline", "candidate", "Δ (pt)", "CI (pt)"],
                       ([_text(METRIC_LABELS[m]), *(_num(x) for x in _metric_row(result.overall, m))]
                        for m in METRICS)),
        mcnemar_p=p_value(result.overall.mcnemar.p_value),
        matrix=_table(["baseline \\ candidate", *VERDICT_LABELS],
                      ([_text(label), *(_num(str(x)) for x in row)]
                       for label, row in zip(VERDICT_LABELS, result.overall.transitions.counts, strict=True))),
        tags=_tag_table(result) if result.by_tag else None,
        charts=[_chart(g) for g in (result.overall, *result.by_tag.values())],
        fixed=_changes(result.fixed), others=_changes(others),
        other_help=[(str(t), TRANSITION_HELP[t]) for t in TRANSITION_HELP
                    if t.flip == Flip.STILL_WRONG and t.changed],
    )


def _text(s: str) -> Cell:
    return {"text": s, "cls": "text"}


def _num(s: str) -> Cell:
    return {"text": s, "cls": ""}


def _table(headers: Sequence[str], rows: Iterable[Sequence[Cell]]) -> dict[str, Any]:
    return {"headers": list(headers), "rows": [list(r) for r in rows]}


def _metric_row(g: GroupComparison, metric: str) -> list[str]:
    d = g.metrics[metric]
    return [pct(d.baseline), pct(d.candidate), pts(d.delta), ci(d)]


def _tag_table(result: ComparisonResult) -> dict[str, Any]:
    headers = ["tag", "n", "Δ correct", "CI", "Δ incorrect", "CI", "fixed", "broken", "McNemar p"]
    rows = []
    for tag, g in result.by_tag.items():
        c, i = g.metrics["correct"], g.metrics["incorrect"]
        cells = [str(g.n), pts(c.delta), ci(c), pts(i.delta), ci(i), str(g.transitions.fixed),
                 str(g.transitions.broken), p_value(g.mcnemar.p_value)]
        rows.append([_text(tag), *(_num(x) for x in cells)])
    return _table(headers, rows)


def _changes(changes: Sequence[ProbeChange]) -> dict[str, Any]:
    """The first MAX_LISTED changes as a table, `more` the number left out, `count` all of them."""
    headers = ["probe", "question", "tags", "baseline", "baseline answer", "candidate", "candidate answer",
               "transition"]
    rows = [[_text(x) for x in (c.probe_id, c.question, ", ".join(c.tags), str(c.baseline_verdict),
                                c.baseline_answer, str(c.candidate_verdict), c.candidate_answer,
                                str(c.transition))]
            for c in changes[:MAX_LISTED]]
    return {**_table(headers, rows), "more": len(changes) - MAX_LISTED, "count": len(changes)}


def _chart(g: GroupComparison) -> dict[str, Any]:
    """Grouped bars: baseline vs candidate rate of each verdict, 0-100%; the coordinates `report.html` draws."""
    w, h, top, bottom, left = 330, 190, 28, 34, 34
    plot_h = h - top - bottom
    group_w = (w - left - 10) / 3
    bar_w = group_w * 0.32
    groups = []
    for k, (metric, label) in enumerate(zip(("correct", "incorrect", "not_attempted"), VERDICT_LABELS,
                                            strict=True)):
        d = g.metrics[metric]
        x0 = left + k * group_w + group_w * 0.15
        bars = [{"who": who, "colour": colour, "x": x0 + j * (bar_w + 2), "y": top + plot_h - plot_h * value,
                 "h": plot_h * value, "pct": pct(value)}
                for j, (value, colour, who) in enumerate(((d.baseline, _BASE_COLOUR, "baseline"),
                                                          (d.candidate, _CAND_COLOUR, "candidate")))]
        groups.append((label, x0 + bar_w, bars))
    return {"name": g.name, "n": g.n, "w": w, "h": h, "left": left, "bottom": bottom, "bar_w": bar_w,
            "grid": [(frac, top + plot_h * (1 - frac)) for frac in (0.0, 0.5, 1.0)], "groups": groups,
            "legend_y": h - 8, "base_colour": _BASE_COLOUR, "cand_colour": _CAND_COLOUR}


def write_reports(result: ComparisonResult, out_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.html, junit.xml and comparison.json into out_dir; returns them by format."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "markdown": (out / "report.md", render_markdown(result)),
        "html": (out / "report.html", render_html(result)),
        "junit": (out / "junit.xml", render_junit(result)),
        "json": (out / "comparison.json", render_json(result)),
    }
    for path, text in files.values():
        path.write_text(text, encoding="utf-8")
    return {k: path for k, (path, _) in files.items()}

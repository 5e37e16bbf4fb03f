"""A self-contained HTML report: inline CSS, inline SVG charts, no scripts, no external assets.

Stable hooks for tests and styling: #verdict, #headline, #broken-probes (right after the headline), #gates
(with what each gate could detect), #inconclusive (only then), #metric-deltas, #transition-matrix,
#transition-counts, #tag-deltas, #fixed-probes, #other-changes, svg.tag-chart (one per tag, plus one for
"overall"). All text is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from workbench.regression._format import (
    INCONCLUSIVE_NOTE,
    MAX_LISTED,
    METRIC_LABELS,
    VERDICT_LABELS,
    ci,
    count_pct,
    known_facts_lines,
    p_value,
    pct,
    pts,
    transition_counts,
    verdict_line,
)
from workbench.regression.results import ComparisonResult, GroupComparison, ProbeChange
from workbench.regression.stats import METRICS
from workbench.regression.transitions import TRANSITION_HELP, Flip

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{text-align:left}
th:first-child,td:first-child,td.text{text-align:left}
#verdict{font-size:1.6em;font-weight:bold;padding:.3em .8em;display:inline-block;border-radius:.3em}
.pass{background:#d4f5d4;color:#145214}.warn{background:#fff3c4;color:#6b5200}
.fail{background:#fbd5d5;color:#7a1010}.inconclusive{background:#ead8f5;color:#4b1670}
.charts{display:flex;flex-wrap:wrap;gap:1em}
svg.tag-chart{border:1px solid #ddd;background:#fff}
"""
_BASE_COLOUR, _CAND_COLOUR = "#8da0cb", "#fc8d62"


def render_html(result: ComparisonResult) -> str:
    """The whole report as one HTML document."""
    title = f"Regression check: {result.candidate_label} vs {result.baseline_label}"
    others = [c for c in result.changes if c.flip == Flip.STILL_WRONG]
    guard_broken = [c for c in result.guard_changes if c.flip == Flip.BROKEN]
    body = [
        f"<h1>{escape(title)}</h1>",
        f'<p id="verdict" class="{result.verdict}">{result.verdict.upper()}</p>',
        f'<p class="verdict-line">{escape(verdict_line(result))}</p>',
        *([f'<p id="inconclusive" class="inconclusive">{escape(INCONCLUSIVE_NOTE)}</p>']
          if result.inconclusive_gates else []),
        f"<p>Candidate <b>{escape(result.candidate_label)}</b> ({escape(result.candidate_run_id)}) vs "
        f"baseline <b>{escape(result.baseline_label)}</b> ({escape(result.baseline_run_id)}): "
        f"{result.overall.n} probes. Δ in points (candidate − baseline) with paired bootstrap CIs "
        f"({result.policy.bootstrap.resamples} resamples, seed {result.policy.bootstrap.seed}, "
        f"{result.policy.bootstrap.confidence:.0%}).</p>",
        "<h2>All probes, baseline → candidate</h2>",
        _table(
            "headline",
            ["verdict", "baseline", "candidate", "Δ (pt)", "CI (pt)"],
            (
                [
                    _text(r.label),
                    _num(count_pct(r.baseline_count, r.delta.baseline)),
                    _num(count_pct(r.candidate_count, r.delta.candidate)),
                    _num(pts(r.delta.delta)),
                    _num(ci(r.delta)),
                ]
                for r in result.headline.rows
            ),
        ),
        f'<p id="transition-counts">Verdict changes: {escape(transition_counts(result.overall.transitions))}.</p>',
        f"<h2>Broken probes ({len(result.broken)})</h2>",
        "<p>Probes the baseline got right that the candidate gets wrong or abstains on.</p>",
        _changes("broken-probes", result.broken),
        "<h2>Known facts</h2>",
        '<ul id="known-facts">' + "".join(f"<li>{escape(line)}</li>" for line in known_facts_lines(result)) + "</ul>",
        *([f"<h3>Guard facts broken ({len(guard_broken)})</h3>", _changes("guard-broken", guard_broken)]
          if guard_broken else []),
        "<h2>Gates</h2>",
        _table(
            "gates",
            ["status", "gate", "severity", "result", "could detect on this probe set", "details", "description"],
            (
                [
                    _cell(g.status, g.status),
                    _text(g.name),
                    _text(g.severity),
                    _text(g.message),
                    _text(g.detectable.text if g.detectable else ""),
                    _text("; ".join((*g.details, *(g.detectable.details if g.detectable else ())))),
                    _text(g.description),
                ]
                for g in result.gates
            ),
        ),
        "<h2>Metric deltas</h2>",
        _table(
            "metric-deltas",
            ["metric", "baseline", "candidate", "Δ (pt)", "CI (pt)"],
            ([_text(METRIC_LABELS[m]), *(_num(x) for x in _metric_row(result.overall, m))] for m in METRICS),
        ),
        _mcnemar_line(result.overall),
        "<h2>Transition matrix</h2>",
        _table(
            "transition-matrix",
            ["baseline \\ candidate", *VERDICT_LABELS],
            (
                [_text(label), *(_num(str(x)) for x in row)]
                for label, row in zip(VERDICT_LABELS, result.overall.transitions.counts, strict=True)
            ),
        ),
        _flip_line(result.overall),
    ]
    if result.by_tag:
        body += ["<h2>Per tag</h2>", _tag_table(result)]
    body += ['<h2>Correct / incorrect / not attempted per tag</h2><div class="charts">']
    body += [_chart(g) for g in (result.overall, *result.by_tag.values())]
    body += [
        "</div>",
        f"<h2>Fixed probes ({len(result.fixed)})</h2>",
        _changes("fixed-probes", result.fixed),
        f"<h2>Other verdict changes ({len(others)})</h2>",
        "<p>Not correct before or after, but the verdict changed: "
        + "; ".join(f"<b>{t}</b>: {escape(TRANSITION_HELP[t])}" for t in TRANSITION_HELP if t.flip == Flip.STILL_WRONG
                    and t.changed)
        + ".</p>",
        _changes("other-changes", others),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _text(s: str) -> str:
    return f'<td class="text">{escape(s)}</td>'


def _num(s: str) -> str:
    return f"<td>{escape(s)}</td>"


def _cell(s: str, cls: str) -> str:
    return f'<td class="text {escape(cls)}">{escape(s)}</td>'


def _table(table_id: str, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(r) + "</tr>" for r in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _metric_row(g: GroupComparison, metric: str) -> list[str]:
    d = g.metrics[metric]
    return [pct(d.baseline), pct(d.candidate), pts(d.delta), ci(d)]


def _mcnemar_line(g: GroupComparison) -> str:
    mc = g.mcnemar
    return f"<p>McNemar exact: {mc.broken} broken, {mc.fixed} fixed, p = {escape(p_value(mc.p_value))}.</p>"


def _flip_line(g: GroupComparison) -> str:
    tm = g.transitions
    return (
        f'<p class="flips">McNemar\'s split: fixed {tm.fixed}, broken {tm.broken}, not correct either time '
        f"{tm.still_wrong}, still correct {tm.still_correct}.</p>"
    )


def _tag_table(result: ComparisonResult) -> str:
    headers = ["tag", "n", "Δ correct", "CI", "Δ incorrect", "CI", "fixed", "broken", "McNemar p"]
    rows = []
    for tag, g in result.by_tag.items():
        c, i = g.metrics["correct"], g.metrics["incorrect"]
        cells = [
            str(g.n),
            pts(c.delta),
            ci(c),
            pts(i.delta),
            ci(i),
            str(g.transitions.fixed),
            str(g.transitions.broken),
            p_value(g.mcnemar.p_value),
        ]
        rows.append([_text(tag), *(_num(x) for x in cells)])
    return _table("tag-deltas", headers, rows)


def _changes(table_id: str, changes: Sequence[ProbeChange]) -> str:
    headers = ["probe", "question", "tags", "baseline", "baseline answer", "candidate", "candidate answer",
               "transition"]
    rows = [
        [
            _text(c.probe_id),
            _text(c.question),
            _text(", ".join(c.tags)),
            _text(str(c.baseline_verdict)),
            _text(c.baseline_answer),
            _text(str(c.candidate_verdict)),
            _text(c.candidate_answer),
            _text(str(c.transition)),
        ]
        for c in changes[:MAX_LISTED]
    ]
    more = len(changes) - MAX_LISTED
    note = f"<p>… and {more} more (see the JSON report).</p>" if more > 0 else ""
    return _table(table_id, headers, rows) + note


def _chart(g: GroupComparison) -> str:
    """Grouped bars: baseline vs candidate rate of each verdict, 0–100%."""
    w, h, top, bottom, left = 330, 190, 28, 34, 34
    plot_h = h - top - bottom
    group_w = (w - left - 10) / 3
    bar_w = group_w * 0.32
    parts = [
        f'<svg class="tag-chart" data-tag="{escape(g.name)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">',
        f"<title>{escape(g.name)}: verdict rates, baseline vs candidate</title>",
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(g.name)} (n={g.n})</text>',
    ]
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - frac)
        parts.append(
            f'<line x1="{left}" x2="{w - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{frac:.0%}</text>'
        )
    for k, (metric, label) in enumerate(
        zip(("correct", "incorrect", "not_attempted"), VERDICT_LABELS, strict=True)
    ):
        d = g.metrics[metric]
        x0 = left + k * group_w + group_w * 0.15
        for j, (value, colour, who) in enumerate(
            ((d.baseline, _BASE_COLOUR, "baseline"), (d.candidate, _CAND_COLOUR, "candidate"))
        ):
            bh = plot_h * value
            x = x0 + j * (bar_w + 2)
            parts.append(
                f'<rect class="bar {who}" x="{x:.1f}" y="{top + plot_h - bh:.1f}" width="{bar_w:.1f}" '
                f'height="{bh:.1f}" fill="{colour}"><title>{escape(label)}, {who}: {pct(value)}'
                "</title></rect>"
            )
        parts.append(
            f'<text x="{x0 + bar_w:.1f}" y="{h - bottom + 14}" font-size="10" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    legend_y = h - 8
    parts.append(
        f'<rect x="{left}" y="{legend_y - 8}" width="10" height="10" fill="{_BASE_COLOUR}"/>'
        f'<text x="{left + 14}" y="{legend_y}" font-size="10">baseline</text>'
        f'<rect x="{left + 80}" y="{legend_y - 8}" width="10" height="10" fill="{_CAND_COLOUR}"/>'
        f'<text x="{left + 94}" y="{legend_y}" font-size="10">candidate</text>'
    )
    parts.append("</svg>")
    return "".join(parts)

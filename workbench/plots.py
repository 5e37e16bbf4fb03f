"""The app's plots as dependency-free HTML/SVG strings (gr.HTML shows them; tests read them as text).

- `delta_plot_html`: per tag (or, without tags, per attribution category) the candidate-minus-baseline change
  of correct / hallucinated / abstained, each with its paired-bootstrap 95% interval as an error bar. A zero
  change keeps a visible marker and its label.
- `shares_plot_html`: the correct / hallucinated / abstained shares of every run, runs in creation order,
  each point with a hover title naming the run.
- `bar_chart_html`: plain horizontal bars (the pre-flight's memory breakdown, per-tag metrics).
Every label is escaped: tags, categories and run ids come from user files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd

from workbench.regression.stats import METRICS
from workbench.store import Store

SHARES = (("correct", "correct", "#1a7f37"), ("incorrect", "hallucinated", "#cf222e"),
          ("not_attempted", "abstained", "#9a6700"))
"""(metric, label, colour) of the three shares every plot shows, in that order."""
DELTA_COLUMNS = ("group", "n", "measure", "delta pts", "ci low", "ci high")
SHARE_COLUMNS = ("run", "created", "status", "n", "correct %", "hallucinated %", "abstained %")
NO_CATEGORY = "(baseline correct: no attribution)"


def _pct(m: Any, key: str) -> float | None:
    v = (m or {}).get(key)
    return round(100 * float(v), 1) if isinstance(v, int | float) else None


# -- per-group deltas --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupDeltas:
    """Per-group changes of a pair: `by` names the grouping ("tag" or "attribution category")."""

    by: str
    table: pd.DataFrame  # DELTA_COLUMNS, points


def group_deltas(result: Any, baseline: Any, candidate: Any) -> GroupDeltas:
    """Per tag when the probes have tags (the comparison's own per-tag groups), else per the baseline's
    attribution category (probes the baseline got right form their own group), each with the correct,
    hallucinated and abstained deltas and their paired-bootstrap intervals (the policy's bootstrap settings).
    `result` is a ComparisonResult, `baseline` / `candidate` its RunOutcomes."""
    from workbench.regression.stats import paired_bootstrap

    groups: list[tuple[str, int, dict[str, Any]]]
    if result.by_tag:
        by = "tag"
        groups = [(name, g.n, g.metrics) for name, g in sorted(result.by_tag.items())]
    else:
        by = "attribution category"
        members: dict[str, list[str]] = {}
        for pid, o in baseline.outcomes.items():
            members.setdefault(o.category or NO_CATEGORY, []).append(pid)
        bs = result.policy.bootstrap
        groups = [(name, len(ids), paired_bootstrap([baseline.outcomes[i].verdict for i in ids],
                                                    [candidate.outcomes[i].verdict for i in ids],
                                                    bs.resamples, bs.seed, bs.confidence))
                  for name, ids in sorted(members.items())]
    rows = [[name, n, label, round(100 * m[key].delta, 1), round(100 * m[key].ci_low, 1),
             round(100 * m[key].ci_high, 1)] for name, n, m in groups for key, label, _ in SHARES]
    return GroupDeltas(by, pd.DataFrame(rows, columns=list(DELTA_COLUMNS)))


def delta_plot_html(d: GroupDeltas, *, width: int = 620) -> str:
    """Horizontal dot-and-whisker plot: one row per group and measure, the dot at the delta, the whisker its
    interval, a zero line; a zero delta is a hollow dot with its "+0.0" label, never an invisible bar."""
    df = d.table
    if df.empty:
        return "<p><i>nothing to plot</i></p>"
    lo = min(-1.0, float(df["ci low"].min()))
    hi = max(1.0, float(df["ci high"].max()))
    left, right, row_h = 230, 70, 16
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + plot_w * (v - lo) / (hi - lo)

    colour = {label: c for _, label, c in SHARES}
    height = 30 + row_h * len(df) + 8 * df["group"].nunique()
    parts = [f"<svg class='wb-delta-plot' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"font-size='11' font-family='sans-serif'>",
             f"<line x1='{x(0):.1f}' y1='14' x2='{x(0):.1f}' y2='{height - 4}' stroke='#57606a' "
             "stroke-dasharray='3,3'/>",
             f"<text x='{x(0):.1f}' y='10' text-anchor='middle' fill='#57606a'>0</text>",
             f"<text x='{x(lo):.1f}' y='10' fill='#57606a'>{lo:+.0f} pt</text>",
             f"<text x='{x(hi):.1f}' y='10' text-anchor='end' fill='#57606a'>{hi:+.0f} pt</text>"]
    y, last = 22.0, None
    for group, n, measure, delta, ci_lo, ci_hi in df.itertuples(index=False):
        if group != last:
            y += 8
            parts.append(f"<text x='4' y='{y + 4:.0f}' font-weight='bold'>{escape(_short(str(group)))} "
                         f"<tspan font-weight='normal' fill='#57606a'>(n={int(n)})</tspan></text>")
            last = group
        c = colour[str(measure)]
        tip = escape(f"{group}: {measure} {delta:+.1f} pt [{ci_lo:+.1f}, {ci_hi:+.1f}] (n={n})", quote=True)
        parts.append(f"<g class='wb-delta'><title>{tip}</title>"
                     f"<text x='{left - 6}' y='{y + 4:.0f}' text-anchor='end' fill='{c}'>{escape(str(measure))}</text>"
                     f"<line x1='{x(ci_lo):.1f}' y1='{y:.0f}' x2='{x(ci_hi):.1f}' y2='{y:.0f}' stroke='{c}' "
                     "stroke-width='2'/>"
                     f"<line x1='{x(ci_lo):.1f}' y1='{y - 4:.0f}' x2='{x(ci_lo):.1f}' y2='{y + 4:.0f}' stroke='{c}'/>"
                     f"<line x1='{x(ci_hi):.1f}' y1='{y - 4:.0f}' x2='{x(ci_hi):.1f}' y2='{y + 4:.0f}' stroke='{c}'/>"
                     f"<circle cx='{x(delta):.1f}' cy='{y:.0f}' r='4' fill='{'white' if delta == 0 else c}' "
                     f"stroke='{c}' stroke-width='2'/>"
                     f"<text x='{width - right + 6}' y='{y + 4:.0f}' fill='{c}'>{delta:+.1f}</text></g>")
        y += row_h
    parts.append("</svg>")
    title = (f"<b>change per {escape(d.by)}, candidate − baseline (points; whiskers: 95% paired-bootstrap "
             "interval)</b>")
    return f"<div class='wb-chart wb-deltas'>{title}<br>{''.join(parts)}</div>"


def _short(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- shares of every run over time -------------------------------------------------------------------


def run_shares(store: Store, *, include_unfinished: bool = False) -> pd.DataFrame:
    """SHARE_COLUMNS for every run with metrics, oldest first; unfinished runs (running, interrupted,
    failed) only with `include_unfinished`."""
    rows = []
    for r in store.list_runs():
        m = (r.metrics or {}).get("overall")
        if not m or (r.status != "done" and not include_unfinished):
            continue
        rows.append([r.id, r.created_at, r.status, r.n_probes, _pct(m, "correct"), _pct(m, "incorrect"),
                     _pct(m, "not_attempted")])
    return pd.DataFrame(rows, columns=list(SHARE_COLUMNS))


def shares_plot_html(df: pd.DataFrame, *, width: int = 900, height: int = 260) -> str:
    """Lines of the correct / hallucinated / abstained shares (0-100%) over the runs in creation order, one
    point per run with a hover title (run id, status, creation time, the three shares)."""
    if df.empty:
        return "<p><i>no finished run with metrics yet</i></p>"
    left, right, top, bottom = 40, 20, 24, 58
    n = len(df)

    def x(i: int) -> float:
        return left + (width - left - right) * (i + 0.5) / n

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - v / 100)

    parts = [f"<svg class='wb-shares-plot' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             "font-size='11' font-family='sans-serif'>"]
    for tick in (0, 25, 50, 75, 100):
        parts.append(f"<line x1='{left}' y1='{y(tick):.1f}' x2='{width - right}' y2='{y(tick):.1f}' stroke='#d0d7de'/>"
                     f"<text x='{left - 4}' y='{y(tick) + 4:.1f}' text-anchor='end' fill='#57606a'>{tick}%</text>")
    for _, label, c in SHARES:
        vals = [(i, float(v)) for i, v in enumerate(df[f"{label} %"]) if pd.notna(v)]
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in vals)
        parts.append(f"<polyline points='{pts}' fill='none' stroke='{c}' stroke-width='2'/>")
        for i, v in vals:
            row = df.iloc[i]
            tip = escape(f"{row['run']} ({row['status']}, {row['created']}): {label} {v:.1f}%", quote=True)
            parts.append(f"<circle class='wb-share' cx='{x(i):.1f}' cy='{y(v):.1f}' r='4' fill='{c}'>"
                         f"<title>{tip}</title></circle>")
    step = max(1, n // 8)  # at most ~8 run labels under the axis; every point still has its hover title
    for i in range(0, n, step):
        parts.append(f"<text x='{x(i):.1f}' y='{height - bottom + 16}' text-anchor='middle' fill='#57606a'>"
                     f"{escape(_short(str(df.iloc[i]['run']), 22))}</text>")
    legend = " ".join(f"<span style='color:{c}'>●</span> {label}" for _, label, c in SHARES)
    parts.append("</svg>")
    return (f"<div class='wb-chart wb-shares'><b>shares of every run, oldest first (hover a point for its run)"
            f"</b> {legend}<br>{''.join(parts)}</div>")


# -- plain bars --------------------------------------------------------------------------------------


def tag_metrics(store: Store, run_ids: Sequence[str], metric: str = "incorrect") -> pd.DataFrame:
    """Long table (run, tag, value %) of one metric per tag for each run (runs without tags: none)."""
    if metric not in METRICS:
        raise ValueError(f"`metric` must be one of {', '.join(METRICS)}, got {metric!r}")
    rows = []
    for rid in run_ids:
        run = store.get_run(rid)
        for tag, g in sorted(((run.metrics or {}).get("by_tag") or {}).items()):
            if (v := _pct(g, metric)) is not None:
                rows.append([run.id, tag, v])
    return pd.DataFrame(rows, columns=["run", "tag", "value"])


def bar_chart_html(rows: Sequence[tuple[str, str, float]], *, unit: str = "%", title: str = "",
                   scale: float | None = None) -> str:
    """A dependency-free horizontal bar chart: rows of (group, series, value), bars grouped by group,
    coloured by series. `scale` is the value of a full-width bar (default: the largest value). A zero value
    keeps a thin visible bar and its "0.0" label."""
    if not rows:
        return "<p><i>nothing to plot</i></p>"
    palette = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e")
    series = list(dict.fromkeys(s for _, s, _ in rows))
    color = {s: palette[i % len(palette)] for i, s in enumerate(series)}
    top = scale or max((abs(v) for _, _, v in rows), default=1.0) or 1.0
    out = [f"<div class='wb-chart'><b>{escape(title)}</b>" if title else "<div class='wb-chart'>"]
    out.append("<div>" + " ".join(
        f"<span style='color:{color[s]}'>■</span> {escape(s)}" for s in series) + "</div>")
    groups: dict[str, list[tuple[str, float]]] = {}
    for g, s, v in rows:
        groups.setdefault(g, []).append((s, v))
    for g, items in groups.items():
        out.append(f"<div style='margin-top:4px'><span style='display:inline-block;width:9em'>{escape(g)}</span>")
        for s, v in items:
            width = max(0.0, min(100.0, 100 * abs(v) / top))
            out.append(f"<div style='margin-left:9em'><span style='display:inline-block;height:0.9em;"
                       f"width:{width:.1f}%;min-width:3px;max-width:75%;background:{color[s]}'></span> "
                       f"{v:,.1f}{escape(unit)}</div>")
        out.append("</div>")
    return "\n".join(out) + "</div>"


def tag_metrics_chart(store: Store, run_ids: Sequence[str], metric: str = "incorrect") -> str:
    """One metric per tag for each run as bars (a "no tags" note when the runs have none)."""
    df = tag_metrics(store, run_ids, metric)
    if df.empty and run_ids:
        return "<p><i>these runs' probes have no tags: see the shares plot above and Compare's per-category " \
               "plot</i></p>"
    rows = [(str(t), str(r), float(v)) for r, t, v in df.itertuples(index=False)]
    return bar_chart_html(rows, title=f"{metric} per tag (%)", scale=100.0)

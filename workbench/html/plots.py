"""The app's plots as dependency-free HTML/SVG strings (gr.HTML shows them; tests read them as text). This
module computes the coordinates; the SVG markup is `templates/plots.html` (workbench.html, autoescaped).

- `delta_plot_html`: per tag (or, without tags, per attribution category) the candidate-minus-baseline change
  of correct / hallucinated / abstained, each with its paired-bootstrap 95% interval as an error bar. A zero
  change keeps a visible marker and its label.
- `shares_plot_html`: the correct / hallucinated / abstained shares of every run, runs in creation order,
  each point with a hover title naming the run; a line joins only the runs of one series (`naming.series_key`):
  a baseline and its sibling candidates are points, not a trend.
- `bar_chart_html`: plain horizontal bars (the pre-flight's memory breakdown, per-tag metrics).
Every label is escaped by the template: tags, categories and run ids come from user files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from workbench.html import macro
from workbench.regression.stats import METRICS
from workbench.store import Store

SHARES = (("correct", "correct", "#1a7f37"), ("incorrect", "hallucinated", "#cf222e"),
          ("not_attempted", "abstained", "#9a6700"))
"""(metric, label, colour) of the three shares every plot shows, in that order."""
DELTA_COLUMNS = ("group", "n", "measure", "delta pts", "ci low", "ci high")
SHARE_COLUMNS = ("run", "created", "status", "n", "correct %", "hallucinated %", "abstained %", "series")
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
    groups: list[dict[str, Any]] = []
    y = 22.0
    for group, n, measure, delta, ci_lo, ci_hi in df.itertuples(index=False):
        if not groups or groups[-1]["name"] != group:
            y += 8
            groups.append({"name": group, "label": _short(str(group)), "n": int(n), "y": y, "rows": []})
        groups[-1]["rows"].append({
            "measure": str(measure), "colour": colour[str(measure)], "delta": delta, "y": y,
            "x_lo": x(ci_lo), "x_hi": x(ci_hi), "x_d": x(delta),
            "tip": f"{group}: {measure} {delta:+.1f} pt [{ci_lo:+.1f}, {ci_hi:+.1f}] (n={n})"})
        y += row_h
    plot = {"width": width, "height": height, "left": left, "right": right, "lo": lo, "hi": hi,
            "x0": x(0), "x_lo": x(lo), "x_hi": x(hi), "groups": groups}
    return macro("plots.html", "delta_plot", d.by, plot)


def _short(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- shares of every run over time -------------------------------------------------------------------


def run_shares(store: Store, *, include_unfinished: bool = False) -> pd.DataFrame:
    """SHARE_COLUMNS for every run with metrics, oldest first (`series`: the run's `naming.series_key`); unfinished
    runs (running, interrupted, failed) only with `include_unfinished`."""
    from workbench.naming import series_key

    rows = []
    for r in store.list_runs():
        m = (r.metrics or {}).get("overall")
        if not m or (r.status != "done" and not include_unfinished):
            continue
        rows.append([r.id, r.created_at, r.status, r.n_probes, _pct(m, "correct"), _pct(m, "incorrect"),
                     _pct(m, "not_attempted"), series_key(r.model, r.adapter)])
    return pd.DataFrame(rows, columns=list(SHARE_COLUMNS))


def shares_plot_html(df: pd.DataFrame, *, width: int = 900, height: int = 260) -> str:
    """The correct / hallucinated / abstained shares (0-100%) of the runs in creation order, one point per run with
    a hover title (run id, status, creation time, the three shares); a line joins the points of one series only
    (the `series` column; a table without it: every run a series of its own)."""
    if df.empty:
        return "<p><i>no finished run with metrics yet</i></p>"
    left, right, top, bottom = 40, 20, 24, 58
    n = len(df)

    def x(i: int) -> float:
        return left + (width - left - right) * (i + 0.5) / n

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - v / 100)

    lines = []
    # each point's hover title starts with its run (id, status, created): columns read once, not a row per point
    runs = [f"{r} ({s}, {t})" for r, s, t in zip(df["run"], df["status"], df["created"], strict=True)]
    series = list(df["series"]) if "series" in df.columns else list(df["run"])
    for _, label, c in SHARES:
        vals = [(i, float(v)) for i, v in enumerate(df[f"{label} %"]) if pd.notna(v)]
        dots = [(x(i), y(v), f"{runs[i]}: {label} {v:.1f}%") for i, v in vals]
        joined = [[(x(i), y(v)) for i, v in vals if series[i] == key] for key in dict.fromkeys(series)]
        lines.append({"colour": c, "series": [pts for pts in joined if len(pts) > 1], "dots": dots})
    step = max(1, n // 8)  # at most ~8 run labels under the axis; every point still has its hover title
    plot = {"width": width, "height": height, "left": left, "right": right, "bottom": bottom,
            "ticks": [(t, y(t)) for t in (0, 25, 50, 75, 100)], "lines": lines,
            "labels": [(x(i), _short(str(df["run"].iloc[i]), 22)) for i in range(0, n, step)]}
    return macro("plots.html", "shares_plot", plot, SHARES)


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
    groups: dict[str, list[tuple[str, float, float]]] = {}
    for g, s, v in rows:  # bars (colour, width %, value) grouped by group, in first-seen order
        groups.setdefault(g, []).append((color[s], max(0.0, min(100.0, 100 * abs(v) / top)), v))
    return macro("plots.html", "bar_chart", title, [(s, color[s]) for s in series], list(groups.items()), unit)


def tag_metrics_chart(store: Store, run_ids: Sequence[str], metric: str = "incorrect") -> str:
    """One metric per tag for each run as bars (a "no tags" note when the runs have none)."""
    df = tag_metrics(store, run_ids, metric)
    if df.empty and run_ids:
        return "<p><i>these runs' probes have no tags: see the shares plot above and Compare's per-category " \
               "plot</i></p>"
    rows = [(str(t), str(r), float(v)) for r, t, v in df.itertuples(index=False)]
    return bar_chart_html(rows, title=f"{metric} per tag (%)", scale=100.0)

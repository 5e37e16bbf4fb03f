"""Render a ComparisonResult: terminal (rich), Markdown, JSON; HTML and JUnit XML live beside it."""

from __future__ import annotations

import html
import io
import json
import re
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from workbench.glossary import GATE_HELP
from workbench.printable import printable
from workbench.regression.comparison import ComparisonResult, ProbeChange
from workbench.regression.stats import METRICS
from workbench.regression.transitions import Flip
from workbench.regression.wording import (
    INCONCLUSIVE_NOTE,
    MAX_LISTED,
    METRIC_LABELS,
    VERDICT_LABELS,
    answers,
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

_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "inconclusive": "bold magenta",
          "not_checked": "bold blue"}
_TERMINAL_BROKEN = 20  # broken probes listed in the terminal


def _shown(value: object) -> str:
    """Text for a rich terminal: through the printable filter (stored names, tags, policy text and model answers
    may hold escapes and newlines), then markup-quoted."""
    return escape(printable(value))


def print_terminal(result: ComparisonResult, console: Console | None = None) -> None:
    """Print the verdict, the headline, the broken probes, the gates (with what each could detect), metric
    deltas, the per-tag table and the transitions."""
    out = console or Console()
    out.print(
        f"[bold]{_shown(result.candidate_label)}[/] vs baseline "
        f"[bold]{_shown(result.baseline_label)}[/]: "
        f"{result.overall.n} probes, verdict [{_STYLE[result.verdict]}]{_shown(verdict_line(result))}[/]"
    )
    out.print(_headline_table(result))
    out.print(f"verdict changes: {transition_counts(result.overall.transitions)}")
    out.print(f"[bold]broken probes ({len(result.broken)})[/]: baseline-correct, now wrong or abstained")
    for change in result.broken[:_TERMINAL_BROKEN]:
        question = f" {change.question!r}:" if change.question else ""
        pid = _shown(change.probe_id)
        out.print(f"  {pid}{_shown(question)} {_shown(answers(change))} ({change.transition})")
    if len(result.broken) > _TERMINAL_BROKEN:
        out.print(f"  ... and {len(result.broken) - _TERMINAL_BROKEN} more (see the reports)")
    if result.risk is not None:
        out.print(f"[bold]hallucination risk[/]: {_shown(result.risk.line())}")
    out.print("[bold]known facts[/]")
    for line in known_facts_lines(result):
        out.print(f"  {_shown(line)}")
    guard_broken = [c for c in result.guard_changes if c.flip == Flip.BROKEN]
    for change in guard_broken[:_TERMINAL_BROKEN]:
        pid = _shown(change.probe_id)
        out.print(f"  guard {pid} {_shown(repr(change.question))}: {_shown(answers(change))}")
    if len(guard_broken) > _TERMINAL_BROKEN:
        out.print(f"  ... and {len(guard_broken) - _TERMINAL_BROKEN} more guard facts (see the reports)")
    gates = Table(title="Gates")
    for col in ("status", "gate", "severity", "result", "could detect on this probe set"):
        # `not checked` wraps to two lines in a narrow terminal rather than cut a gate's name short
        narrow = col == "status"
        gates.add_column(col, max_width=8 if narrow else None, overflow="fold" if narrow else "ellipsis")
    for g in result.gates:
        could = g.detectable.text if g.detectable and g.checked else ""  # a gate not checked: its result says why
        gates.add_row(f"[{_STYLE[g.status]}]{status_label(g.status)}[/]", _shown(g.name), g.severity, _shown(g.message),
                      _shown(could))
    out.print(gates)
    explained = gate_help(result)
    if explained:
        out.print("What the gates check:")
        for t, text in explained:
            out.print(f"  [bold]{_shown(t)}[/]: {_shown(text)}")
    if result.inconclusive_gates:
        out.print(f"[{_STYLE['inconclusive']}]{_shown(INCONCLUSIVE_NOTE)}[/]")
    if result.unchecked_gates:
        out.print(f"[{_STYLE['not_checked']}]{_shown(not_checked_line(result))}[/]")
    metrics = Table(title="Metrics (Δ in points, paired bootstrap CI)")
    for col in ("metric", "baseline", "candidate", "Δ", "CI"):
        metrics.add_column(col, justify="left" if col == "metric" else "right")
    for m in METRICS:
        d = result.overall.metrics[m]
        metrics.add_row(METRIC_LABELS[m], pct(d.baseline), pct(d.candidate), pts(d.delta), ci(d))
    out.print(metrics)
    if result.by_tag:
        out.print(_tag_table(result))
    tm = Table(title="Transitions (rows baseline, columns candidate)")
    tm.add_column("baseline \\ candidate")
    for label in VERDICT_LABELS:
        tm.add_column(label, justify="right")
    for label, row in zip(VERDICT_LABELS, result.overall.transitions.counts, strict=True):
        tm.add_row(label, *(str(x) for x in row))
    out.print(tm)
    mc = result.overall.mcnemar
    out.print(f"fixed {mc.fixed}, broken {mc.broken}, McNemar exact p = {p_value(mc.p_value)}")


def _headline_table(result: ComparisonResult) -> Table:
    table = Table(title=f"All {result.overall.n} probes, baseline -> candidate (Δ in points, paired bootstrap CI)")
    for col in ("verdict", "baseline", "candidate", "Δ", "CI"):
        table.add_column(col, justify="left" if col == "verdict" else "right")
    for r in result.headline.rows:
        table.add_row(r.label, count_pct(r.baseline_count, r.delta.baseline),
                      count_pct(r.candidate_count, r.delta.candidate), pts(r.delta.delta), ci(r.delta))
    return table


def _tag_table(result: ComparisonResult) -> Table:
    table = Table(title="Per tag (Δ in points)")
    for col in ("tag", "n", "Δ correct", "CI", "Δ incorrect", "CI", "fixed", "broken", "McNemar p"):
        table.add_column(col, justify="left" if col == "tag" else "right")
    for tag, g in result.by_tag.items():
        c, i = g.metrics["correct"], g.metrics["incorrect"]
        tm = g.transitions
        table.add_row(
            _shown(tag),
            str(g.n),
            pts(c.delta),
            ci(c),
            pts(i.delta),
            ci(i),
            str(tm.fixed),
            str(tm.broken),
            p_value(g.mcnemar.p_value),
        )
    return table


def render_terminal(result: ComparisonResult, width: int = 120) -> str:
    """The terminal report as plain text (no colour codes)."""
    buf = io.StringIO()
    print_terminal(result, Console(file=buf, width=width, color_system=None, force_terminal=False))
    return buf.getvalue()


#: Markdown punctuation that could turn data into links, images, emphasis, code or a new table cell.
_MD_PUNCT = re.compile(r"([\\`*_\[\]|~!])")


def _md(text: str) -> str:
    """Data (model names, tags, probe ids, answers, gate names) as literal text in Markdown: HTML special
    characters become entities (`<img onerror=...>` stays text in any renderer), Markdown punctuation is
    backslash-escaped, it stays on one line (a table cell), and what a terminal acts on is written as escapes (the
    file is read with `cat` too)."""
    text = html.escape(printable(text.replace("\r", " ").replace("\n", " ")), quote=False)
    return _MD_PUNCT.sub(r"\\\1", text)


def _code(text: str) -> str:
    """An identifier shown as `code` (nothing is escaped inside a code span: backticks and newlines go)."""
    return printable(text.replace("`", "'").replace("\r", " ").replace("\n", " "))


def render_markdown(result: ComparisonResult) -> str:
    """A Markdown report (GitHub flavoured tables): verdict, headline, broken probes first, then gates,
    metrics, transitions, tags and the other verdict changes."""
    lines = [
        f"# Regression check: {result.verdict.upper()}",
        "",
        f"Candidate **{_md(result.candidate_label)}** (`{_code(result.candidate_run_id)}`) vs baseline "
        f"**{_md(result.baseline_label)}** (`{_code(result.baseline_run_id)}`), {result.overall.n} probes.",
        "",
        f"**Verdict: {_md(verdict_line(result))}**",
        "",
        *([INCONCLUSIVE_NOTE, ""] if result.inconclusive_gates else []),
        *([_md(not_checked_line(result)), ""] if result.unchecked_gates else []),
        "## All probes, baseline -> candidate",
        "",
        "| verdict | baseline | candidate | Δ (pt) | CI (pt) |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {r.label} | {count_pct(r.baseline_count, r.delta.baseline)} | "
            f"{count_pct(r.candidate_count, r.delta.candidate)} | {pts(r.delta.delta)} | {ci(r.delta)} |"
            for r in result.headline.rows
        ),
        "",
        f"Verdict changes: {transition_counts(result.overall.transitions)}.",
        "",
        f"## Broken probes ({len(result.broken)})",
        "",
        "Probes the baseline got right that the candidate gets wrong or abstains on.",
        "",
    ]
    lines += _md_changes(result.broken) if result.broken else ["None."]
    guard_broken = [c for c in result.guard_changes if c.flip == Flip.BROKEN]
    lines += ["", "## Known facts", "", *(f"- {_md(line)}" for line in known_facts_lines(result)), ""]
    if guard_broken:
        lines += [f"Guard facts broken ({len(guard_broken)}):", "", *_md_changes(guard_broken)]
    if result.risk is not None:
        lines += ["", "## Hallucination risk (no reference needed)", "", _md(result.risk.line()) + ".", "",
                  f"Risk model: {_md(result.risk.scored_by)}."]
    lines += [
        "",
        "## Gates",
        "",
        "| status | gate | severity | result | could detect on this probe set |",
        "|---|---|---|---|---|",
        *(
            f"| {status_label(g.status)} | {_md(g.name)} | {g.severity} | {_md(g.message)} | "
            f"{_md(g.detectable.text if g.detectable else '')} |"
            for g in result.gates
        ),
        "",
        *_md_gate_help(result),
        "## Metrics",
        "",
        "Δ in points (candidate − baseline); paired bootstrap CI "
        f"({result.policy.bootstrap.resamples} resamples, seed {result.policy.bootstrap.seed}, "
        f"{result.policy.bootstrap.confidence:.0%}).",
        "",
        "| metric | baseline | candidate | Δ | CI |",
        "|---|---:|---:|---:|---:|",
    ]
    for m in METRICS:
        d = result.overall.metrics[m]
        lines.append(
            f"| {METRIC_LABELS[m]} | {pct(d.baseline)} | {pct(d.candidate)} | {pts(d.delta)} | {ci(d)} |"
        )
    mc = result.overall.mcnemar
    lines += ["", f"McNemar exact: {mc.broken} broken, {mc.fixed} fixed, p = {p_value(mc.p_value)}.", ""]
    lines += [
        "## Transitions",
        "",
        "| baseline \\ candidate | " + " | ".join(VERDICT_LABELS) + " |",
        "|---|---:|---:|---:|",
    ]
    for label, row in zip(VERDICT_LABELS, result.overall.transitions.counts, strict=True):
        lines.append(f"| {label} | " + " | ".join(str(x) for x in row) + " |")
    if result.by_tag:
        lines += [
            "",
            "## Per tag",
            "",
            "| tag | n | Δ correct | CI | Δ incorrect | CI | fixed | broken | p |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for tag, g in result.by_tag.items():
            c, i = g.metrics["correct"], g.metrics["incorrect"]
            lines.append(
                f"| {_md(tag)} | {g.n} | {pts(c.delta)} | {ci(c)} | {pts(i.delta)} | {ci(i)} | "
                f"{g.transitions.fixed} | {g.transitions.broken} | {p_value(g.mcnemar.p_value)} |"
            )
    others = [c for c in result.changes if c.flip != Flip.BROKEN]
    lines += ["", f"## Other verdict changes ({len(others)})", ""]
    lines += _md_changes(others) if others else ["None."]
    return "\n".join(lines) + "\n"


def gate_help(result: ComparisonResult) -> list[tuple[str, str]]:
    """Each gate type the result holds (once, in gate order) with what it checks, in the glossary's words: the
    terminal and Markdown reports and the app's tooltips share one wording (`workbench.glossary.GATE_HELP`)."""
    return [(t, GATE_HELP[t]) for t in dict.fromkeys(g.type for g in result.gates if g.type in GATE_HELP)]


def _md_gate_help(result: ComparisonResult) -> list[str]:
    explained = gate_help(result)
    if not explained:
        return []
    return ["What the gates check:", "", *(f"- `{t}`: {_md(text)}" for t, text in explained), ""]


def _md_changes(changes: Sequence[ProbeChange]) -> list[str]:
    lines = [
        "| probe | question | baseline answer | candidate answer | transition |",
        "|---|---|---|---|---|",
        *(
            f"| {_md(c.probe_id)} | {_md(c.question)} | {_md(c.baseline_answer)} | {_md(c.candidate_answer)} | "
            f"{c.transition} |"
            for c in changes[:MAX_LISTED]
        ),
    ]
    if len(changes) > MAX_LISTED:
        lines.append(f"\n… and {len(changes) - MAX_LISTED} more (see the JSON report).")
    return lines


def render_json(result: ComparisonResult) -> str:
    """result.to_dict() as indented JSON."""
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

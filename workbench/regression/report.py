"""Render a ComparisonResult: terminal (rich), Markdown, JUnit XML, JSON; HTML lives in report_html."""

from __future__ import annotations

import html
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from workbench.regression._format import MAX_LISTED, METRIC_LABELS, VERDICT_LABELS, ci, p_value, pct, pts
from workbench.regression.report_html import render_html
from workbench.regression.results import ComparisonResult
from workbench.regression.stats import METRICS

_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red"}
_TERMINAL_BROKEN = 20  # broken probes listed in the terminal


def print_terminal(result: ComparisonResult, console: Console | None = None) -> None:
    """Print the verdict, gates, metric deltas, per-tag table, transitions and some broken probes."""
    out = console or Console()
    out.print(
        f"[bold]{escape(result.candidate_label)}[/] vs baseline [bold]{escape(result.baseline_label)}[/]: "
        f"{result.overall.n} probes, verdict [{_STYLE[result.verdict]}]{result.verdict.upper()}[/]"
    )
    gates = Table(title="Gates")
    for col in ("status", "gate", "severity", "result"):
        gates.add_column(col)
    for g in result.gates:
        gates.add_row(f"[{_STYLE[g.status]}]{g.status}[/]", escape(g.name), g.severity, escape(g.message))
    out.print(gates)
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
    for change in result.broken[:_TERMINAL_BROKEN]:
        answers = f"{change.baseline_answer!r} -> {change.candidate_answer!r}"
        out.print(f"  broken {escape(change.probe_id)}: {escape(answers)}")
    if len(result.broken) > _TERMINAL_BROKEN:
        out.print(f"  ... and {len(result.broken) - _TERMINAL_BROKEN} more")


def _tag_table(result: ComparisonResult) -> Table:
    table = Table(title="Per tag (Δ in points)")
    for col in ("tag", "n", "Δ correct", "CI", "Δ incorrect", "CI", "fixed", "broken", "McNemar p"):
        table.add_column(col, justify="left" if col == "tag" else "right")
    for tag, g in result.by_tag.items():
        c, i = g.metrics["correct"], g.metrics["incorrect"]
        tm = g.transitions
        table.add_row(
            escape(tag),
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
    backslash-escaped, and it stays on one line (a table cell)."""
    text = html.escape(text, quote=False)
    return _MD_PUNCT.sub(r"\\\1", text).replace("\r", " ").replace("\n", " ")


def _code(text: str) -> str:
    """An identifier shown as `code` (nothing is escaped inside a code span: backticks and newlines go)."""
    return text.replace("`", "'").replace("\r", " ").replace("\n", " ")


def render_markdown(result: ComparisonResult) -> str:
    """A Markdown report (GitHub flavoured tables)."""
    lines = [
        f"# Regression check: {result.verdict.upper()}",
        "",
        f"Candidate **{_md(result.candidate_label)}** (`{_code(result.candidate_run_id)}`) vs baseline "
        f"**{_md(result.baseline_label)}** (`{_code(result.baseline_run_id)}`), {result.overall.n} probes.",
        "",
        "## Gates",
        "",
        "| status | gate | severity | result |",
        "|---|---|---|---|",
        *(f"| {g.status} | {_md(g.name)} | {g.severity} | {_md(g.message)} |" for g in result.gates),
        "",
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
    lines += ["", f"## Broken probes ({len(result.broken)})", ""]
    if result.broken:
        lines += ["| probe | baseline answer | candidate answer | candidate verdict |", "|---|---|---|---|"]
        for ch in result.broken[:MAX_LISTED]:
            lines.append(
                f"| {_md(ch.probe_id)} | {_md(ch.baseline_answer)} | {_md(ch.candidate_answer)} | "
                f"{ch.candidate_verdict} |"
            )
        if len(result.broken) > MAX_LISTED:
            lines.append(f"\n… and {len(result.broken) - MAX_LISTED} more (see the JSON report).")
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def render_junit(result: ComparisonResult) -> str:
    """JUnit XML: one testcase per gate. A failed fail-gate is a <failure>; a failed warn-gate passes
    with its warning in <system-out> and a `severity` property."""
    failures = sum(g.status == "fail" for g in result.gates)
    suites = ET.Element(
        "testsuites",
        name="workbench regression",
        tests=str(len(result.gates)),
        failures=str(failures),
        errors="0",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"regression {result.candidate_label} vs {result.baseline_label}",
        tests=str(len(result.gates)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    for g in result.gates:
        case = ET.SubElement(suite, "testcase", classname="workbench.regression", name=g.name)
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="severity", value=g.severity)
        ET.SubElement(props, "property", name="type", value=g.type)
        body = "\n".join((g.message, *g.details))
        if g.status == "fail":
            ET.SubElement(case, "failure", message=g.message, type=g.type).text = body
        else:
            ET.SubElement(case, "system-out").text = ("WARNING: " if g.status == "warn" else "") + body
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def render_json(result: ComparisonResult) -> str:
    """result.to_dict() as indented JSON."""
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


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

"""Render a ComparisonResult: terminal (rich), Markdown, JUnit XML, JSON; HTML lives in report_html."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from workbench.regression._format import (
    INCONCLUSIVE_NOTE,
    MAX_LISTED,
    METRIC_LABELS,
    VERDICT_LABELS,
    answers,
    ci,
    count_pct,
    p_value,
    pct,
    pts,
    transition_counts,
    verdict_line,
)
from workbench.regression.report_html import render_html
from workbench.regression.results import FORMAT_VERSION, ComparisonResult, ProbeChange
from workbench.regression.stats import METRICS
from workbench.regression.transitions import Flip

_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "inconclusive": "bold magenta"}
_TERMINAL_BROKEN = 20  # broken probes listed in the terminal


def print_terminal(result: ComparisonResult, console: Console | None = None) -> None:
    """Print the verdict, the headline, the broken probes, the gates (with what each could detect), metric
    deltas, the per-tag table and the transitions."""
    out = console or Console()
    out.print(
        f"[bold]{escape(result.candidate_label)}[/] vs baseline [bold]{escape(result.baseline_label)}[/]: "
        f"{result.overall.n} probes, verdict [{_STYLE[result.verdict]}]{escape(verdict_line(result))}[/]"
    )
    out.print(_headline_table(result))
    out.print(f"verdict changes: {transition_counts(result.overall.transitions)}")
    out.print(f"[bold]broken probes ({len(result.broken)})[/]: baseline-correct, now wrong or abstained")
    for change in result.broken[:_TERMINAL_BROKEN]:
        question = f" {change.question!r}:" if change.question else ""
        out.print(f"  {escape(change.probe_id)}{escape(question)} {escape(answers(change))} ({change.transition})")
    if len(result.broken) > _TERMINAL_BROKEN:
        out.print(f"  ... and {len(result.broken) - _TERMINAL_BROKEN} more (see the reports)")
    gates = Table(title="Gates")
    for col in ("status", "gate", "severity", "result", "could detect on this probe set"):
        gates.add_column(col)
    for g in result.gates:
        could = g.detectable.text if g.detectable else ""
        gates.add_row(f"[{_STYLE[g.status]}]{g.status}[/]", escape(g.name), g.severity, escape(g.message),
                      escape(could))
    out.print(gates)
    if result.inconclusive_gates:
        out.print(f"[{_STYLE['inconclusive']}]{escape(INCONCLUSIVE_NOTE)}[/]")
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


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(result: ComparisonResult) -> str:
    """A Markdown report (GitHub flavoured tables): verdict, headline, broken probes first, then gates,
    metrics, transitions, tags and the other verdict changes."""
    lines = [
        f"# Regression check: {result.verdict.upper()}",
        "",
        f"Candidate **{_md(result.candidate_label)}** (`{_md(result.candidate_run_id)}`) vs baseline "
        f"**{_md(result.baseline_label)}** (`{_md(result.baseline_run_id)}`), {result.overall.n} probes.",
        "",
        f"**Verdict: {_md(verdict_line(result))}**",
        "",
        *([INCONCLUSIVE_NOTE, ""] if result.inconclusive_gates else []),
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
    lines += [
        "",
        "## Gates",
        "",
        "| status | gate | severity | result | could detect on this probe set |",
        "|---|---|---|---|---|",
        *(
            f"| {g.status} | {_md(g.name)} | {g.severity} | {_md(g.message)} | "
            f"{_md(g.detectable.text if g.detectable else '')} |"
            for g in result.gates
        ),
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
    others = [c for c in result.changes if c.flip != Flip.BROKEN]
    lines += ["", f"## Other verdict changes ({len(others)})", ""]
    lines += _md_changes(others) if others else ["None."]
    return "\n".join(lines) + "\n"


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


def render_junit(result: ComparisonResult) -> str:
    """JUnit XML: one testcase per gate. A failed fail-gate is a <failure>; a fail-gate that could not have
    failed on this probe set is <skipped> (verdict inconclusive); a failed warn-gate passes with its warning
    in <system-out>. Every case carries what its gate could detect (`detectable` property and text); the
    broken-probe gates list the broken probes; the suite's <system-out> holds the verdict, the headline and
    the broken probes, and its properties the verdict and exit code."""
    failures = sum(g.status == "fail" for g in result.gates)
    skipped = sum(g.status == "inconclusive" for g in result.gates)
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
        skipped=str(skipped),
    )
    suite_props = ET.SubElement(suite, "properties")
    for name, value in (("verdict", result.verdict), ("exit_code", str(result.exit_code)),
                        ("format_version", str(FORMAT_VERSION))):
        ET.SubElement(suite_props, "property", name=name, value=value)
    broken = _broken_lines(result)
    for g in result.gates:
        case = ET.SubElement(suite, "testcase", classname="workbench.regression", name=g.name)
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="severity", value=g.severity)
        ET.SubElement(props, "property", name="type", value=g.type)
        ET.SubElement(props, "property", name="status", value=g.status)
        could = g.detectable.text if g.detectable else ""
        if could:
            ET.SubElement(props, "property", name="detectable", value=could)
        body = "\n".join((g.message, *g.details, *([could] if could else []),
                          *(broken if g.type in _BROKEN_GATES else ())))
        if g.status == "fail":
            ET.SubElement(case, "failure", message=g.message, type=g.type).text = body
        elif g.status == "inconclusive":
            ET.SubElement(case, "skipped", message=could)
            ET.SubElement(case, "system-out").text = "INCONCLUSIVE: " + body
        else:
            ET.SubElement(case, "system-out").text = ("WARNING: " if g.status == "warn" else "") + body
    ET.SubElement(suite, "system-out").text = "\n".join(
        (f"verdict: {verdict_line(result)}", result.headline.text(), *broken)
    )
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


_BROKEN_GATES = ("max_broken_fraction", "max_broken", "max_abstention_on_previously_correct")
"""Gate types whose JUnit body lists the broken probes."""


def _broken_lines(result: ComparisonResult) -> list[str]:
    """'broken probes (2):' then one line per probe: id, question, baseline answer -> candidate answer."""
    lines = [f"broken probes ({len(result.broken)}): baseline-correct, now wrong or abstained"]
    for c in result.broken[:MAX_LISTED]:
        question = f" {c.question!r}:" if c.question else ""
        lines.append(f"  {c.probe_id}{question} {answers(c)} ({c.transition})")
    if len(result.broken) > MAX_LISTED:
        lines.append(f"  ... and {len(result.broken) - MAX_LISTED} more (see comparison.json)")
    return lines


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

"""JUnit XML for CI: one testcase per gate, the verdict and the broken probes where CI shows them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from workbench.printable import printable
from workbench.regression.comparison import FORMAT_VERSION, ComparisonResult
from workbench.regression.wording import MAX_LISTED, answers, verdict_line


def render_junit(result: ComparisonResult) -> str:
    """JUnit XML: one testcase per gate. A failed fail-gate is a <failure>; a fail-gate that could not have
    failed on this probe set is <skipped> (verdict inconclusive), and so is a gate whose set was not evaluated
    (status `not_checked`: never a pass); a failed warn-gate passes with its warning
    in <system-out>. Every case carries what its gate could detect (`detectable` property and text); the
    broken-probe gates list the broken probes; the suite's <system-out> holds the verdict, the headline and
    the broken probes, and its properties the verdict and exit code."""
    failures = sum(g.status == "fail" for g in result.gates)
    skipped = sum(g.status in ("inconclusive", "not_checked") for g in result.gates)
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
        elif g.status == "not_checked":
            ET.SubElement(case, "skipped", message=g.message)
            ET.SubElement(case, "system-out").text = "NOT CHECKED: " + body
        else:
            ET.SubElement(case, "system-out").text = ("WARNING: " if g.status == "warn" else "") + body
    ET.SubElement(suite, "system-out").text = "\n".join(
        (f"verdict: {verdict_line(result)}", result.headline.text(), *broken)
    )
    for el in suites.iter():  # XML 1.0 holds no control character: a probe id or answer with ESC or NUL would
        el.text = printable(el.text, lines=True) if el.text else el.text  # make the file unreadable to CI
        el.attrib = {k: printable(v) for k, v in el.attrib.items()}
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

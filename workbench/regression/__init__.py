"""Regression check: may the candidate ship? Paired comparison of two runs gated by a YAML policy.

Usage::

    result = compare(baseline, candidate, load_policy("policy.yaml"))
    print(render_markdown(result)); sys.exit(result.exit_code)
"""

from workbench.regression.compare import ProbeOutcome, RunOutcomes, compare
from workbench.regression.policy import DEFAULT_POLICY_YAML, Policy, default_policy, load_policy, parse_policy
from workbench.regression.report import (
    print_terminal,
    render_json,
    render_junit,
    render_markdown,
    render_terminal,
    write_reports,
)
from workbench.regression.report_html import render_html
from workbench.regression.results import ComparisonResult, GateResult, GroupComparison, ProbeChange
from workbench.regression.stats import McNemarResult, MetricDelta, mcnemar_exact, paired_bootstrap
from workbench.regression.transitions import Flip, TransitionMatrix

__all__ = [
    "DEFAULT_POLICY_YAML",
    "ComparisonResult",
    "Flip",
    "GateResult",
    "GroupComparison",
    "McNemarResult",
    "MetricDelta",
    "Policy",
    "ProbeChange",
    "ProbeOutcome",
    "RunOutcomes",
    "TransitionMatrix",
    "compare",
    "default_policy",
    "load_policy",
    "mcnemar_exact",
    "paired_bootstrap",
    "parse_policy",
    "print_terminal",
    "render_html",
    "render_json",
    "render_junit",
    "render_markdown",
    "render_terminal",
    "write_reports",
]

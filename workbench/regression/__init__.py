"""Regression check: may the candidate ship? Paired comparison of two runs gated by a YAML policy.

Usage::

    result = compare(baseline, candidate, load_policy("policy.yaml"))
    print(result.headline.text())        # correct / hallucinated / abstained, before -> after
    print(render_markdown(result)); sys.exit(result.exit_code)   # 0 pass/warn, 1 fail, 3 inconclusive
"""

from workbench.regression.compare import ProbeOutcome, RunOutcomes, compare
from workbench.regression.comparison import (
    EXIT_CODES,
    FORMAT_VERSION,
    ComparisonResult,
    GateResult,
    GroupComparison,
    Outcome,
    ProbeChange,
    worst_exit_code,
)
from workbench.regression.detect import Detectability
from workbench.regression.headline import Headline, HeadlineRow
from workbench.regression.policy import DEFAULT_POLICY_YAML, Policy, default_policy, load_policy, parse_policy
from workbench.regression.report import (
    print_terminal,
    render_json,
    render_markdown,
    render_terminal,
)
from workbench.regression.report_junit import render_junit
from workbench.regression.stats import McNemarResult, MetricDelta, mcnemar_exact, paired_bootstrap
from workbench.regression.transitions import (
    TRANSITION_HELP,
    Flip,
    Transition,
    TransitionMatrix,
    transition_of,
    verdict_changed,
)
from workbench.regression.wording import verdict_line

__all__ = [
    "DEFAULT_POLICY_YAML",
    "EXIT_CODES",
    "FORMAT_VERSION",
    "TRANSITION_HELP",
    "ComparisonResult",
    "Detectability",
    "Flip",
    "GateResult",
    "GroupComparison",
    "Headline",
    "HeadlineRow",
    "McNemarResult",
    "MetricDelta",
    "Outcome",
    "Policy",
    "ProbeChange",
    "ProbeOutcome",
    "RunOutcomes",
    "Transition",
    "TransitionMatrix",
    "compare",
    "default_policy",
    "load_policy",
    "mcnemar_exact",
    "paired_bootstrap",
    "parse_policy",
    "print_terminal",
    "render_json",
    "render_junit",
    "render_markdown",
    "render_terminal",
    "transition_of",
    "verdict_changed",
    "verdict_line",
    "worst_exit_code",
]

"""Field reports: users' flagged conversations imported, redacted, reviewed, and promoted into a field suite.

`read` turns export files into reports, `redact` removes personal data before anything is stored, `queue` owns the
review queue's tables, `suite` writes the field suite the gate evaluates.
"""

from workbench.reports.queue import DECISIONS, STATUSES, Decision, QueuedReport, decide, get_report, list_reports
from workbench.reports.read import COLUMN_FIELDS, Report, parse_columns, read_reports
from workbench.reports.redact import Redactor
from workbench.reports.suite import ABSTAIN_TAG, FIELD_TAG, Exported, FieldOrigin, export_suite, field_origins

__all__ = [
    "ABSTAIN_TAG",
    "COLUMN_FIELDS",
    "DECISIONS",
    "FIELD_TAG",
    "STATUSES",
    "Decision",
    "Exported",
    "FieldOrigin",
    "QueuedReport",
    "Redactor",
    "Report",
    "decide",
    "export_suite",
    "field_origins",
    "get_report",
    "list_reports",
    "parse_columns",
    "read_reports",
]

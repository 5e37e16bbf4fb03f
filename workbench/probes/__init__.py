"""Probes and suites: load probe files (JSONL, JSON, CSV, TSV, Parquet, Hugging Face datasets, public
benchmark formats) with strict bad-row errors, and suite YAML specs.

Only the standard library, pydantic and yaml are imported here; pandas, pyarrow and datasets load lazily.
"""

from workbench.probes._readers import read_records
from workbench.probes.formats import FORMAT_NAMES, FORMATS, Format, detect
from workbench.probes.loader import MAX_PROBLEMS, LoadResult, load_probes, with_tags
from workbench.probes.suite import DEFAULT_ABSTENTIONS, GRADERS, Suite, load_suite, resolve_probes, suites_dir

__all__ = [
    "DEFAULT_ABSTENTIONS",
    "FORMATS",
    "FORMAT_NAMES",
    "GRADERS",
    "MAX_PROBLEMS",
    "Format",
    "LoadResult",
    "Suite",
    "detect",
    "load_probes",
    "load_suite",
    "read_records",
    "resolve_probes",
    "suites_dir",
    "with_tags",
]

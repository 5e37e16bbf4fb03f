"""The workspace store (runs, answers, cache, attributions, jobs, regressions, reviews)."""

from workbench.store.db import RunRecord, Store, new_id, shown_time, utcnow

__all__ = ["RunRecord", "Store", "new_id", "shown_time", "utcnow"]

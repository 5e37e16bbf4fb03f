"""The tabs in the page's order: the decision queue first, so the page opens on the decisions waiting."""

from apptabs.compare import compare_tab
from apptabs.decisions import decisions_tab
from apptabs.detail import detail_tab
from apptabs.fix import fix_tab
from apptabs.reports import reports_tab
from apptabs.review import review_tab
from apptabs.runs import runs_tab

TABS = (decisions_tab, runs_tab, compare_tab, detail_tab, fix_tab, review_tab, reports_tab)

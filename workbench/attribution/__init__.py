"""Attribution: why a model hallucinated. The data axis's corpus index is re-exported here."""

from workbench.attribution.build import BuildReport, build_index
from workbench.attribution.index import Cooccurrence, CorpusIndex, EvidenceRow, default_index_path

__all__ = ["BuildReport", "Cooccurrence", "CorpusIndex", "EvidenceRow", "build_index", "default_index_path"]

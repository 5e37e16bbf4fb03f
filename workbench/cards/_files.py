"""What the cards share: file names, reading a record, writing a card whole."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

CARD = "README.md"
RESULT_FILE, JOB_FILE, FIXSET_FILE, ADAPTER_CONFIG = "result.json", "job.yaml", "fixset.json", "adapter_config.json"
TAG = "hallucination-workbench"
#: Licences of public probe sets by a name their source carries (HF dataset id or file name); others: unknown.
LICENCES = {"truthful_qa": "apache-2.0", "truthfulqa": "apache-2.0", "simpleqa": "mit", "popqa": "mit",
            "halueval": "mit", "nq_open": "cc-by-sa-3.0", "trivia_qa": "apache-2.0", "triviaqa": "apache-2.0"}
#: The gate's metrics put in model-index, as the Hub names metric types.
GATE_METRICS = {"correct": "accuracy", "incorrect": "hallucination_rate", "not_attempted": "abstention_rate",
                "f_score": "f1"}


def read_json(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise WorkbenchError(f"{path.parent}: no {path.name}; is it a workbench job's adapter or fix set?") from None
    except (json.JSONDecodeError, TypeError, ValueError) as e:
        raise WorkbenchError(f"{path}: not a JSON object ({e})") from None


def atomic_write(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a reader sees the old card or the new one, never half of one
    return path

"""Metric of the lm-eval world tasks: whether the (first) answer starts with the expected value,
case-insensitively (the workbench `match` grader, roughly; only there so lm-eval has a metric)."""

from typing import Any


def first_match(references: list[Any], predictions: list[Any]) -> float:  # lm-eval's metric signature
    ref = str(references[0]).strip().lower()
    pred = predictions[0]
    if isinstance(pred, list):
        pred = pred[0] if pred else ""
    return float(str(pred).strip().lower().startswith(ref))

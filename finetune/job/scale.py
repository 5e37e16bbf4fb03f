"""WiSE-FT for a fix job's adapter (Wortsman et al. 2022): the trained LoRA delta scaled by `a` in (0, 1],
i.e. a point on the line between the base model (a = 0) and the trained one (a = 1). A scaled adapter is a standard
peft adapter whose `lora_alpha` is multiplied by `a`; the trainable token rows (new abstention tokens, never trained
in the base model) keep their trained values, as peft's `rescale_adapter_scale` does.

`trainer.adapter_scale: auto` (DPO's default) picks the smallest of `AUTO_SCALES` at which the job still fixes
`min_targets` of its targeted probes, each scored on its own question as the evaluation renders and grades it
(finetune/job/scoring.py `Targets`; no known-fact slice is read), 1.0 when none does.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The scales `auto` tries, smallest first (measured: README, Performance, "Unreplayed known facts").
AUTO_SCALES = (0.25, 0.5, 0.75)


@dataclass(frozen=True)
class ScaleChoice:
    """The scale a job kept, why, and the share of its targets fixed at each scale it scored."""

    scale: float
    reason: str
    fixed_by_scale: dict[float, float]


@contextmanager
def scaled(model: Any, scale: float) -> Iterator[None]:
    """Every LoRA layer's delta of `model` scaled by `scale` inside the block (peft's `rescale_adapter_scale`)."""
    if scale == 1.0:
        yield
        return
    from peft.helpers import rescale_adapter_scale

    with rescale_adapter_scale(model, scale):
        yield


def fixed_at(model: Any, fixed: Callable[[Any], float], scale: float) -> float:
    """`fixed(model)` with every LoRA layer's delta scaled by `scale` (restored afterwards)."""
    with scaled(model, scale):
        return fixed(model)


def decide(setting: float | str, model: Any, fixed: Callable[[Any], float], min_targets: float, *,
           source: str = "the job spec", full: float | None = None) -> ScaleChoice | None:
    """The scale a job keeps for `trainer.adapter_scale` = `setting` (a number: as given; `auto`: `choose_scale`);
    None for 1.0 (the whole delta, as trained: nothing to record). `source` says where the setting came from (the
    job spec, or the method's default) in the reason. `full`: the targets the trained adapter fixes when they were
    scored already (the rollback guard's evaluation of the state the job keeps), not scored again."""
    if setting == "auto":
        def score(a: float) -> float:
            return full if a == 1.0 and full is not None else fixed_at(model, fixed, a)

        choice = choose_scale(score, min_targets)
        return dataclasses.replace(choice, reason=f"{choice.reason}; `auto` from {source}")
    scale = float(setting)
    return None if scale == 1.0 else ScaleChoice(scale, f"`trainer.adapter_scale: {scale}` from {source}", {})


def choose_scale(score: Callable[[float], float], min_targets: float,
                 scales: Sequence[float] = AUTO_SCALES) -> ScaleChoice:
    """The smallest of `scales` whose targets fixed (`score(a)`: the share fixed at scale a) is >= `min_targets`;
    1.0 (the trained adapter) when none is, or when the job has no targeted rows to score (score(1.0) is nan).
    Scores 1.0 first, then the scales from the smallest up, and no further than the one it keeps."""
    full = score(1.0)
    scores = {1.0: full}
    if math.isnan(full):  # no targeted rows
        return ScaleChoice(1.0, "no targeted training rows to score: the trained adapter is kept", scores)
    for a in sorted(scales):
        scores[a] = score(a)
        if scores[a] >= min_targets:
            return ScaleChoice(a, f"the smallest scale fixing >= {min_targets:.0%} of the targets "
                                  f"({scores[a]:.0%}; {full:.0%} at 1.0)", scores)
    return ScaleChoice(1.0, f"no scale below 1.0 fixes >= {min_targets:.0%} of the targets "
                            f"({', '.join(f'{a}: {v:.0%}' for a, v in sorted(scores.items()))})", scores)


def write_scale(adapter_dir: Path, scale: float) -> None:
    """Scale a saved adapter in place: `lora_alpha` (and every `alpha_pattern` value) times `scale`."""
    path = Path(adapter_dir) / "adapter_config.json"
    config = json.loads(path.read_text())
    config["lora_alpha"] = config["lora_alpha"] * scale
    config["alpha_pattern"] = {k: v * scale for k, v in (config.get("alpha_pattern") or {}).items()}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(config, indent=2, sort_keys=True))
    tmp.replace(path)

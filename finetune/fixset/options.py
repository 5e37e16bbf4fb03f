"""What a fix set is built with: `FixOptions`, one typed, checked value instead of a dozen keyword arguments, and the
constants its defaults and bounds come from (each with the measurement that chose it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError, unknown_name
from workbench.guard import GuardSet
from workbench.probes import Suite

STRATEGIES = ("auto", "inject", "abstain", "dpo", "rl")
#: Replay rows per targeted training row when `replay_ratio` is not given (rl: replay prompts mostly
#: give all-correct groups, which carry no GRPO signal except against abstaining; 1x is enough).
DEFAULT_REPLAY = {"rl": 1.0}
#: Replay rows per targeted training row for every other strategy (bench/fix_efficacy.py: SFT replay at 2x broke
#: 2.8% of the correct-before probes, at 4x fewer; `ANCHOR_SHARE`).
REPLAY_RATIO = 4.0
#: DPO anchor pairs per targeted pair, as a share of `replay_ratio` (bench/fix_efficacy.py, default world:
#: anchors at 4x left DPO fixing 57% of its targets, 2x 78% with 0.4% of correct-before probes broken, 1x 86%
#: but 4.0% broken; SFT replay stays at 4x, where 2x broke 2.8%).
ANCHOR_SHARE = 0.5
#: Known (baseline-correct) probes kept out of replay as the validation slice a job scores for broken known
#: facts: a tenth, at most 200 (the default world's 267 known probes give 27; greedy answers for 200 prompts
#: take seconds on the world model). They are what replay does not protect: measured with default jobs,
#: alt world seed 11 SFT broke 4 of its 6 (and 0 of the other 49 known facts), DPO 5 of 6 (0 of 49);
#: test world seed 0 SFT 1 of 5, DPO 2 of 5 (0 of the other 43). `--validation-fraction 0` replays them.
#: Not more: a quarter (bench/fix_efficacy.py, 20 epochs, rollback) left more facts unreplayed and they broke:
#: test world SFT 3 of 12 / DPO 2 of 12 (a tenth: 1 of 5 / 1 of 5), alt11 5 of 14 / 5 of 14 (1 of 6 / 0 of 6),
#: and the finer slice did not let rollback find a state that broke fewer.
VALIDATION_SHARE = 0.1
VALIDATION_MAX = 200
#: Guard facts (workbench/guard: facts of a general pool the base model knows) held out of training as the
#: validation slice: a quarter, at most 100, at least one. The run's own known facts are few when a team fixes its
#: own failures (4 of 60 in one walk-through, and a tenth of 4 is none): the guard's facts make the slice a measure
#: of what the fix does to the model's knowledge at large, not to the few facts it replays.
GUARD_VALIDATION_SHARE = 0.25
GUARD_VALIDATION_MAX = 100
#: Replay rows per known phrasing at most (a fact asked under its question and a paraphrase has two): replay asks
#: `replay_ratio` x the targeted rows, and a pool smaller than that was cycled until it filled them (4 known facts
#: repeated 45 times each, teaching those four and nothing else). Past this many the replay slice is smaller than
#: asked, and the manifest's `replay_capped` says so.
MAX_REPLAY_REPEATS = 3
#: Rehearsal rows (plain corpus text, finetune/rehearsal.py) per targeted SFT training row, when a corpus is given.
REHEARSAL_RATIO = 1.0
MAX_REHEARSAL = 100.0
#: Categories DPO fixes under "auto": the model knows the answer (or the data conflicts).
DPO_CATEGORIES = ("behavior:unstable", "behavior:prompt-sensitive", "data:conflict", "behavior:over-abstain")


@dataclass(frozen=True)
class FixOptions:
    """How one fix set is built from a run (`build_fixset`); checked when made, each error naming the field.

    Attributes:
        strategy: Which fix each attributed failure gets (STRATEGIES): "auto" picks per category (abstention or
            injection for what the model does not know, DPO for what it knows but says wrong); "inject", "abstain"
            and "dpo" force one kind where the category allows it; "rl" writes GRPO prompts only.
        facts: A JSONL file of `{"question" | "probe_id", "answer"}` rows: those probes get the given answer
            injected (SFT) or chosen (DPO) instead of abstention. Read, and refused when bad, before any work.
        replay_ratio: Replay rows (known facts, SFT) per targeted training row; anchors (DPO) get ANCHOR_SHARE of
            it. None: DEFAULT_REPLAY for the strategy, else REPLAY_RATIO. At least 0.
        heldout_fraction: Share of each category's targeted probes kept out of training (split "heldout"), by
            probe, every phrasing together: what generalization and early stopping are measured on. In [0, 1).
            Field probes (users' reported questions) and probes with a `facts` answer are never held out: each is
            a decided complaint, or a fact given to teach, and a held-out fact cannot be learnt from the others.
        validation_fraction: Share of the run's known probes (at most VALIDATION_MAX) kept out of replay as the
            slice a job scores for broken known facts; 0 also replays every guard fact. In [0, 1).
        reserve_fraction: A further share of known probes kept out of every row and of the validation slice: a
            breakage measure no job chose a checkpoint by (bench/fix_efficacy.py uses a tenth). In [0, 1), and
            with `validation_fraction` below 1.
        rehearsal: A corpus index (or a workspace holding one) whose documents become plain-text SFT rows
            (finetune/rehearsal.py); None: no rehearsal. Plain-template runs only.
        rehearsal_ratio: Rehearsal rows per targeted SFT training row, in [0, MAX_REHEARSAL].
        seed: Seeds every draw (held-out probes, slices, replay order, anchors, rehearsal).
        suite: The suite whose template renders the rows; None: the run's own suite settings.
        guard: The base model's guard set under the run's prompt settings (workbench/guard): its facts the run does
            not ask are replayed and held out beside the run's own known facts.
        allow_unguarded: Build even when no known fact at all protects the set (else refused: a fix without known
            facts can teach the model to refuse what it knows); the manifest then says `unguarded`.
        guard_paraphrases: Replay each replayed guard fact under its paraphrase too (SFT rows, DPO anchors, GRPO
            prompts), with the same answer: twice the guard's replay pool, and the fact asked two ways. Off by
            default until measured (bench/guard_flow.py `--fix-arg --guard-paraphrases`).
        domain: Known facts in the style of the run's questions (workbench/guard/domain.py): replayed first, a share
            held out as the guard's are, so that abstention is taught against answers the model knows inside the
            team's own domain; None: none.
        domain_how: How `domain` was found, in words (the manifest records it).
        base_model: The run's model as local weights (a directory), when the run names a model a server serves
            (`--backend openai`): its tokenizer renders and checks the rows. None: the run's model.
    """

    strategy: str = "auto"
    facts: Path | None = None
    replay_ratio: float | None = None
    heldout_fraction: float = 0.2
    validation_fraction: float = VALIDATION_SHARE
    reserve_fraction: float = 0.0
    rehearsal: str | Path | None = None
    rehearsal_ratio: float = REHEARSAL_RATIO
    seed: int = 0
    suite: Suite | None = None
    guard: GuardSet | None = None
    allow_unguarded: bool = False
    guard_paraphrases: bool = False
    domain: GuardSet | None = None
    domain_how: str = ""
    base_model: str | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise unknown_name("strategy", self.strategy, STRATEGIES)
        if self.replay < 0:
            raise WorkbenchError(f"`replay_ratio` must be >= 0 (times the targeted rows), got {self.replay}")
        if not 0 <= self.heldout_fraction < 1:
            raise WorkbenchError(f"`heldout_fraction` must be in [0, 1), got {self.heldout_fraction}")
        if not 0 <= self.validation_fraction < 1:
            raise WorkbenchError(f"`validation_fraction` must be in [0, 1), got {self.validation_fraction}")
        if not 0 <= self.reserve_fraction < 1 or self.validation_fraction + self.reserve_fraction >= 1:
            raise WorkbenchError(f"`reserve_fraction` must be in [0, 1) and leave known probes to replay with "
                                 f"`validation_fraction` {self.validation_fraction}, got {self.reserve_fraction}")
        if not 0 <= self.rehearsal_ratio <= MAX_REHEARSAL:
            raise WorkbenchError(f"`rehearsal_ratio` must be in [0, {MAX_REHEARSAL}] (times the targeted SFT rows), "
                                 f"got {self.rehearsal_ratio}")

    @property
    def replay(self) -> float:
        """The replay ratio in effect: `replay_ratio`, else the strategy's default."""
        if self.replay_ratio is not None:
            return self.replay_ratio
        return DEFAULT_REPLAY.get(self.strategy, REPLAY_RATIO)

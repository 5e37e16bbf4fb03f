"""The job defaults: one table by (model size class, method), each value with a one-line reason and the docs page of
the benchmark that chose it. `resolve()` (finetune/job/resolve.py) reads it wherever a job spec gives no value;
`workbench train --explain JOB.yaml` prints the row a job got. The measurements behind each value, with their
history, are in docs/explanation/defaults.md ("The job defaults table").

To change a default, change its line here (value, reason, link) and the figures on its docs page.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Generic, Literal, TypeVar, cast

T = TypeVar("T", covariant=True)  # a Default[int] is a Default[int | None]
SizeName = Literal["world-size", "pretrained-size"]
Targets = Literal["all-linear", "attention"]
Scale = float | Literal["auto"]

#: Above this width a model is pretrained-size (sft, dpo) and the learning rate falls as 1 / width (muP's rule for
#: Adam on hidden matrices). The worlds' models are 64-128 wide; the smallest pretrained chat model here is 576.
LR_REFERENCE_WIDTH = 128
#: `default_steps` stays within [the row's `min_steps`, MAX_DEFAULT_STEPS]; MIN_DEFAULT_STEPS is the worlds' floor.
MIN_DEFAULT_STEPS, MAX_DEFAULT_STEPS = 100, 1000

#: A fix set whose method's split holds at most this many targeted training rows is small (a handful of complaints or
#: facts: 3-15 targets, each under its question and its paraphrase): its job trains until its targets are fixed
#: (`early_stop.until_fixed`), up to SMALL_SET_STEPS x the steps its epochs give, scoring them and the known facts a
#: dozen times on the way. Its epochs alone (30 steps on a pretrained model) fixed 3 of 12 targets of `make
#: demo-real` with the replay KL term holding it to the base model (docs/benchmarks/staged_fix.md).
SMALL_SET_ROWS, SMALL_SET_STEPS = 30, 4
#: Scorings of the targets and the known facts over a small set's job (`early_stop.known_every` = its steps / this).
SMALL_SET_SCORINGS = 12

_BENCH = "docs/benchmarks/"
FIX_EFFICACY = _BENCH + "fix_efficacy.md#across-worlds"
FIX_UNREPLAYED = _BENCH + "fix_efficacy.md#unreplayed-known-facts"
FIX_DEFAULT_WORLD = _BENCH + "fix_efficacy.md#the-default-world-sft-and-dpo"
FIX_RL = _BENCH + "fix_efficacy.md#rl-vs-sft-vs-dpo"
REAL_JOBS = _BENCH + "real_model.md#job-defaults"
REAL_LR = _BENCH + "real_model.md#the-learning-rates-width-rule"
ADAPTER_SCALE = _BENCH + "adapter_scale.md#latest-what-auto-does-2026-11-24"
ADAPTER_SCALE_GRPO = _BENCH + "adapter_scale.md#grpo"
GUARD_KL = _BENCH + "guard_flow.md#replay-kl-on-the-308-fact-guard-2026-11-27"
GUARD_PLANTED = _BENCH + "guard_flow.md#the-planted-world-fixes-against-ground-truth-2026-11-27"


@dataclass(frozen=True)
class Default(Generic[T]):
    """One default: its value, why in one line, and the benchmark page (docs/benchmarks/...) that chose it."""

    value: T
    why: str
    source: str


@dataclass(frozen=True)
class JobDefaults:
    """The defaults of one (size class, method): what a job gets where its spec gives no value.

    Attributes:
        size: The size class ("world-size": widths <= LR_REFERENCE_WIDTH, or unknown; "pretrained-size": wider).
        method: sft | dpo | grpo.
        targets: `lora.target_modules`: "all-linear" (every linear layer of the block) or "attention" (the
            attention's query and value projections), per architecture (finetune/job/resolve.py's tables).
        lora_r, lora_alpha: `lora.r`, `lora.alpha`.
        batch: `trainer.per_device_batch_size`.
        epochs: `trainer.epochs`, passes over the method's training rows that give the steps; None: `fixed_steps`.
        injection_epochs: `trainer.epochs` instead of `epochs` when the method's training rows teach answers
            (knowledge injection, `FixSetManifest.injects`); None: `epochs` either way. A fact needs more passes to be
            stored than the one abstention phrase every abstention row shares.
        fixed_steps: `trainer.max_steps` when `epochs` is None.
        min_steps: The steps' floor when they come from `epochs` (the ceiling is MAX_DEFAULT_STEPS).
        learning_rate: `trainer.learning_rate` at widths <= LR_REFERENCE_WIDTH; a wider model gets it x
            LR_REFERENCE_WIDTH / width (`default_lr`).
        adapter_scale: `trainer.adapter_scale` (a number, or "auto": the smallest of 0.25 / 0.5 / 0.75 that still
            fixes 80% of the targets).
        replay_kl: `trainer.replay_kl`, the weight of the KL term over the replay rows (SFT; 0: off).
        injection_replay_kl: `trainer.replay_kl` instead of `replay_kl` when the method's training rows teach
            answers; None: `replay_kl` either way. Their longer job drifts further from the base model.
    """

    size: SizeName
    method: str
    targets: Default[Targets]
    lora_r: Default[int]
    lora_alpha: Default[int]
    batch: Default[int]
    epochs: Default[float | None]
    injection_epochs: Default[float | None]
    fixed_steps: Default[int | None]
    min_steps: Default[int]
    learning_rate: Default[float]
    adapter_scale: Default[Scale]
    replay_kl: Default[float]
    injection_replay_kl: Default[float | None]

    def __post_init__(self) -> None:
        if (self.epochs.value is None) == (self.fixed_steps.value is None):
            raise ValueError(f"job defaults {self.size} / {self.method}: give `epochs` or `fixed_steps`, not both "
                             "or neither")
        if self.injection_epochs.value is not None and self.epochs.value is None:
            raise ValueError(f"job defaults {self.size} / {self.method}: `injection_epochs` needs `epochs`")

    def for_fixset(self, injects: bool) -> JobDefaults:
        """The row as a job on a fix set reads it: where its training rows teach answers (`injects`), the row's
        `injection_epochs` and `injection_replay_kl` in place of `epochs` and `replay_kl` (those it has)."""
        epochs, kl = self.injection_epochs, self.injection_replay_kl
        if not injects or (epochs.value is None and kl.value is None):
            return self
        return replace(self, epochs=self.epochs if epochs.value is None else epochs,
                       replay_kl=self.replay_kl if kl.value is None else cast(Default[float], kl))

    @property
    def steps_fixed(self) -> int:
        """`fixed_steps` of a row without `epochs` (checked when the table is built)."""
        if self.fixed_steps.value is None:
            raise ValueError(f"job defaults {self.size} / {self.method}: steps come from `epochs`")
        return self.fixed_steps.value

    def values(self) -> dict[str, Default[object]]:
        """Field name -> its Default, in the table's order (what `--explain` prints)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), Default)}

    def describe(self) -> str:
        """The row in words, as a job's `size_rule` records it."""
        targets = "every linear layer" if self.targets.value == "all-linear" else "the attention's q/v"
        def injecting(value: float | None) -> str:
            return f" ({value:g} when it injects facts)" if value is not None else ""

        epochs, kl = self.epochs.value, self.replay_kl.value
        steps = (f"{epochs:g} epochs{injecting(self.injection_epochs.value)}, at least {self.min_steps.value} steps"
                 if epochs else "fixed steps")
        lora = f"LoRA r {self.lora_r.value} alpha {self.lora_alpha.value} on {targets}"
        term = f", replay KL {kl:g}{injecting(self.injection_replay_kl.value)}" if kl else ""
        return f"{lora}, batch {self.batch.value}, {steps}{term}"


_ = Default  # the table's lines below read best short
W_ALL: Default[Targets] = _("all-linear", "injection needs the MLPs: q/v learned 3 of 8 injected facts, all-linear 6",
                            FIX_UNREPLAYED)
W_R = _(16, "r 8 fixed 76-78% of targets and broke 1.2-1.6% of correct probes; r 16 fixed 84%, broke 0.4%",
        FIX_DEFAULT_WORLD)
W_ALPHA = _(32, "alpha / r 2, as measured with r 16", FIX_DEFAULT_WORLD)
W_BATCH = _(32, "the batch the worlds' rates and epochs were tuned at", FIX_DEFAULT_WORLD)
W_FLOOR = _(MIN_DEFAULT_STEPS, "a small fix set at 62 steps fixed 68% of its targets, at 300 steps 95.5%", FIX_EFFICACY)
W_LR = _(3e-3, "1e-3 / 5e-4 fixed 2% / 10% of targets; DPO 2e-3 75%, 3e-3 78%; SFT 5e-3 broke 1.6%", FIX_DEFAULT_WORLD)
AUTO: Default[Scale] = _("auto", "halved DPO's broken unreplayed facts on seven worlds (32 -> 17), SFT's 29 -> 22",
                         ADAPTER_SCALE)
NO_FIXED = _(None, "steps come from the epochs", FIX_EFFICACY)
SAME_EPOCHS = _(None, "the worlds' epochs were measured on fix sets that inject facts", FIX_EFFICACY)
P_QV: Default[Targets] = _("attention", "SmolLM2, r 8: q/v broke 2 of 80 unseen known facts (4 seeds), all layers 4",
                           REAL_JOBS)
P_R = _(8, "q/v at r 8 broke 2 of 80 unseen known facts over 4 seeds; r 16 2 of 20 on one seed", REAL_JOBS)
P_ALPHA = _(16, "alpha / r 2, as on the worlds", REAL_JOBS)
P_BATCH = _(8, "60 rows: 4 epochs at batch 8 are 30 steps (110-261 s); the world's batch 32 job took 3042 s",
            REAL_JOBS)
P_EPOCHS = _(4.0, "8 or 13 epochs broke 2-3 of 20 unseen known facts; 4 epochs 2 of 80 over 4 seeds", REAL_JOBS)
P_INJECT = _(12.0, "2 SmolLM2 planted worlds, 5 runs: 81-96% of targets fixed (KL 20), 32-58% at 4 epochs (KL 10)",
             GUARD_PLANTED)
P_INJECT_KL = _(20.0, "2 SmolLM2 planted worlds, 5 runs at 12 epochs: 0-0.87% of guard facts broken; 0.25-1.31% at 10",
                GUARD_PLANTED)
P_FLOOR = _(30, "the steps measured: 4 epochs of 60 rows at batch 8", REAL_JOBS)
W_NO_KL = _(0.0, "not measured on the worlds' models", GUARD_KL)
NO_KL = _(0.0, "GRPO holds its replay by its own anchor (grpo.replay_anchor); the term is SFT's and DPO's", GUARD_KL)
SAME_KL = _(None, "one weight for every fix set", GUARD_KL)
P_LR = _(3e-3, "the world's rate x 128 / width: 6.7e-4 on SmolLM2 broke 3 of 68 known facts, 5e-4 broke 7", REAL_LR)

#: (size class, method) -> the defaults a job gets where its spec gives no value. grpo has no pretrained-size row:
#: its rule is not measured on a pretrained model, so it keeps the world's row at any width (`row_for`).
JOB_DEFAULTS: dict[tuple[SizeName, str], JobDefaults] = {
    ("world-size", "sft"): JobDefaults(
        "world-size", "sft", targets=W_ALL, lora_r=W_R, lora_alpha=W_ALPHA, batch=W_BATCH,
        epochs=_(20.0, "at 15 epochs alt-gpt2-5 fixed 63.6% of its targets, at 20 81.8%", FIX_EFFICACY),
        injection_epochs=SAME_EPOCHS, fixed_steps=NO_FIXED, min_steps=W_FLOOR, learning_rate=W_LR, adapter_scale=AUTO,
        replay_kl=W_NO_KL, injection_replay_kl=SAME_KL),
    ("world-size", "dpo"): JobDefaults(
        "world-size", "dpo", targets=W_ALL, lora_r=W_R, lora_alpha=W_ALPHA, batch=W_BATCH,
        epochs=_(15.0, "keeps the default world's 313 steps; the old fixed 300 steps were ~75 epochs on small worlds",
                 FIX_EFFICACY),
        injection_epochs=SAME_EPOCHS, fixed_steps=NO_FIXED, min_steps=W_FLOOR, learning_rate=W_LR, adapter_scale=AUTO,
        replay_kl=W_NO_KL, injection_replay_kl=SAME_KL),
    ("world-size", "grpo"): JobDefaults(
        "world-size", "grpo", targets=W_ALL, lora_r=W_R, lora_alpha=W_ALPHA, batch=W_BATCH,
        epochs=_(None, "its share fixed did not grow with its steps; an epochs rule is not measured across worlds",
                 FIX_RL),
        injection_epochs=_(None, "its steps are fixed", FIX_RL),
        fixed_steps=_(300, "1.5 passes over the default world's 788 prompts at 4 prompts a step", FIX_RL),
        min_steps=W_FLOOR,
        learning_rate=_(1e-3, "3e-3 tripped the reward-hacking watchdog at step 117 (2.1% broken); 1e-3 broke 0.9%",
                        FIX_RL),
        adapter_scale=_(1.0, "GRPO fixed 33-53% of its targets, under auto's 80%: auto would keep 1.0",
                        ADAPTER_SCALE_GRPO),
        replay_kl=NO_KL, injection_replay_kl=SAME_KL),
    ("pretrained-size", "sft"): JobDefaults(
        "pretrained-size", "sft", targets=P_QV, lora_r=P_R, lora_alpha=P_ALPHA, batch=P_BATCH, epochs=P_EPOCHS,
        injection_epochs=P_INJECT, fixed_steps=NO_FIXED, min_steps=P_FLOOR, learning_rate=P_LR,
        adapter_scale=_("auto", "SmolLM2: broken known facts 3 -> 1 of 68 against 1.0", ADAPTER_SCALE),
        replay_kl=_(10.0, "SmolLM2, 2 sets x 2 seeds: 3-6 of 308 guard facts broken, 14-23 without it", GUARD_KL),
        injection_replay_kl=P_INJECT_KL),
    ("pretrained-size", "dpo"): JobDefaults(
        "pretrained-size", "dpo", targets=P_QV, lora_r=P_R, lora_alpha=P_ALPHA, batch=P_BATCH, epochs=P_EPOCHS,
        injection_epochs=_(None, "DPO's chosen answers were measured at its epochs only", GUARD_PLANTED),
        fixed_steps=NO_FIXED, min_steps=P_FLOOR,
        learning_rate=_(3e-3, "x 128 / width (6.7e-4 on SmolLM2): 2e-4 / 1e-4 stopped the fix, sparing no known fact",
                        REAL_LR),
        adapter_scale=AUTO,
        replay_kl=_(0.0, "SmolLM2, NQ, --strategy dpo: 10 broke 15 of 308 guard facts, 0 broke 21; both over 2%",
                    GUARD_KL),
        injection_replay_kl=SAME_KL),
}


def size_class(method: str, width: int | None) -> tuple[SizeName, str]:
    """(the size class of a `method` job on a model of `width`, why in words). pretrained-size for sft and dpo on a
    model wider than LR_REFERENCE_WIDTH; world-size otherwise (grpo always; an unknown width counts as a world's)."""
    if method != "grpo" and width is not None and width > LR_REFERENCE_WIDTH:
        return "pretrained-size", f"width {width} > {LR_REFERENCE_WIDTH}"
    why = ("grpo keeps them at any width" if method == "grpo" else "width unknown" if width is None
           else f"width {width} <= {LR_REFERENCE_WIDTH}")
    return "world-size", why


def row_for(method: str, width: int | None) -> tuple[JobDefaults, str]:
    """(the row a `method` job on a model of `width` gets, the size rule in words: `world-size (width 64 <= 128):
    LoRA r 16 ...`)."""
    size, why = size_class(method, width)
    row = JOB_DEFAULTS[(size, method)]
    return row, f"{size} ({why}): {row.describe()}"

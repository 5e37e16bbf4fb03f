"""Measurements on the real chat model (SmolLM2-135M-Instruct, the built-in `smollm2`).

    .venv/bin/python bench/real_model.py budget [--limit 50] [--max 128] [--threads 1] [--out FILE]
    .venv/bin/python bench/real_model.py fix [--questions 16] [--facts 67] [--samples 1] [--steps 30] [--method sft]
        [--lr rule] [--scales 1,auto] [--out FILE]
    .venv/bin/python bench/real_model.py jobs --workspace WS [--settings cli,world] [--seeds 0] [--threads 1]
        [--out FILE]
    .venv/bin/python bench/real_model.py throughput [--questions 32] [--samples 3] [--max-tokens 48] [--threads 1]
        [--hf-decoders loop,generate] [--dtype float32] [--ablate] [--skip-vllm] [--skip-lmeval] [--out FILE]

`budget`: how many greedy answers a token budget cuts (finish_reason `length`), per format and template, at
16/32/64/96/128 new tokens: what the suite's default `max_tokens` rules (workbench/probes/budget.py) rest on.
One greedy generation per prompt at `--max` tokens gives every smaller budget at once: greedy decoding is
deterministic, so the answer under budget B is the first B tokens of the long one, and it is cut at B exactly
when it has not ended (end of turn, or the newline stop of a plain template) within B tokens.
Templates: `chat` (the tokenizer's chat template, as `--template chat`) and a 2-shot plain Q/A template with a
newline stop. Formats: every shipped real-benchmark file (tests/data/formats/) and ../shared/data/TruthfulQA.csv
when it is there (its first `--limit` rows).

`fix`: `workbench demo --real` as a user runs it (a subprocess, in a fresh workspace) at the given size, once per
learning rate in `--lr` and adapter scale in `--scales` (`trainer.adapter_scale`, WiSE-FT: `1` all of the trained
delta, `auto` finetune/job/scale.py's rule; side by side on the same baseline and fix set): its wall time, the
scale the job kept and its report, per group of the
baseline's probes: the targeted unknown facts (trained, held out) with how many were hallucinated before and after
the fix, and the known facts (answered right before; in the fix set's replay or not) the fix broke (now refused or
wrong), with the issue's goals (`goals`).

`jobs`: job settings side by side on the baseline and fix set a `fix` run (or `workbench demo --real`) left in
`--workspace` (its `fix-real/RUN/fixset`): each setting of SETTINGS is one SFT job on that fix set per `--seeds`
(`trainer.seed`: LoRA init and data order), its adapter evaluated like the baseline and read into the same report
and goals as `fix`, with the settings the job resolved (LoRA, batch, steps and the rule that gave them, learning
rate, adapter scale kept) and its wall time. Settings run one after another in the workspace; copy it (the store
with sqlite's backup, the fix set, the probe file) to run two at once.

`throughput`: the first `--questions` NQ-open questions x (greedy + `--samples`), chat template with the demo's
system prompt, `--max-tokens` new tokens, side by side in one process: workbench-hf once per `--hf-decoders`
(the backend option `decode`: `loop`, its own decode loop, is `workbench-hf`; `generate`, transformers' generate,
is `workbench-hf-generate`), workbench-vllm (bench/vllm_vs_hf.py's `in_process`: model load / engine start,
warm-up, eval and close timed apart) and
lm-eval-hf 0.4.13 (its own venv, bench/eval_throughput.py's; the same messages through
`--apply-chat-template --system-instruction`, the same token budget and sampling settings, batch 64; its load
timed apart). Ratios of probes per second of generation. `--ablate`: the hf decode loop on the same requests
(every question's greedy + sampled request in one call, as the runner sends them), timed with each of its savings
turned off in turn (hf_decode.LoopSavings), with and without log-probs, and the prefill's share of the time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from finetune.job.resolve import ATTENTION_TARGETS, DEFAULT_TARGETS  # noqa: E402

BUDGETS = (16, 32, 64, 96, 128)
TWO_SHOT = ("Q: What is the capital of France?\nA: Paris\nQ: Who wrote the play Hamlet?\nA: William Shakespeare\n"
            "Q: {question}\nA:")
SOURCES = {
    "nq_open": ROOT / "tests/data/formats/nq_open.jsonl",
    "simpleqa": ROOT / "tests/data/formats/simpleqa.csv",
    "popqa": ROOT / "tests/data/formats/popqa.jsonl",
    "truthfulqa": ROOT.parent.parent / "shared/data/TruthfulQA.csv",
}


def cut_counts(model: Any, tok: Any, prompts: list[str], stop: str | None, max_new: int) -> dict[int, int]:
    """For each budget, how many prompts' greedy answers are still running after that many new tokens."""
    import torch

    lengths: list[int] = []  # tokens until the answer ends (max_new + 1: never ended)
    for i in range(0, len(prompts), 8):
        batch = tok(prompts[i:i + 8], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=max_new, do_sample=False, pad_token_id=tok.pad_token_id)
        for row in out[:, batch["input_ids"].shape[1]:].tolist():
            end = max_new + 1
            for n in range(1, len(row) + 1):
                if row[n - 1] in (tok.eos_token_id, tok.pad_token_id):
                    end = n
                    break
                if stop and stop in tok.decode(row[:n]):
                    end = n
                    break
            lengths.append(end)
    return {b: sum(n > b for n in lengths) for b in BUDGETS}


def budget(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.models import resolve_model
    from workbench.probes import load_probes

    torch.set_num_threads(args.threads)
    model_dir = resolve_model("smollm2", ROOT / ".cache" / "real-model")
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()  # type: ignore[no-untyped-call]
    rows = []
    for fmt, path in SOURCES.items():
        if not path.is_file():
            print(f"{fmt}: {path} absent, skipped", flush=True)
            continue
        questions = [p.question for p in load_probes(path, format=fmt).probes][: args.limit]
        for template in ("chat", "2-shot"):
            if template == "chat":
                prompts = [str(tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                       add_generation_prompt=True)) for q in questions]
            else:
                prompts = [TWO_SHOT.replace("{question}", q) for q in questions]
            t = time.perf_counter()
            cut = cut_counts(model, tok, prompts, None if template == "chat" else "\n", args.max)
            row = {"format": fmt, "template": template, "n": len(prompts), "cut": cut,
                   "seconds": round(time.perf_counter() - t, 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def fix(args: argparse.Namespace) -> list[dict[str, Any]]:
    """`demo --real` once per learning rate in `--lr` (`rule`: the job's default_lr) x adapter scale in `--scales`,
    in one workspace: the baseline, its attribution and the fix set are the same for each (later runs take the
    baseline's answers from the cache), only the job's learning rate or adapter scale differs (same seed: at one
    thread the same training, then scaled)."""
    import subprocess
    import tempfile

    ws = tempfile.mkdtemp(prefix="real-fix-")
    rows = []
    for lr in args.lr:
        for scale in args.scales:
            cmd = [sys.executable, "-m", "hallucination_workbench", "demo", "--real", "--workspace", ws,
                   "--questions", str(args.questions), "--facts", str(args.facts), "--samples", str(args.samples),
                   "--steps", str(args.steps), "--methods", args.method, "--threads", str(args.threads),
                   "--adapter-scale", scale]
            cmd += [] if lr == "rule" else ["--lr", lr]
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                                  stdin=subprocess.DEVNULL)
            wall = time.perf_counter() - t
            if proc.returncode != 0:
                raise SystemExit(f"demo --real failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            line = next((x for x in proc.stdout.splitlines() if x.startswith('{"real_demo"')), None)
            if line is None:
                raise SystemExit(f"demo --real printed no summary line:\n{proc.stdout[-3000:]}")
            row = {"lr_asked": lr, "scale_asked": scale, "questions": args.questions, "facts": args.facts,
                   "samples": args.samples, "steps": args.steps, "method": args.method, "wall_s": round(wall, 1),
                   "load_avg_end": os.getloadavg()[0], **json.loads(line)}
            row["goals"] = goals(row["real_demo"])
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


#: `jobs` settings: job-spec fields over {fixset, method: sft, output_dir}. `cli`: nothing more, what `workbench fix
#: RUN --train` resolves (finetune/job/resolve.py's rules for the model). `world`: the defaults before the size rule
#: written out: r 16 on every linear layer, batch 32, the whole delta, and 100 steps (what 20 epochs gave
#: on the measured fix set, 60 rows: 38, clamped to the world's floor of 100). `qv8-b8-30`: the size rule's values on
#: that fix set (4 epochs of 60 rows at batch 8), as the real demo's own job dict had them before. The rest: the
#: candidates it was measured against (README "The real-model demo").
_ALL = DEFAULT_TARGETS["llama"]  # SmolLM2 is a llama: every linear layer of the block
_QV = ATTENTION_TARGETS["llama"]


def _setting(targets: list[str], r: int, batch: int, steps: int, scale: float | str) -> dict[str, Any]:
    return {"lora": {"r": r, "alpha": 2 * r, "target_modules": targets},
            "trainer": {"per_device_batch_size": batch, "max_steps": steps, "adapter_scale": scale}}


SETTINGS: dict[str, dict[str, Any]] = {
    "cli": {},
    "world": _setting(_ALL, 16, 32, 100, 1.0),
    "qv8-b8-30": _setting(_QV, 8, 8, 30, "auto"),
    "qv8-b8-100": _setting(_QV, 8, 8, 100, "auto"),
    "all8-b8-30": _setting(_ALL, 8, 8, 30, "auto"),
    "all8-b8-30-scale1": _setting(_ALL, 8, 8, 30, 1.0),
    "all8-b8-60": _setting(_ALL, 8, 8, 60, "auto"),
    "all16-b8-30": _setting(_ALL, 16, 8, 30, "auto"),
}


def jobs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One SFT job per setting on the fix set in `--workspace`, each evaluated like the baseline (see the module
    docstring); rows as `fix` reports them, plus what the job resolved."""
    import torch

    from finetune.fixset import load_manifest
    from finetune.job import from_dict, run_job
    from finetune.job.resolve import resolve
    from hallucination_workbench.demo_real import outcome, taught_and_replayed
    from workbench.gating import gate_runs, rerun_like
    from workbench.store import Store

    torch.set_num_threads(args.threads)
    ws = args.workspace.resolve()
    runs = sorted((ws / "fix-real").glob("*/fixset"))
    if len(runs) != 1:
        raise SystemExit(f"{ws}: expected one fix-real/RUN/fixset (a `fix` run's workspace), found {len(runs)}")
    fixset, base = runs[0], runs[0].parent.name
    store = Store.open(ws)
    manifest = load_manifest(fixset)
    rows = []
    for name, seed in ((n, s) for n in args.settings for s in args.seeds):
        overlay = SETTINGS[name]
        seeded = {**overlay.get("trainer", {}), "seed": seed}
        spec = from_dict({**overlay, "trainer": seeded, "fixset": str(fixset), "method": "sft",
                          "output_dir": str(ws / "jobs" / f"{name}-seed{seed}")}, where=f"setting {name}")
        job = resolve(spec)
        t, load_start = time.perf_counter(), os.getloadavg()[0]
        result = run_job(job, store)
        job_s = time.perf_counter() - t
        if result.adapter is None:
            raise SystemExit(f"{name}: the job made no adapter: {result.message}")
        t = time.perf_counter()
        cand = rerun_like(store, base, adapter=result.adapter)
        eval_s = time.perf_counter() - t
        record = gate_runs(store, base, cand)
        trained, replay = taught_and_replayed(fixset, "sft")
        report = outcome(store, base, cand, trained, set(manifest.heldout_probe_ids), replay)
        lora, trainer = job.spec.lora, job.spec.trainer
        row = {"setting": name, "seed": seed, "given": overlay, "r": lora.r, "alpha": lora.alpha,
               "target_modules": list(job.target_modules), "trainable_tokens": list(job.trainable_tokens),
               "batch": trainer.per_device_batch_size, "max_length": trainer.max_length, "steps": result.steps,
               "max_steps_rule": job.steps_rule, "lr": job.learning_rate, "lr_rule": job.lr_rule,
               "adapter_scale": result.adapter_scale, "adapter_scale_reason": result.adapter_scale_reason,
               "threads": args.threads, "job_s": round(job_s, 1), "s_per_step": round(job_s / max(1, result.steps), 2),
               "candidate_eval_s": round(eval_s, 1), "load_avg_start": load_start, "load_avg_end": os.getloadavg()[0],
               "gate": record.result.verdict, "real_demo": report, "goals": goals(report)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def lr_list(text: str) -> list[str]:
    """`--lr`: comma-separated `rule` or positive numbers, checked before any run (a bad one would otherwise fail
    only after the baseline's evaluation, minutes in)."""
    values = [v.strip() for v in text.split(",")]
    for v in values:
        if v != "rule" and not _positive(v):
            raise argparse.ArgumentTypeError(f"each value must be `rule` or a positive number, got `{v}`")
    return values


def setting_list(text: str) -> list[str]:
    """`--settings`: comma-separated names of SETTINGS, checked before any job."""
    values = [v.strip() for v in text.split(",")]
    for v in values:
        if v not in SETTINGS:
            raise argparse.ArgumentTypeError(f"unknown setting `{v}`; one of {', '.join(SETTINGS)}")
    return values


def seed_list(text: str) -> list[int]:
    """`--seeds`: comma-separated non-negative integers (`trainer.seed`), checked before any job."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = [-1]
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"each value must be a non-negative integer, got `{text}`")
    return values


def scale_list(text: str) -> list[str]:
    """`--scales`: comma-separated `auto` or numbers in (0, 1] (`trainer.adapter_scale`), checked before any run."""
    values = [v.strip() for v in text.split(",")]
    for v in values:
        if v != "auto" and not (_positive(v) and float(v) <= 1):
            raise argparse.ArgumentTypeError(f"each value must be `auto` or a number in (0, 1], got `{v}`")
    return values


def _positive(v: str) -> bool:
    try:
        return math.isfinite(float(v)) and float(v) > 0
    except ValueError:
        return False


def goals(report: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The issue's goals read off a demo report: hallucination on the targeted facts the job trained on at least
    halved, on the held-out ones down, and known facts no training row showed (not in the replay) refused or
    wrong after the fix at most 2%."""
    empty = {"n": 0, "hallucinated_before": 0, "hallucinated_after": 0, "correct_after": 0}
    trained, held = report.get("targeted, trained", empty), report.get("targeted, held out", empty)
    unseen = report.get("known, not replayed", empty)
    broken = unseen["n"] - unseen["correct_after"]
    return {
        "trained_halved": trained["hallucinated_after"] * 2 <= trained["hallucinated_before"],
        "heldout_down": held["hallucinated_after"] < held["hallucinated_before"],
        "known_not_replayed": unseen["n"], "known_not_replayed_broken": broken,
        "known_not_replayed_broken_share": round(broken / unseen["n"], 4) if unseen["n"] else None,
        "known_not_replayed_ok": bool(unseen["n"]) and broken <= 0.02 * unseen["n"],
    }


LMEVAL_TASK = """# lm-eval task over the NQ-open slice, as bench/real_model.py throughput asks the workbench: the
# question as the user turn of the tokenizer's chat template (system prompt: --apply-chat-template)
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answers[0]}}}}"
generation_kwargs:
  until: []
  max_gen_toks: {max_tokens}
  do_sample: {sample}
{sampling}repeats: {repeats}
metric_list:
  - metric: !function utils.first_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def ablate(b: Any, prompts: list[str], samples: int, max_tokens: int, rounds: int = 2) -> dict[str, Any]:
    """Seconds of the hf decode loop per setting on one call holding every prompt's greedy + sampled request,
    alternated `rounds` times; and the prefill's share (its forward) in the full loop. `b`: an HFBackend, the
    one that rendered the prompts (the model loads once)."""
    import dataclasses

    import torch

    from workbench.backends.hf_decode import LoopSavings, decode
    from workbench.types import GenerationRequest, SamplingParams

    tok = b.tokenizer
    greedy = SamplingParams(max_tokens=max_tokens, logprobs=True)
    sampled = dataclasses.replace(greedy, temperature=1.0, n=samples, seed=0)
    reqs = [GenerationRequest(p, s) for p in prompts for s in (greedy, sampled)]
    no_lp = [dataclasses.replace(r, sampling=dataclasses.replace(r.sampling, logprobs=False)) for r in reqs]
    settings = {"loop (all savings)": (LoopSavings(), reqs),
                "loop, prefill per answer": (LoopSavings(share_prefill=False), reqs),
                "loop, finished rows kept": (LoopSavings(drop_finished=False), reqs),
                "loop, neither": (LoopSavings(share_prefill=False, drop_finished=False), reqs),
                "loop, no log-probs": (LoopSavings(), no_lp)}
    times: dict[str, list[float]] = {k: [] for k in settings}
    forwards: list[tuple[int, float]] = []
    with torch.inference_mode():
        decode(b._model, tok, reqs[:2])  # warm-up
        for _ in range(rounds):
            for name, (savings, rs) in settings.items():
                t = time.perf_counter()
                decode(b._model, tok, rs, savings)
                times[name].append(round(time.perf_counter() - t, 2))
        start: list[float] = []
        pre = b._model.register_forward_pre_hook(lambda *_: start.append(time.perf_counter()))
        post = b._model.register_forward_hook(
            lambda _m, _a, o: forwards.append((o.logits.shape[0], time.perf_counter() - start[-1])))
        t = time.perf_counter()
        decode(b._model, tok, reqs)
        total = time.perf_counter() - t
        pre.remove()
        post.remove()
    out: dict[str, Any] = {"seconds": times, "profile": {
        "total_s": round(total, 2), "prefill_s": round(forwards[0][1], 2), "prefill_rows": forwards[0][0],
        "decode_forwards_s": round(sum(f[1] for f in forwards[1:]), 2), "decode_steps": len(forwards) - 1,
        "rows_per_step": [f[0] for f in forwards[1:]]}}
    print(f"  ablation (s, {rounds} rounds alternated): {times}\n  profile: {out['profile']}", flush=True)
    return out


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    """workbench-hf, workbench-vllm and lm-eval-hf on the same questions, chat messages and samples, side by side
    in one run; generation timed apart from model load / engine start (bench/vllm_vs_hf.py's `in_process`)."""
    import subprocess

    sys.path.insert(0, str(ROOT / "bench"))
    import torch
    from _world import CACHE
    from eval_throughput import TASK_DIR, ensure_lmeval_venv, lmeval_versions
    from vllm_vs_hf import in_process

    from hallucination_workbench.demo_real import SYSTEM
    from workbench.models import resolve_model
    from workbench.probes import resolve_probes
    from workbench.types import ModelSpec

    CACHE.mkdir(exist_ok=True)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, sorted(os.sched_getaffinity(0))[
        : args.threads])))
    torch.set_num_threads(args.threads)
    model = str(resolve_model("smollm2", ROOT / ".cache" / "real-model"))
    probes = CACHE / f"real-nq-{args.questions}.jsonl"
    rows = [json.loads(x) for x in SOURCES["nq_open"].read_text().splitlines()][: args.questions]
    probes.write_text("".join(json.dumps({"id": f"nq-{i}", "question": r["question"], "answers": r["answer"]}) + "\n"
                              for i, r in enumerate(rows)))
    suite, loaded = resolve_probes(str(probes))
    suite = suite.with_generation(max_tokens=args.max_tokens, system_prompt=SYSTEM, template="chat")
    suite = suite.model_copy(update={"template": "chat"})
    print(f"{len(rows)} NQ-open questions x (greedy + {args.samples} samples), chat template + system prompt, "
          f"{args.max_tokens} tokens, {args.threads} thread(s), load avg {os.getloadavg()[0]:.2f}", flush=True)
    out: dict[str, Any] = {"questions": len(rows), "samples": args.samples, "max_tokens": args.max_tokens,
                           "threads": args.threads, "dtype": args.dtype, "load_avg_start": os.getloadavg()[0]}
    runs: dict[str, dict[str, Any]] = {}
    for decoder in args.hf_decoders.split(","):
        name = "workbench-hf" + ("" if decoder == "loop" else f"-{decoder}")
        runs[name] = in_process("hf", ModelSpec(model=model, backend="hf", dtype=args.dtype,
                                                options=(("decode", decoder),)), suite, loaded, args.samples)
    hf = runs[next(iter(runs))]
    if "workbench-hf" in runs and "workbench-hf-generate" in runs:
        agree = [a == b for a, b in zip(runs["workbench-hf"]["_greedy"], runs["workbench-hf-generate"]["_greedy"],
                                        strict=True)]
        out["greedy_agreement_hf_loop_generate"] = sum(agree) / len(agree)
    if not args.skip_vllm:
        runs["workbench-vllm"] = in_process("vllm", ModelSpec(model=model, backend="vllm", dtype=args.dtype), suite,
                                            loaded, args.samples)
        agree = [a == b for a, b in zip(hf["_greedy"], runs["workbench-vllm"]["_greedy"], strict=True)]
        out["greedy_agreement_vllm_hf"] = sum(agree) / len(agree)
    if args.ablate:
        from workbench.backends.hf import HFBackend
        from workbench.runner import render_prompt

        backend = HFBackend(ModelSpec(model=model, dtype="float32"))  # renders the prompts and runs the ablation
        prompts = [render_prompt(suite, None, p.question, backend) for p in loaded.probes]
        out["ablation"] = ablate(backend, prompts, args.samples, args.max_tokens)
    log: list[str] = []
    py = None if args.skip_lmeval else ensure_lmeval_venv(log)
    if py is not None:
        out["lmeval_env"] = lmeval_versions(py)
        tasks = CACHE / f"lmeval-real-{len(rows)}-{args.samples}"
        tasks.mkdir(exist_ok=True)
        (tasks / "utils.py").write_text((TASK_DIR / "utils.py").read_text())
        names = ["real_greedy"] + (["real_sampled"] if args.samples else [])
        for name in names:
            sampled = name == "real_sampled"
            (tasks / f"{name}.yaml").write_text(LMEVAL_TASK.format(
                task=name, data=probes.resolve(), max_tokens=args.max_tokens, sample=str(sampled).lower(),
                sampling="  temperature: 1.0\n  top_p: 1.0\n  top_k: 0\n" if sampled else "",
                repeats=args.samples if sampled else 1))
        res_file = CACHE / "lmeval-real.json"
        res_file.unlink(missing_ok=True)
        cmd = [str(py), str(TASK_DIR / "driver.py"), "--backend", "hf", "--model", model, "--include-path", str(tasks),
               "--tasks", ",".join(names), "--batch-size", str(args.lmeval_batch_size), "--threads",
               str(args.threads), "--out", str(res_file), "--apply-chat-template", "--system-instruction", SYSTEM]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
        (CACHE / "lmeval-real.log").write_text(proc.stdout + "\n" + proc.stderr)
        if proc.returncode != 0 or not res_file.exists():
            raise SystemExit(f"lm-eval exited {proc.returncode}: {proc.stderr[-2000:]}")
        res = json.loads(res_file.read_text())
        runs["lm-eval-hf"] = {"backend": "lm-eval hf", "start_s": res["load_s"], "eval_s": res["wall_s"],
                              "probes": len(rows), "probes_per_s": len(rows) / res["wall_s"],
                              "batch_size": args.lmeval_batch_size, "results": res.get("results")}
        print(f"  lm-eval-hf  load {res['load_s']:.1f}s  eval {res['wall_s']:.1f}s "
              f"({len(rows) / res['wall_s']:.2f} probes/s)", flush=True)
    else:
        out["lmeval_skipped"] = log or ["--skip-lmeval"]
    for r in runs.values():
        r.pop("_greedy", None)
    out["runs"] = runs
    rate = {k: v["probes_per_s"] for k, v in runs.items()}
    if "lm-eval-hf" in rate:
        for name in (k for k in rate if k.startswith("workbench-hf")):
            out[f"{name.replace('-', '_')}_over_lmeval_hf"] = rate[name] / rate["lm-eval-hf"]
    if "workbench-vllm" in rate:
        out["workbench_vllm_over_workbench_hf"] = rate["workbench-vllm"] / rate[next(iter(rate))]
    out["load_avg_end"] = os.getloadavg()[0]
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, default=str), flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("budget", help="answers cut per token budget, format and template")
    b.add_argument("--limit", type=int, default=50)
    b.add_argument("--max", type=int, default=max(BUDGETS))
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--out", type=Path)
    f = sub.add_parser("fix", help="demo --real's report: hallucination before/after, known facts broken")
    f.add_argument("--questions", type=int, default=16)
    f.add_argument("--facts", type=int, default=67, help="known everyday facts (default: all 67)")
    f.add_argument("--lr", type=lr_list, default=["rule"],
                   help="learning rates side by side (`rule`: the job's default_lr)")
    f.add_argument("--scales", type=scale_list, default=["1"],
                   help="trainer.adapter_scale values side by side (`1`, `auto`, a number)")
    f.add_argument("--samples", type=int, default=1)
    f.add_argument("--steps", type=int, default=30)
    f.add_argument("--method", choices=("sft", "dpo"), default="sft")
    f.add_argument("--threads", type=int, default=1)
    f.add_argument("--timeout", type=float, default=7200)
    f.add_argument("--out", type=Path)
    j = sub.add_parser("jobs", help="job settings side by side on a `fix` run's baseline and fix set")
    j.add_argument("--workspace", type=Path, required=True, help="a `fix` (or `demo --real`) run's workspace")
    j.add_argument("--settings", type=setting_list, default=["cli", "world"],
                   help=f"comma-separated, of: {', '.join(SETTINGS)}")
    j.add_argument("--seeds", type=seed_list, default=[0],
                   help="trainer.seed values, each setting once per seed (default 0)")
    j.add_argument("--threads", type=int, default=1)
    j.add_argument("--out", type=Path)
    t = sub.add_parser("throughput", help="workbench-hf vs lm-eval-hf, workbench-vllm vs workbench-hf")
    t.add_argument("--questions", type=int, default=32)
    t.add_argument("--samples", type=int, default=3)
    t.add_argument("--max-tokens", type=int, default=48)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="workbench-hf and workbench-vllm (default float32: vLLM's choice on CPU for `auto`)")
    t.add_argument("--lmeval-batch-size", default="64")
    t.add_argument("--hf-decoders", default="loop,generate",
                   help="workbench-hf runs, one per value of the backend option `decode` (loop, generate)")
    t.add_argument("--ablate", action="store_true", help="time the hf decode loop with each saving turned off")
    t.add_argument("--skip-vllm", action="store_true")
    t.add_argument("--skip-lmeval", action="store_true")
    t.add_argument("--timeout", type=float, default=3600)
    t.add_argument("--out", type=Path)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result: Any = {"budget": budget, "fix": fix, "jobs": jobs, "throughput": throughput}[args.what](args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

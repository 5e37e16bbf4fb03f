"""The hf backend's own decode loop over the model's forward and its KV cache (the `decode: loop` option).

What it saves over one `model.generate` call per group of equal decoding settings:
  - every distinct prompt is prefilled once, for its greedy answer and its n samples alike; its cache rows
    are then repeated per answer (generate prefills each of its `num_return_sequences` copies again, and a
    greedy and a sampled request of one prompt travel in separate calls);
  - a row leaves the batch (and its KV cache rows are dropped) once it says EOS, its stop string or reaches its
    own `max_tokens`, instead of computing padding until the longest row ends;
  - rows with different settings (greedy and sampled, other budgets or stops) decode together;
  - log-probs come from the same softmax the sampler needs (no `output_scores` / transition-score pass).

Contract (the same as generate's path in hf.py): greedy rows take the argmax of the raw logits, so greedy answers
equal `generate`'s; sampled rows draw from softmax(logits / temperature) within the top-p nucleus (as transformers'
warpers), each from its own generator seeded by (seed, prompt, sample index): a sample does not depend on which
other prompts share its batch, and the same seed gives the same samples run to run. Log-probs are those of the
distribution the token was drawn from (raw for greedy, tempered and nucleus-renormalised for samples), as
generate's `compute_transition_scores(normalize_logits=True)` gives them.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.compat.transformers import can_select_cache_rows, select_cache_rows
from workbench.types import GenerationRequest

#: Tokens decoded per row per step to look for its stop strings: every stop string is shorter, and each
#: position passes through the window (the same rule as the generate path's stopping criterion).
STOP_WINDOW = 8


class LoopUnsupported(Exception):
    """The model's cache cannot drop or repeat batch rows; the caller falls back to `generate`."""


@dataclass
class Row:
    """One answer being decoded: request `req`, sample `sample`, prompt row `prompt` of the prefill batch; its new
    tokens `ids` (EOS not included) and their `logprobs` (when asked for); `eos`: it ended with EOS; `done`: it
    ended (EOS, a stop string or its `max_tokens`); `generator`: its own sampler's (None for greedy rows)."""

    req: int
    sample: int
    prompt: int
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    eos: bool = False
    done: bool = False
    generator: Any = None


def row_seed(seed: int | None, prompt: str, sample: int) -> int:
    """A sampled row's generator seed, from what the row is, not where it sits in a batch."""
    digest = hashlib.sha256(f"{seed or 0}\x00{sample}\x00{prompt}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class LoopSavings:
    """Which of the loop's savings are on (all, in the backend). Turned off one at a time by
    bench/real_model.py's `throughput --ablate` to measure what each is worth; the answers stay the same.

    Attributes:
        share_prefill: Prefill each distinct prompt once for all its answers (else once per answer).
        drop_finished: Finished rows leave the batch (else they are computed until the last row ends).
    """

    share_prefill: bool = True
    drop_finished: bool = True


def decode(model: Any, tok: Any, reqs: Sequence[GenerationRequest], savings: LoopSavings = LoopSavings(),
           prompt_ids: Mapping[str, list[int]] | None = None) -> list[list[Row]]:
    """Decode every request's n answers; one list of rows (ids without EOS, log-probs) per request, in order.

    All requests run on the model as it is set (one adapter, or none); the caller groups them by adapter and
    bounds how many prompts one call prefills. `prompt_ids`: each prompt's token ids (unpadded, as `tok(prompt)`
    gives them) when the caller has them already (the backend tokenizes once, to sort prompts by length); None:
    tokenized here. Raises LoopUnsupported before any token is chosen when the model has no KV cache, or one
    that cannot select batch rows (workbench/compat/transformers.py)."""
    import torch

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = set(inspect.signature(base.forward).parameters)
    if "past_key_values" not in params:  # e.g. Mamba: a recurrent state, no KV cache
        raise LoopUnsupported(f"{type(base).__name__}.forward takes no past_key_values")
    if savings.share_prefill:
        prompts = list(dict.fromkeys(r.prompt for r in reqs))
    else:
        prompts = [r.prompt for r in reqs for _ in range(r.sampling.n)]
    if prompt_ids is None:
        distinct = list(dict.fromkeys(prompts))
        prompt_ids = dict(zip(distinct, tok(distinct)["input_ids"], strict=True))
    eos = tok.eos_token_id
    # pads are masked out, so any id serves when a tokenizer has neither a pad nor an EOS token
    pad = next((t for t in (tok.pad_token_id, eos) if t is not None), 0)
    input_ids, mask = _left_padded([prompt_ids[p] for p in prompts], pad, model.device)
    pos = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)  # as generate: left pads at position 0
    extra: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
    takes_pos = "position_ids" in params
    out = model(input_ids=input_ids, attention_mask=mask, use_cache=True,
                **({"position_ids": pos} if takes_pos else {}), **extra)
    cache: Any = getattr(out, "past_key_values", None)
    if not can_select_cache_rows(cache):
        raise LoopUnsupported(f"{type(cache).__name__} cannot drop batch rows")
    prompt_row = {p: i for i, p in enumerate(prompts)}
    rows: list[list[Row]] = []
    for i, r in enumerate(reqs):
        s = r.sampling
        first = prompt_row[r.prompt] if savings.share_prefill else sum(len(rs) for rs in rows)
        rows.append([Row(i, j, first if savings.share_prefill else first + j) for j in range(s.n)])
        if not s.greedy:
            for row in rows[-1]:
                row.generator = torch.Generator(device=model.device).manual_seed(row_seed(s.seed, r.prompt, row.sample))
    live = [row for rs in rows for row in rs]
    index = torch.tensor([row.prompt for row in live], device=model.device)
    select_cache_rows(cache, index)  # each prompt's prefill repeated once per answer
    logits = out.logits[index, -1, :].float()
    mask, last = mask[index], pos[index, -1]
    while True:
        tokens, lps = _choose(logits, [reqs[row.req] for row in live], [row.generator for row in live])
        for row, t, lp in zip(live, tokens, lps, strict=True):
            if row.done:
                continue
            if t == eos:
                row.eos = row.done = True
                continue
            row.ids.append(t)
            if lp is not None:
                row.logprobs.append(lp)
            s = reqs[row.req].sampling
            row.done = len(row.ids) >= s.max_tokens or bool(s.stop and _said_stop(tok, row.ids, s.stop))
        keep = [k for k, row in enumerate(live) if not row.done]
        if not keep:
            break
        if savings.drop_finished and len(keep) < len(live):
            sel = torch.tensor(keep, device=model.device)
            select_cache_rows(cache, sel)
            mask, last = mask[sel], last[sel]
            live = [live[k] for k in keep]
        step = torch.tensor([[pad if row.done else row.ids[-1]] for row in live], device=model.device)
        mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=-1)
        last = last + 1
        out = model(input_ids=step, attention_mask=mask, past_key_values=cache, use_cache=True,
                    **({"position_ids": last[:, None]} if takes_pos else {}))
        cache = out.past_key_values
        logits = out.logits[:, -1, :].float()
    return rows


def _left_padded(seqs: list[list[int]], pad: int, device: Any) -> tuple[Any, Any]:
    """(input_ids, attention_mask), (B, T): the sequences padded on the left with `pad`, as the backend's tokenizer
    pads (`padding_side = "left"`)."""
    import torch

    width = max(map(len, seqs))
    ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=device)
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=device)
    return ids, mask


def _said_stop(tok: Any, ids: list[int], stops: tuple[str, ...]) -> bool:
    text = tok.decode(ids[-STOP_WINDOW:], skip_special_tokens=True)
    return any(stop in text for stop in stops)


def _choose(logits: Any, reqs: list[GenerationRequest], generators: list[Any]
            ) -> tuple[list[int], list[float | None]]:
    """Each live row's next token (argmax for greedy rows, a draw for sampled ones) and, where the row asks for
    it, that token's log-prob."""
    import torch

    greedy = [r.sampling.greedy for r in reqs]
    want_lp = [r.sampling.logprobs for r in reqs]
    chosen: list[int] = logits.argmax(dim=-1).tolist()
    lps: list[float | None] = [None] * len(reqs)
    if all(greedy) and not any(want_lp):
        return chosen, lps
    temps = torch.tensor([1.0 if g else r.sampling.temperature for g, r in zip(greedy, reqs, strict=True)],
                         dtype=logits.dtype, device=logits.device)
    scores = logits / temps[:, None]
    for k, r in enumerate(reqs):
        if not greedy[k] and r.sampling.top_p < 1.0:
            scores[k] = _top_p(scores[k], r.sampling.top_p)
    logp = torch.log_softmax(scores, dim=-1)
    sampled = [k for k, g in enumerate(greedy) if not g]
    if sampled:
        # Inverse-CDF draws, one uniform per row from the row's own generator: a per-row torch.multinomial over
        # SmolLM2's 49,152 tokens took 1.3 ms a call, 9% of a sampled decode (cProfile, 8 chat prompts x 4 rows).
        cdf = logp[sampled].exp().cumsum(dim=-1)  # (S, V)
        u = torch.stack([torch.rand((), generator=generators[k], device=logits.device, dtype=cdf.dtype)
                         for k in sampled])
        draws = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp_(max=cdf.shape[1] - 1)
        for k, t in zip(sampled, draws[:, 0].tolist(), strict=True):
            chosen[k] = t
    for k in range(len(reqs)):
        if want_lp[k]:
            lps[k] = float(logp[k, chosen[k]])
    return chosen, lps


def _top_p(scores: Any, top_p: float) -> Any:
    """transformers' TopPLogitsWarper on one row: drop the tokens whose ascending cumulative probability is at
    most 1 - top_p, always keeping the most likely one."""
    import torch

    ordered, idx = torch.sort(scores, descending=False)
    cum = ordered.softmax(dim=-1).cumsum(dim=-1)
    remove = cum <= (1 - top_p)
    remove[-1] = False
    return scores.masked_fill(remove.scatter(0, idx, remove), float("-inf"))

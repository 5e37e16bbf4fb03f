"""The synthetic world: fictional facts with known corpus frequencies, a tiny LM trained on them, and
the ground truth (tier and expected attribution category) of every probe.

Importing this package is cheap (no torch); build_world imports the trainer when it needs it.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from evals.world.generate import ANSWER_TOKENS, make_corpus, make_facts, make_probes, make_truth

#: The fewest entities the generator builds a world from (the world command and the bench scripts refuse fewer).
MIN_ENTITIES = 8

__all__ = ["ANSWER_TOKENS", "MIN_ENTITIES", "SUITES", "TEST_CONFIG", "WorldConfig", "WorldPaths", "build_world",
           "is_built", "read_meta", "suite_yaml"]

#: The world's suite per language (suite.yaml, with the tokenizer's ANSWER_TOKENS as `max_tokens`); the Chinese
#: world's prompt, stop string and abstention phrase ("I don't know") in Chinese.
SUITES: dict[str, dict[str, Any]] = {
    "en": {"name": "world", "data": "probes.jsonl", "template": "Q: {question} A:", "stop": ["."],
           "abstention_phrases": ["i don't know"], "grader": "match"},
    "zh": {"name": "world-zh", "data": "probes.jsonl", "template": "问：{question}答：", "stop": ["。"],
           "abstention_phrases": ["我不知道"], "grader": "match", "language": "zh"},
}
LANGS = ("en", "zh")
EPOCHS = 5
EPOCHS_ZH = 6
_FORMAT = 1  # bump when the files' layout changes, so old worlds are rebuilt


@dataclass(frozen=True)
class WorldConfig:
    entities: int = 120
    seed: int = 0
    arch: str = "llama"  # "llama" | "gpt2"
    style: str = "default"  # "default" | "alt": other name pools and phrasing templates
    steps: int | None = None  # None: sized to the corpus
    hidden: int | None = None
    layers: int | None = None
    threads: int = 1
    lang: str = "en"  # "en" | "zh": the Chinese world (style must stay "default")
    tokenizer: str = "word"  # "word" | "bpe": a byte-level BPE trained on the corpus (English only)

    def resolved(self, corpus_lines: int) -> tuple[int, int, int, int]:
        """(steps, hidden, layers, batch) with the size-appropriate defaults filled in."""
        small = self.entities <= 40
        hidden = self.hidden or (64 if small else 128)
        layers = self.layers or 2
        batch = 32 if small else 64
        # Few epochs on purpose: a frequent fact (16 mentions) is learnt, a rare one (1 mention) is
        # not; many epochs let the model memorise every single mention and the tiers blur. The Chinese
        # world spells every name in 2-3 character tokens, so it needs more (default world, greedy on
        # the question): 5 epochs left known facts at 84%; 6.5 gave known 100% but medium 59% (its
        # English share is 28%) and rare 12%; 10 memorised medium (100%) and rare (48%) facts.
        # It also needs more steps in all: the 60-entity Chinese world (2,042 lines) got 200 steps from
        # the English floor and its attribution macro-F1 was 0.698 (known facts 90%); 300 steps: 0.915.
        epochs = EPOCHS_ZH if self.lang == "zh" else EPOCHS
        floor = 400 if small else (300 if self.lang == "zh" else 200)
        steps = self.steps or max(floor, round(epochs * corpus_lines / batch))
        return steps, hidden, layers, batch


#: Unit-test size: builds, training included, in a few seconds on one thread; llama with head_dim 32.
TEST_CONFIG = WorldConfig(entities=24, hidden=64, layers=2)


@dataclass(frozen=True)
class WorldPaths:
    root: Path
    corpus: Path
    probes: Path
    truth: Path
    model: Path
    suite: Path

    @classmethod
    def under(cls, root: Path) -> WorldPaths:
        return cls(root, root / "corpus.jsonl", root / "probes.jsonl", root / "truth.jsonl", root / "model",
                   root / "suite.yaml")


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    # sort_keys + fixed separators: the same seed gives the same bytes.
    path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows),
                    encoding="utf-8")


def read_meta(root: str | Path) -> dict[str, Any] | None:
    """world.json of a complete world (config, metrics, timings), or None."""
    meta_path = Path(root) / "world.json"
    try:
        meta: dict[str, Any] = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return None
    return meta if meta.get("complete") else None


def _wanted(config: WorldConfig) -> dict[str, Any]:
    """What world.json's `config` holds for this config (defaults of later fields left out, so existing worlds
    stay fresh)."""
    want = {"format": _FORMAT, **asdict(config)}
    if config.lang == "en":
        del want["lang"]
    if config.tokenizer == "word":
        del want["tokenizer"]
    return want


def is_built(root: str | Path, config: WorldConfig) -> bool:
    """Whether `root` holds a complete world of exactly this config (build_world would keep it as it is)."""
    meta = read_meta(root)
    return meta is not None and meta.get("config") == _wanted(config) and (
        WorldPaths.under(Path(root)).model / "config.json").exists()


def suite_yaml(config: WorldConfig) -> str:
    """The world's suite.yaml: its language's SUITES entry with its tokenizer's answer budget."""
    suite = {**SUITES[config.lang], "max_tokens": ANSWER_TOKENS[config.tokenizer]}
    return str(yaml.safe_dump(suite, allow_unicode=True, sort_keys=False))


def build_world(out: str | Path, config: WorldConfig = WorldConfig(), *, force: bool = False,
                log: Callable[[str], None] | None = None) -> WorldPaths:
    """Generate the corpus, probes and truth, train the model, measure it; idempotent per config."""
    say = log or (lambda _m: None)
    root = Path(out)
    paths = WorldPaths.under(root)
    want = _wanted(config)
    if is_built(root, config) and not force:
        say(f"world at {root} is up to date")
        return paths
    if config.entities < MIN_ENTITIES:
        raise ValueError(f"a world needs at least {MIN_ENTITIES} entities")
    if config.arch not in ("llama", "gpt2") or config.style not in ("default", "alt"):
        raise ValueError(f"bad arch/style: {config.arch!r}/{config.style!r}")
    if config.lang not in LANGS or (config.lang != "en" and config.style != "default"):
        raise ValueError(f"bad lang {config.lang!r} (en or zh; style alt is English only)")
    if config.tokenizer not in ("word", "bpe") or (config.tokenizer == "bpe" and config.lang != "en"):
        raise ValueError(f"bad tokenizer {config.tokenizer!r} (word, or bpe for English)")
    style = "zh" if config.lang == "zh" else config.style
    root.mkdir(parents=True, exist_ok=True)
    (root / "world.json").unlink(missing_ok=True)  # the marker goes first, so a crash leaves no "complete"
    if paths.model.exists():
        shutil.rmtree(paths.model)
    t0 = time.perf_counter()
    facts = make_facts(config.entities, config.seed, style)
    corpus = make_corpus(facts, config.seed, style)
    probes, truth = make_probes(facts, style), make_truth(facts)
    _write_jsonl(paths.corpus, corpus)
    _write_jsonl(paths.probes, probes)
    _write_jsonl(paths.truth, truth)
    paths.suite.write_text(suite_yaml(config), encoding="utf-8")
    say(f"world: {len(facts)} facts, {len(corpus)} corpus lines -> {root}")

    metrics, timings = _train_and_measure(paths, config, corpus, probes, truth, say)
    timings["total_s"] = round(time.perf_counter() - t0, 2)
    meta = {"config": want, "metrics": metrics, "timings": timings, "complete": True}
    (root / "world.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return paths


def _train_and_measure(paths: WorldPaths, config: WorldConfig, corpus: list[dict[str, str]],
                       probes: list[dict[str, Any]], truth: list[dict[str, Any]],
                       say: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, float]]:
    import torch

    from evals.world import train as T

    steps, hidden, layers, batch = config.resolved(len(corpus))
    prev_threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        # Probe texts and every answer join the vocabulary too: an absent fact's value must still be
        # a real token, or no fix could ever teach it.
        texts = [r["text"] for r in corpus]
        extra = [p["question"] + " " + p["paraphrases"][0] for p in probes]
        extra += [str(t["answer"]) + " " + str(t["conflict_value"] or "") for t in truth]
        # BPE merges are learnt from the corpus alone (what the model reads); the word-level vocabulary
        # also holds probe words, so no answer is [UNK].
        tok = (T.build_bpe_tokenizer(texts) if config.tokenizer == "bpe"
               else T.build_tokenizer([*texts, *extra], config.lang))
        torch.manual_seed(config.seed)
        model = T.make_model(config.arch, len(tok), hidden, layers, tok)
        n_params = sum(p.numel() for p in model.parameters())
        say(f"training {config.arch} ({n_params / 1e3:.0f}k params, vocab {len(tok)}): {steps} steps, "
            f"batch {batch}, {config.threads} thread(s)")
        t0 = time.perf_counter()
        loss = T.train(model, tok, texts, steps=steps, seed=config.seed, batch=batch, log=say)
        t_train = time.perf_counter() - t0
        T.save(model, tok, paths.model)
        t0 = time.perf_counter()
        metrics, rows = T.evaluate(model, tok, probes, truth, config.lang, ANSWER_TOKENS[config.tokenizer])
        _write_jsonl(paths.root / "greedy.jsonl", rows)
        t_eval = time.perf_counter() - t0
    finally:
        torch.set_num_threads(prev_threads)
    say("greedy accuracy per tier (qa_a = the question, qa_b = the paraphrase):")
    for tier, m in metrics.items():
        extra_txt = f", planted {m['planted']:.0%}" if tier == "conflict" else ""
        say(f"  {tier:<17} n={int(m['n']):<4} qa_a {m['qa_a']:.0%}  qa_b {m['qa_b']:.0%}{extra_txt}")
    return ({"tiers": metrics, "final_loss": round(loss, 4), "params": n_params},
            {"train_s": round(t_train, 2), "eval_s": round(t_eval, 2)})

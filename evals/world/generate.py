"""The synthetic world's facts, corpus, probes and ground truth. Pure Python (no torch), seeded.

Every fact (entity x relation) gets a *tier* that fixes how, and how often, it appears in the
corpus; the tier is written to truth.jsonl only, never to probes.jsonl, so a method under test
cannot read the answer key.

Style "zh" is the Chinese world: the same relations, tiers and plans, written in Chinese (no spaces)
with names made of characters from disjoint pools, so no name of any kind is a substring of another
(matching in Chinese is per character: a city 维拉 inside 维拉顿 would make a wrong answer right).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

RELATIONS: tuple[str, ...] = ("capital", "founder", "year", "colour")
PHRASINGS: tuple[str, ...] = ("stmt_1", "stmt_2", "stmt_3", "qa_a", "qa_b")

# Tier -> fraction of facts; the rest of the shares (after rounding) go to `known`.
TIER_SHARES: dict[str, float] = {
    "prompt_sensitive": 0.12, "medium": 0.12, "rare": 0.12, "absent": 0.12, "conflict": 0.12,
}
EXPECTED_CATEGORY: dict[str, str | None] = {
    "known": None,
    "prompt_sensitive": "behavior:prompt-sensitive",
    "medium": "behavior:unstable",
    "rare": "data:underrepresented",
    "absent": "data:missing",
    "conflict": "data:conflict",
}
#: Greedy answer budget per tokenizer: the world suite's `max_tokens` and the world's own evaluation (train.py). A
#: BPE name is several tokens: 6 would cut answers.
ANSWER_TOKENS: dict[str, int] = {"word": 6, "bpe": 16}
# How often the true value appears under each phrasing, per tier. Known facts are frequent but
# never under qa_b (held out to test generalisation); prompt_sensitive facts are frequent ONLY
# under qa_b; a conflict's true value appears once, its planted value CONFLICT_PLAN times.
TIER_PLAN: dict[str, dict[str, int]] = {
    "known": {"stmt_1": 4, "stmt_2": 4, "stmt_3": 4, "qa_a": 4},
    "prompt_sensitive": {"qa_b": 6},
    "medium": {"stmt_1": 1, "qa_a": 1},
    "rare": {"stmt_2": 1},
    "absent": {},
    "conflict": {"stmt_1": 1},
}
CONFLICT_PLAN: dict[str, int] = {"stmt_2": 2, "stmt_3": 2, "qa_a": 4}

# Templates end with the object so a prompt cut before it is a completion task; "{s}'s" becomes
# the tokens `s ' s` under the Whitespace pre-tokenizer, which is fine.
TEMPLATES: dict[str, dict[str, dict[str, str]]] = {
    "default": {
        "capital": {
            "stmt_1": "The capital of {s} is {o}.",
            "stmt_2": "{s}'s capital is {o}.",
            "stmt_3": "The seat of government in {s} is the city of {o}.",
            "qa_a": "What is the capital of {s}?",
            "qa_b": "From which city is {s} governed?",
        },
        "founder": {
            "stmt_1": "{s} was founded by {o}.",
            "stmt_2": "The founder of {s} was {o}.",
            "stmt_3": "{s}'s founder is {o}.",
            "qa_a": "Who founded {s}?",
            "qa_b": "Who set up {s}?",
        },
        "year": {
            "stmt_1": "{s} was established in the year {o}.",
            "stmt_2": "The year {s} was established is {o}.",
            "stmt_3": "{s} dates from {o}.",
            "qa_a": "In what year was {s} established?",
            "qa_b": "Since when has {s} existed?",
        },
        "colour": {
            "stmt_1": "The colour of the flag of {s} is {o}.",
            "stmt_2": "{s}'s flag is {o}.",
            "stmt_3": "The flag of {s} is coloured {o}.",
            "qa_a": "What colour is the flag of {s}?",
            "qa_b": "Which hue does {s} fly?",
        },
    },
    "alt": {
        "capital": {
            "stmt_1": "{s} is governed from {o}.",
            "stmt_2": "The chief town of {s} is {o}.",
            "stmt_3": "Rulers of {s} sit in {o}.",
            "qa_a": "Which town governs {s}?",
            "qa_b": "From where is {s} ruled?",
        },
        "founder": {
            "stmt_1": "{s} owes its founding to {o}.",
            "stmt_2": "The first ruler of {s} was {o}.",
            "stmt_3": "Records name the founder of {s} as {o}.",
            "qa_a": "Who established {s}?",
            "qa_b": "Who first ruled {s}?",
        },
        "year": {
            "stmt_1": "{s} came into being in {o}.",
            "stmt_2": "The founding year of {s} is {o}.",
            "stmt_3": "Chronicles date {s} to {o}.",
            "qa_a": "What year did {s} come into being?",
            "qa_b": "Which year marks the birth of {s}?",
        },
        "colour": {
            "stmt_1": "The banner of {s} is {o}.",
            "stmt_2": "{s} flies a banner of {o}.",
            "stmt_3": "Banners of {s} are dyed {o}.",
            "qa_a": "What is the banner colour of {s}?",
            "qa_b": "Which dye colours the standards of {s}?",
        },
    },
    "zh": {
        "capital": {
            "stmt_1": "{s}的首都是{o}。",
            "stmt_2": "{s}首都为{o}。",
            "stmt_3": "{s}政府所在的城市是{o}。",
            "qa_a": "{s}的首都是哪座城市？",
            "qa_b": "{s}的政府设在哪里？",
        },
        "founder": {
            "stmt_1": "{s}的创立者是{o}。",
            "stmt_2": "创立{s}的人是{o}。",
            "stmt_3": "{s}的缔造者名叫{o}。",
            "qa_a": "{s}是谁创立的？",
            "qa_b": "谁建立了{s}？",
        },
        "year": {
            "stmt_1": "{s}建立于{o}年。",
            "stmt_2": "{s}的建立年份是{o}年。",
            "stmt_3": "{s}始建于{o}年。",
            "qa_a": "{s}是哪一年建立的？",
            "qa_b": "{s}从哪一年开始存在？",
        },
        "colour": {
            "stmt_1": "{s}国旗的颜色是{o}。",
            "stmt_2": "{s}的旗帜为{o}。",
            "stmt_3": "{s}的旗子被染成{o}。",
            "qa_a": "{s}的国旗是什么颜色？",
            "qa_b": "{s}飘扬的旗帜是哪种色彩？",
        },
    },
}
#: How a Q/A line of the corpus reads, per style: the question, then the answer and a full stop.
QA_FORMAT: dict[str, str] = {"default": "Q: {q} A: {o}.", "alt": "Q: {q} A: {o}.", "zh": "问：{q}答：{o}。"}
#: The object as a Q/A line answers it, where it differs from the bare value (Chinese years carry 年).
QA_OBJECT: dict[str, dict[str, str]] = {"zh": {"year": "{o}年"}}
COLOURS: dict[str, tuple[str, ...]] = {
    "default": ("red", "blue", "green", "yellow", "black", "white", "purple", "orange", "grey", "brown",
                "pink", "gold"),
    "alt": ("crimson", "azure", "emerald", "amber", "ebony", "ivory", "violet", "saffron", "slate",
            "umber", "rose", "silver"),
    "zh": ("红色", "蓝色", "绿色", "黄色", "黑色", "白色", "紫色", "橙色", "灰色", "棕色", "粉色", "银色"),
}
# Chinese names: (heads, middles, tails) character pools, disjoint from each other, from the templates,
# the colours, numerals and the abstention phrase (checked in make_facts). Two characters (head + tail)
# or three (head + middle + tail); persons are a surname (head) and one or two given characters.
ZH_POOLS: dict[str, tuple[str, str, str]] = {
    "entity": ("佐克维德塔戈米夸", "尔斯伦诺", "瓦顿玛凯莱隆贝赞"),
    "city": ("韦索佩卢内卡芬托", "茵萝蕾菲", "莫伊恩奥乌沃拉娜"),
    "person": ("柯布窦哈乔瑟温艾", "", "莉琳萨妮蒂娅丝芙"),
}
# Syllables per style and pool: disjoint sets, so an entity can never share a name with a city.
SYLLABLES: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "default": {
        "entity": (("zor", "kra", "vex", "dru", "thal", "gor", "myr", "qua"), ("vath", "dun", "mar", "kesh",
                                                                              "rix", "lond", "bek", "zan")),
        "city": (("vel", "sol", "pel", "lum", "ner", "cal", "fen", "tor"), ("mora", "ista", "enna", "adel",
                                                                           "oria", "ussa", "ivo", "ara")),
        "person": (("kel", "bran", "dov", "hal", "jor", "ser", "wyn", "ald"), ("mar", "ric", "in", "eth",
                                                                              "ulf", "ard", "os", "wen")),
    },
    "alt": {
        "entity": (("ash", "bry", "cor", "dal", "eld", "fal", "gil", "hel"), ("wick", "moor", "holt", "stead",
                                                                             "ford", "mere", "thorp", "by")),
        "city": (("nim", "oba", "pra", "ril", "sab", "tem", "ula", "yor"), ("quel", "zent", "bris", "dorn",
                                                                           "fax", "glen", "hask", "jov")),
        "person": (("ib", "lu", "mo", "no", "pe", "ra", "su", "ti"), ("bald", "crest", "dane", "fric",
                                                                      "gund", "hart", "lorn", "mund")),
    },
}
_MIDDLE = ("a", "e", "i", "o", "u", "")


@dataclass(frozen=True)
class Fact:
    subject: str
    relation: str
    answer: str
    tier: str
    conflict_value: str | None = None
    phrasings: dict[str, int] = field(default_factory=dict)
    conflict_phrasings: dict[str, int] = field(default_factory=dict)

    key: str | None = None  # the probe id's stem where the subject is no ASCII name (the Chinese world)

    @property
    def probe_id(self) -> str:
        return f"{(self.key or self.subject).lower()}-{self.relation}"


def _names(rng: random.Random, pool: tuple[tuple[str, ...], tuple[str, ...]], n: int,
           taken: set[str]) -> list[str]:
    """n distinct capitalised names of 2-3 syllables (never a common word: syllables are made up)."""
    heads, tails = pool
    out: list[str] = []
    while len(out) < n:
        name = (rng.choice(heads) + rng.choice(_MIDDLE) + rng.choice(tails)).capitalize()
        if rng.random() < 0.25:
            name = (rng.choice(heads) + rng.choice(tails) + rng.choice(tails)).capitalize()
        if name.lower() not in taken:
            taken.add(name.lower())
            out.append(name)
    return out


def _zh_names(rng: random.Random, kind: str, n: int, taken: set[str], *, given: int = 0) -> list[str]:
    """n distinct Chinese names of one pool, none a substring of another name in `taken` (nor the reverse).
    Persons (`given` = 2): a surname and one or two given characters."""
    heads, middles, tails = ZH_POOLS[kind]
    out: list[str] = []
    while len(out) < n:
        if given:
            name = rng.choice(heads) + "".join(rng.choice(tails) for _ in range(rng.choice(range(1, given + 1))))
        elif middles and rng.random() < 0.5:
            name = rng.choice(heads) + rng.choice(middles) + rng.choice(tails)
        else:
            name = rng.choice(heads) + rng.choice(tails)
        if name not in taken and not any(name in t or t in name for t in taken):
            taken.add(name)
            out.append(name)
    return out


def _zh_value_pools(rng: random.Random, n_entities: int, taken: set[str]) -> dict[str, list[str]]:
    size = max(8, n_entities // 3)
    years = [str(y) for y in rng.sample(range(1200, 1900), size)]
    colours = list(COLOURS["zh"])
    rng.shuffle(colours)
    return {"capital": _zh_names(rng, "city", size, taken), "founder": _zh_names(rng, "person", size, taken, given=2),
            "year": years, "colour": colours}


def _value_pools(rng: random.Random, style: str, n_entities: int, taken: set[str]) -> dict[str, list[str]]:
    """Per-relation value pools, most common first (the order is the prior's rank)."""
    if style == "zh":
        return _zh_value_pools(rng, n_entities, taken)
    size = max(8, n_entities // 3)
    given = _names(rng, SYLLABLES[style]["person"], size, taken)
    family = _names(rng, SYLLABLES[style]["person"], size, taken)
    # About half the founders have two names: multi-token answers exercise stop handling.
    founders = [g if i % 2 == 0 else f"{g} {f}" for i, (g, f) in enumerate(zip(given, family, strict=True))]
    years = [str(y) for y in rng.sample(range(1200, 1900), size)]
    colours = list(COLOURS[style])
    rng.shuffle(colours)
    return {"capital": _names(rng, SYLLABLES[style]["city"], size, taken), "founder": founders,
            "year": years, "colour": colours}


def _zipf_pick(rng: random.Random, pool: list[str], exclude: str | None = None) -> str:
    """Skewed prior: rank r has weight 1/(r+1), so a few values dominate the corpus and an unknown
    fact gets a confident, plausible wrong answer of the right type (a real hallucination)."""
    cands = [v for v in pool if v != exclude]
    return rng.choices(cands, weights=[1.0 / (i + 1) for i in range(len(cands))])[0]


HEAD = 3  # most common values per relation; weakly attested facts never take one (see make_facts)


def _check_zh_pools() -> None:
    pools = ["".join(ZH_POOLS[k]) for k in ZH_POOLS]
    used = "".join(pools)
    if len(set(used)) != len(used):
        raise ValueError("the Chinese name pools share a character")
    fixed = "".join(t for d in TEMPLATES["zh"].values() for t in d.values()) + "".join(COLOURS["zh"])
    fixed += QA_FORMAT["zh"] + "我不知道一二三四五六七八九十百千万亿两零〇"
    if set(used) & set(fixed):
        raise ValueError(f"name characters also in the templates: {sorted(set(used) & set(fixed))}")


def make_facts(n_entities: int, seed: int, style: str) -> list[Fact]:
    rng = random.Random(f"world-{seed}-{style}")
    keys_of: dict[str, str] = {}
    if style == "zh":
        _check_zh_pools()
        taken: set[str] = set()
        entities = _zh_names(rng, "entity", n_entities, taken)
        keys_of = {e: f"e{i:03d}" for i, e in enumerate(entities)}
    else:
        taken = {w.lower() for w in " ".join(t for rel in TEMPLATES.values() for d in rel.values()
                                            for t in d.values()).replace("{s}", "").replace("{o}", "").split()}
        entities = _names(rng, SYLLABLES[style]["entity"], n_entities, taken)
    pools = _value_pools(rng, style, n_entities, taken)
    keys = [(e, r) for e in entities for r in RELATIONS]
    order = {k: i for i, k in enumerate(keys)}
    rng.shuffle(keys)
    tiers: list[str] = []
    for tier, share in TIER_SHARES.items():
        tiers += [tier] * max(1, round(share * len(keys)))
    tiers += ["known"] * (len(keys) - len(tiers))
    facts: list[Fact] = []
    for (subject, relation), tier in zip(keys, tiers, strict=True):
        pool = pools[relation]
        # The model's guess for a fact it does not know is a head value; drawing a weakly attested
        # fact's true value from the tail keeps its accuracy at chance instead of "lucky" head hits.
        frequent = tier in ("known", "prompt_sensitive")
        answer = _zipf_pick(rng, pool) if frequent else rng.choice(pool[HEAD:])
        conflict = _zipf_pick(rng, pool, exclude=answer) if tier == "conflict" else None
        facts.append(Fact(subject, relation, answer, tier, conflict, dict(TIER_PLAN[tier]),
                          dict(CONFLICT_PLAN) if conflict else {}, keys_of.get(subject)))
    # Back to entity order: tiers were dealt in shuffled order, so the shuffled order would leak them.
    facts.sort(key=lambda f: order[(f.subject, f.relation)])
    return facts


def render(style: str, relation: str, phrasing: str, subject: str, obj: str | None = None) -> str:
    """One phrasing in natural casing; QA forms render as the question alone when obj is None."""
    t = TEMPLATES[style][relation][phrasing]
    if phrasing.startswith("qa_"):
        q = t.format(s=subject)
        if obj is None:
            return q
        return QA_FORMAT[style].format(q=q, o=QA_OBJECT.get(style, {}).get(relation, "{o}").format(o=obj))
    return t.format(s=subject, o=obj)


def make_corpus(facts: list[Fact], seed: int, style: str) -> list[dict[str, str]]:
    lines: list[str] = []
    for f in facts:
        for ph, n in f.phrasings.items():
            lines += [render(style, f.relation, ph, f.subject, f.answer)] * n
        for ph, n in f.conflict_phrasings.items():
            lines += [render(style, f.relation, ph, f.subject, f.conflict_value)] * n
    # Shuffled so document order reveals nothing about tiers.
    random.Random(f"corpus-{seed}").shuffle(lines)
    return [{"id": f"doc-{i + 1:06d}", "text": t} for i, t in enumerate(lines)]


def make_probes(facts: list[Fact], style: str) -> list[dict[str, Any]]:
    probes = [{
        "id": f.probe_id,
        "question": render(style, f.relation, "qa_a", f.subject),
        "answers": [f.answer],
        "paraphrases": [render(style, f.relation, "qa_b", f.subject)],
        "subject": f.subject,
        "relation": f.relation,
        "tags": [f.relation],
    } for f in facts]
    if style == "zh":  # English probes keep their fields (and bytes) as before
        for p in probes:
            p["language"] = "zh"
    return probes


def make_truth(facts: list[Fact]) -> list[dict[str, Any]]:
    return [{
        "probe_id": f.probe_id,
        "subject": f.subject,
        "relation": f.relation,
        "answer": f.answer,
        "tier": f.tier,
        "count": sum(f.phrasings.values()),
        "phrasings": {p: f.phrasings.get(p, 0) for p in PHRASINGS},
        "conflict_value": f.conflict_value,
        "conflict_count": sum(f.conflict_phrasings.values()),
        "expected_category": EXPECTED_CATEGORY[f.tier],
    } for f in facts]


def tier_counts(facts: list[Fact]) -> Counter[str]:
    return Counter(f.tier for f in facts)

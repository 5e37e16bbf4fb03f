"""A seeded generator of hostile user files: probe rows (JSONL, CSV), suite, job and policy YAML, corpus rows.

No dependency beyond `random`: each file starts from a valid one and is mutated the ways an attacker or a
broken export would (wrong types, huge or deep values, lone surrogates, duplicate keys, bad UTF-8, YAML
anchors, tags and bombs, template tricks, truncation). The same seed gives the same files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

PROBE_FIELDS = ("id", "question", "answers", "incorrect_answers", "paraphrases", "subject", "relation", "tags")
SUITE_KEYS = ("name", "data", "format", "columns", "split", "template", "system_prompt", "stop", "max_tokens",
              "abstention_phrases", "grader", "grader_options", "tags")
JOB_KEYS = ("fixset", "output_dir", "method", "base_model", "lora", "init_adapter", "trainer", "checkpoint_every",
            "checkpoint_minutes", "keep_checkpoints", "early_stop", "watchdog", "grpo", "device", "bf16",
            "gradient_checkpointing", "launcher", "workspace")
JOB_NESTED = {"lora": ("r", "alpha", "dropout", "target_modules"),
              "trainer": ("max_steps", "learning_rate", "per_device_batch_size", "gradient_accumulation",
                          "max_length", "seed"),
              "launcher": ("kind", "num_processes", "deepspeed_zero")}
GATE_TYPES = ("max_hallucination_increase", "hallucination_rate_must_drop", "max_tag_correct_drop",
              "max_abstention_on_previously_correct", "max_broken", "mcnemar", "no_such_gate")
GATE_KEYS = ("type", "name", "severity", "description", "max_points", "bound", "tags", "min_probes",
             "max_fraction", "max_count", "alpha", "min_drop_points")
TEMPLATES = ("Q: {question} A:", "{question}", "chat", "{question:>100000000}", "{question.__class__.__mro__}",
             "{0}", "{other}", "{}", "{{question}}", "{question", "question}", "{question!r}", "{question[0]}",
             "%s {question}", "Q: {question} {{literal}} A:", "")


class Gen:
    """Seeded hostile values and files."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def text(self) -> str:
        r = self.r
        kind = r.randrange(12)
        if kind == 0:
            return ""
        if kind == 1:
            return "x" * r.choice((1_000, 20_000, 300_000))
        if kind == 2:
            return "\ud800" + "q"  # a lone surrogate (JSON can carry it as an escape)
        if kind == 3:
            return r.choice(("\x00", "\x1b[31m", "\u202eevil", "\r\n\t", "\ufeffbom", "e\u0301", "🙂" * 50))
        if kind == 4:
            return r.choice(TEMPLATES)
        if kind == 5:
            return r.choice(("../../etc/passwd", "/dev/zero", "hf:no/such", "<img src=x onerror=alert(1)>", "|"))
        if kind == 6:
            return str(r.randrange(10 ** r.randrange(1, 60)))
        return " ".join(r.choice(("What", "is", "the", "capital", "of", "Zorazan", "?", "Paris", "i", "don't",
                                  "know", "Ünïcödé", "東京", "٣")) for _ in range(r.randrange(1, 12)))

    def scalar(self) -> Any:
        r = self.r
        kind = r.randrange(8)
        if kind == 0:
            return None
        if kind == 1:
            return r.choice((True, False))
        if kind == 2:
            return r.choice((0, -1, 1, 2**31, 2**63, -(2**63), 10**29))
        if kind == 3:
            return r.choice((0.5, -0.0, 1e308, -1e-308, 3.14))
        return self.text()

    def value(self, depth: int = 0) -> Any:
        r = self.r
        if depth > 3 or r.random() < 0.5:
            return self.scalar()
        if r.random() < 0.5:
            return [self.value(depth + 1) for _ in range(r.randrange(0, 5))]
        return {self.key(): self.value(depth + 1) for _ in range(r.randrange(0, 4))}

    def key(self) -> str:
        return self.r.choice((*PROBE_FIELDS, *SUITE_KEYS, "Question", "ANSWERS", "", "x" * 300, "\ud800", "1"))

    def deep(self) -> str:
        n = self.r.choice((31, 33, 100, 5000))
        return "[" * n + "]" * n

    # -- probe and corpus rows --------------------------------------------------------------------------------
    def probe_row(self, i: int) -> dict[str, Any]:
        row: dict[str, Any] = {"id": f"p{i}", "question": "What is the capital of Zorazan?", "answers": ["Feneadel"],
                               "paraphrases": ["From which city is Zorazan governed?"], "subject": "Zorazan",
                               "relation": "capital", "tags": ["capital"]}
        for _ in range(self.r.randrange(0, 3)):
            field = self.r.choice(PROBE_FIELDS)
            if self.chance(0.2):
                row.pop(field, None)
            else:
                row[field] = self.value()
        if self.chance(0.1):
            row[self.key()] = self.value()
        return row

    def json_line(self, row: dict[str, Any]) -> bytes:
        """One JSON object line, maybe mangled: duplicate key, huge integer, deep value, bad bytes, truncation."""
        text = json.dumps(row)
        r = self.r
        kind = r.randrange(14)
        if kind == 0 and row:
            k = next(iter(row))
            text = text[:-1] + f", {json.dumps(k)}: {json.dumps(self.scalar())}" + "}"
        elif kind == 1:
            text = text[:-1] + ', "big": ' + "9" * r.choice((31, 4301, 20_000)) + "}"
        elif kind == 2:
            text = text[:-1] + ', "deep": ' + self.deep() + "}"
        elif kind == 3:
            text = text[: r.randrange(len(text))]
        elif kind == 4:
            return text.encode()[: r.randrange(len(text))] + r.choice((b"\xff\xfe", b"\xc3", b"\xed\xa0\x80")) + b"}"
        elif kind == 5:
            text = r.choice(("[]", "null", "3", '"s"', "{}", "NaN", "[" + text + "]"))
        return text.encode("utf-8", "surrogatepass")

    def probes_jsonl(self, n: int) -> bytes:
        lines = [self.json_line(self.probe_row(i)) for i in range(n)]
        if self.chance(0.2):
            lines.insert(0, b"\xef\xbb\xbf")  # a byte-order mark
        return b"\n".join(lines) + b"\n"

    def probes_csv(self, n: int) -> bytes:
        r = self.r
        header = ["id", "question", "answers", "tags"]
        if self.chance(0.3):
            header[r.randrange(len(header))] = r.choice(("", "question", "Answers", "x" * 100, "q\x00"))
        lines = [",".join(header)]
        for i in range(n):
            cells = [f"p{i}", self.text(), r.choice(("Paris", "a; b", '["a", "b"]', "", "[1, 2]")), "t"]
            cells = [c.replace('"', '""') for c in cells]
            cells = [f'"{c}"' if self.chance(0.5) else c for c in cells]
            if self.chance(0.1):
                cells.append("extra")
            if self.chance(0.05):
                cells[1] = '"unclosed'
            lines.append(",".join(cells))
        data = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n"
        if self.chance(0.2):
            data += b"p9,\xff\xfe bad bytes,a,t\n"
        return data

    def corpus_jsonl(self, n: int) -> bytes:
        lines = []
        for i in range(n):
            row: dict[str, Any] = {"id": f"d{i}", "text": "Zorazan is governed from Feneadel."}
            if self.chance(0.5):
                row[self.r.choice(("id", "text", "extra"))] = self.value()
            lines.append(self.json_line(row))
        return b"\n".join(lines) + b"\n"

    # -- YAML specs -------------------------------------------------------------------------------------------
    def yaml_value(self, depth: int = 0) -> str:
        """A YAML flow value (written by hand: anchors, aliases, tags and quoting are part of the attack)."""
        r = self.r
        kind = r.randrange(12)
        if kind == 0:
            return r.choice(("!!python/object/apply:os.system ['true']", "!!binary aGVsbG8=", "!!set {a, b}",
                             "2001-12-14t21:59:43.10-05:00", "!!float nan", ".inf", "~", "0x1F", "0o17", "1_000"))
        if kind == 1:
            return "9" * r.choice((31, 5000))
        if kind == 2:
            return self.deep()
        if kind == 3 and depth < 3:
            return "[" + ", ".join(self.yaml_value(depth + 1) for _ in range(r.randrange(4))) + "]"
        if kind == 4 and depth < 3:
            return "{" + ", ".join(f"{json.dumps(self.key())}: {self.yaml_value(depth + 1)}"
                                   for _ in range(r.randrange(3))) + "}"
        if kind == 5:
            return r.choice(("'unclosed", '"\\ud800"', "@reserved", "`tick", "*undefined_alias", "&anchor x",
                             "|\n  block", ": colon"))
        return json.dumps(self.scalar(), ensure_ascii=True)

    def bomb(self) -> str:
        width, levels = self.r.choice(((9, 6), (4, 3), (2, 20), (10, 9)))
        lines, prev = [], None
        for i in range(levels):
            items = ["x"] * width if prev is None else [f"*{prev}"] * width
            lines.append(f"  l{i}: &l{i} [{', '.join(items)}]")
            prev = f"l{i}"
        return "\n".join(lines)

    def spec(self, base: dict[str, str], keys: tuple[str, ...], nested: dict[str, tuple[str, ...]]) -> bytes:
        """A YAML mapping from `base` (key -> YAML value text), mutated."""
        r = self.r
        fields = dict(base)
        for _ in range(r.randrange(1, 5)):
            key = r.choice(keys)
            if key in nested and self.chance(0.6):
                fields[key] = "{" + ", ".join(f"{k}: {self.yaml_value(1)}"
                                              for k in r.sample(nested[key], r.randrange(1, len(nested[key])))) + "}"
            else:
                fields[key] = self.yaml_value()
        lines = [f"{k}: {v}" for k, v in fields.items()]
        kind = r.randrange(10)
        if kind == 0:
            lines.append(f"{r.choice(keys)}: 1")  # maybe a duplicate key
        elif kind == 1:
            lines.append("extra:\n" + self.bomb())
        elif kind == 2:
            lines.append("loop: &loop [*loop]")
        elif kind == 3:
            lines.insert(0, "base: &base {x: 1}\nmerged:\n  <<: *base\n  y: 2")
        elif kind == 4:
            lines = [r.choice(("- a\n- b", "just a string", "---\na: 1\n---\nb: 2", "", "\t- tab", "{", "null"))]
        elif kind == 5:
            return "\n".join(lines).encode()[: r.randrange(1, 200)] + b"\xff"
        return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")

    def suite_yaml(self, data: str) -> bytes:
        nested = {"columns": PROBE_FIELDS, "grader_options": ("threshold", "model", "backend")}
        return self.spec({"name": "fuzz", "data": json.dumps(data), "template": json.dumps(self.r.choice(TEMPLATES))},
                         SUITE_KEYS, nested)

    def job_yaml(self, fixset: str) -> bytes:
        return self.spec({"fixset": json.dumps(fixset), "output_dir": "out", "method": "sft"}, JOB_KEYS, JOB_NESTED)

    def policy_yaml(self) -> bytes:
        r = self.r
        gates = []
        for _ in range(r.randrange(0, 4)):
            fields = {"type": r.choice(GATE_TYPES)}
            for k in r.sample(GATE_KEYS[1:], r.randrange(0, 4)):
                fields[k] = self.yaml_value(1)
            gates.append("{" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}")
        base = {"gates": "[" + ", ".join(gates) + "]"}
        if self.chance(0.5):
            base["bootstrap"] = "{resamples: " + r.choice(("100", "0", "-5", "1000000", "1e9", "x")) + \
                                ", confidence: " + r.choice(("0.95", "1", "0", "nan")) + "}"
        return self.spec(base, ("gates", "bootstrap", "extra"), {"bootstrap": ("resamples", "seed", "confidence")})


#: The hostile kinds of input file `Gen.hostile_file` makes: none is a readable, well-formed user file.
HOSTILE_FILES = ("fifo", "dev-zero-link", "dev-null-link", "directory", "long-line", "utf16", "broken-link",
                 "dir-with-link")


def make_hostile_file(kind: str, path: Path, n: int) -> None:
    """`path` as the hostile `kind` (workbench.safeopen refuses each, or reads it as a bad row): made for real, a
    FIFO with os.mkfifo and links to the devices, so the readers meet what an attacker would hand them."""
    import os

    if kind == "fifo":
        os.mkfifo(path)
    elif kind in ("dev-zero-link", "dev-null-link"):
        path.symlink_to("/dev/zero" if kind == "dev-zero-link" else "/dev/null")
    elif kind == "directory":
        path.mkdir()
    elif kind == "long-line":  # past the 1 MiB line cap, and with no newline
        path.write_bytes(b'{"question": "' + b"x" * ((2 << 20) + n) + b'"')
    elif kind == "utf16":
        path.write_text('{"question": "q", "answers": ["a"], "text": "t", "id": "1"}\n', encoding="utf-16")
    elif kind == "broken-link":
        path.symlink_to(path.with_name(f"missing-{n}"))
    else:  # a folder with one good text file and a link out of it
        path.mkdir()
        (path / "a.txt").write_text("Alpha is in Beta.")
        (path / "z.txt").symlink_to("/etc/hostname")


def control_text(r: random.Random) -> str:
    """A reason a hostile reviewer might type: ESC sequences, C1 controls, a bidi override, newlines."""
    pieces = ["\x1b[2J", "\x1b]0;title\x07", "\x9b31m", "\u202e", "\n", "\r", "\x08", "ok", "reason"]
    return "".join(r.choice(pieces) for _ in range(r.randrange(3, 9))) or "x"

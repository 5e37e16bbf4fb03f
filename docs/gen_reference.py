"""The documentation's generated parts, read from the code so they can never drift from it.

A page asks for a part with a marker line of its own, `<!-- generated:NAME -->`; `expand` replaces each marker
with the part's Markdown. Parts:

    cli          every command, sub-command and flag, from the argparse parsers (hallucination_workbench.build_parser)
    suite        every field of a suite YAML (workbench.probes.suite.Suite)
    job-spec     every field of a job spec (finetune.job.spec.JobSpec and its sections)
    policy       every field of a gate policy and gate type, and the built-in policy (workbench.regression.policy)
    backends     the built-in backends and the options every remote backend shares (workbench.backends)
    exit-codes   the exit codes (the dispatcher's, and the gate verdicts' from workbench.regression.comparison)
    store        the store's tables and columns (workbench.store.schema, with the comments beside each column)
    glossary     categories, transitions, gate types and measures (workbench.glossary: the app's wording)
    limits       the limits every user file and flag is read under (workbench.safeload and the CLI's bounds)
    world-tiers  the synthetic world's tiers: shares, corpus frequencies, expected categories (evals.world.generate)

It runs three ways: as an mkdocs hook (mkdocs.yml `hooks:`; `make docs` and `make docs-serve`), as a script that
writes the expanded reference pages for reading or diffing (`python docs/gen_reference.py --out DIR`), and from
tests/test_docs.py. Nothing here imports torch, transformers or gradio: the parsers and models are light by design
(`workbench --help` imports none of them).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def use_this_checkout() -> None:
    """Put this checkout first on sys.path, so the reference documents it and not whatever copy of the packages a
    venv's editable install points at. mkdocs restores sys.path after loading a hook, so expanding calls it again."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def check_checkout() -> None:
    """Fail when the packages were imported from somewhere else (another checkout's editable install)."""
    import hallucination_workbench

    where = Path(hallucination_workbench.__file__).resolve()
    if ROOT not in where.parents:
        raise RuntimeError(f"the reference would document {where.parent}, not this checkout ({ROOT}): run it with "
                           f"this checkout first on PYTHONPATH")


use_this_checkout()

MARKER = re.compile(r"^<!-- generated:([a-z-]+) -->$", re.MULTILINE)


# ---------------------------------------------------------------- Markdown helpers

def cell(text: object) -> str:
    """One table cell: one line; outside code spans, pipes and angle brackets escaped (help texts hold `a | b` and
    `<run>`). Inside a code span a pipe is no column separator to the tables extension, and an escape would show."""
    parts = " ".join(str(text).split()).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span to keep
        parts = ["\\`".join(parts)]
    return "`".join(p if i % 2 else p.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
                    for i, p in enumerate(parts))


def table(header: list[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def code(value: object) -> str:
    """A value as inline code (YAML spelling: null, true, lists in brackets)."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False) if (not value or value != value.strip() or "\n" in value
                                                         or value in ("null", "true", "false")) else value
    else:
        text = json.dumps(value, ensure_ascii=False)
    return f"`{text}`"


def prose(doc: str | None) -> str:
    return inspect.cleandoc(doc) if doc else ""


# ---------------------------------------------------------------- CLI

def command_parsers() -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """("workbench eval", its parser, its one-line help), for every command and sub-command, in the command
    table's order."""
    from hallucination_workbench import build_parser

    def walk(name: str, parser: argparse.ArgumentParser, text: str
             ) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
        yield name, parser, (parser.description or text or "").strip()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help or "" for a in action._choices_actions}
                for sub, subparser in action.choices.items():
                    yield from walk(f"{name} {sub}", subparser, helps.get(sub, ""))

    yield from walk("workbench", build_parser(), "")


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A parser's arguments, without -h and the sub-command slot."""
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)]


def metavar(action: argparse.Action) -> str:
    """What argparse shows for an argument's value: its metavar, its choices in braces, or its name."""
    if isinstance(action.metavar, str):
        return action.metavar
    if action.choices is not None:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{metavar(action)}`"
    value = ""
    if action.nargs != 0:
        value = f" [{metavar(action)}]" if action.nargs == "?" else f" {metavar(action)}"
    return ", ".join(f"`{flag}{value}`" for flag in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.default in (None, argparse.SUPPRESS) or (action.nargs == 0 and action.default is False):
        return ""
    if isinstance(action.default, list) and not action.default:
        return ""
    return code(action.default)


def _help(action: argparse.Action) -> str:
    # `%(default)s`, `%(budgets)s` and the like expanded as `--help` expands them (argparse fills them from the action)
    text = argparse.HelpFormatter("workbench")._expand_help(action).strip() if action.help else ""
    if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
        text += " (repeatable)"
    if action.choices is not None and action.option_strings and not isinstance(action.choices, range):
        choices = ", ".join(f"`{c}`" for c in action.choices)
        if not all(str(c) in text for c in action.choices):
            text += f" Choices: {choices}."
    elif isinstance(action.choices, range):
        text += f" ({action.choices.start}-{action.choices.stop - 1})"
    if not action.option_strings:
        text = (text + " (required)").strip() if action.nargs is None else text
    return text


def cli_markdown() -> str:
    from hallucination_workbench import COMMANDS

    check_checkout()

    parts = ["Every command takes `--workspace DIR` (default `$WORKBENCH_WORKSPACE`, else `./.workbench`). "
             f"Commands, in the loop's order: {', '.join(f'[`{c}`](#workbench-{c})' for c in COMMANDS)}."]
    for name, parser, text in command_parsers():
        parts.append(f"{'#' * (2 + name.count(' '))} {name}\n\n{text}".strip())
        usage = " ".join(parser.format_usage().replace("usage: ", "", 1).split())
        parts.append(f"```text\n{usage}\n```")
        rows = [[_argument(a), _default(a), _help(a)] for a in options(parser)]
        if rows:
            parts.append(table(["argument", "default", "meaning"], rows))
    return "\n\n".join(parts)


# ---------------------------------------------------------------- pydantic models

def type_name(t: Any) -> str:
    """A field's annotation in the words a YAML author needs."""
    from pydantic import BaseModel

    origin, args = typing.get_origin(t), typing.get_args(t)
    if t is type(None):
        return "null"
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        chosen_by = [m.discriminator for m in t.__metadata__ if getattr(m, "discriminator", None)]
        return f"mapping, its kind chosen by `{chosen_by[0]}`" if chosen_by else type_name(args[0])
    if origin is list:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"mapping of {type_name(args[0])} to {type_name(args[1])}"
    if isinstance(t, type) and issubclass(t, BaseModel):
        return "section"
    if t is typing.Any:
        return "any"
    return t.__name__ if isinstance(t, type) else str(t)


_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "at least {} long"),
           ("max_length", "at most {} long"), ("pattern", "matches `{}`"))


def bounds(field: Any) -> str:
    out = []
    for meta in field.metadata:
        for attr, word in _BOUNDS:
            value = getattr(meta, attr, None)
            if value is not None:
                shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
                if attr == "min_length" and value == 1:
                    out.append("not empty")
                else:
                    out.append(word.format(shown) if "{}" in word else f"{word} {shown}")
    return ", ".join(out)


def _field_default(field: Any) -> str:
    from pydantic import BaseModel

    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    return code(value)


def model_rows(model: Any, prefix: str = "") -> list[list[object]]:
    rows: list[list[object]] = []
    for name, field in model.model_fields.items():
        rows.append([f"`{prefix}{name}`", type_name(field.annotation), _field_default(field), bounds(field),
                     prose(field.description)])
    return rows


FIELD_HEADER = ["field", "type", "default", "bounds", "meaning"]


def sections(model: Any) -> list[tuple[str, Any]]:
    """(dotted name, model) of every nested section of `model`, depth first."""
    from pydantic import BaseModel

    out: list[tuple[str, Any]] = []
    for name, field in model.model_fields.items():
        t = field.annotation
        if isinstance(t, type) and issubclass(t, BaseModel):
            out.append((name, t))
            out += [(f"{name}.{sub}", m) for sub, m in sections(t)]
        elif typing.get_origin(t) is list and (args := typing.get_args(t)) and isinstance(args[0], type) \
                and issubclass(args[0], BaseModel):
            out.append((f"{name}[]", args[0]))  # each item's fields; sections it shares with its parent are above
    return out


def model_markdown(model: Any, title: str) -> str:
    parts = [f"## {title}", prose(model.__doc__), table(FIELD_HEADER, model_rows(model))]
    for dotted, section in sections(model):
        parts += [f"## `{dotted}`", prose(section.__doc__), table(FIELD_HEADER, model_rows(section, f"{dotted}."))]
    return "\n\n".join(p for p in parts if p)


def model_fields_dotted(model: Any, prefix: str = "") -> list[str]:
    """Every field's dotted name (`trainer.max_steps`): what the reference must name."""
    from pydantic import BaseModel

    out = []
    for name, field in model.model_fields.items():
        out.append(prefix + name)
        t = field.annotation
        if isinstance(t, type) and issubclass(t, BaseModel):
            out += model_fields_dotted(t, f"{prefix}{name}.")
    return out


def suite_markdown() -> str:
    from workbench.probes.suite import Suite

    return model_markdown(Suite, "Suite fields")


def job_spec_markdown() -> str:
    from finetune.job.spec import JobSpec

    return model_markdown(JobSpec, "Job spec fields")


def policy_markdown() -> str:
    from workbench.regression.policy import DEFAULT_POLICY_YAML, GATE_TYPES, BootstrapSettings, Policy

    parts = [model_markdown(Policy, "Policy fields"), "## Gate types",
             "Every gate has `type` (one of those below), `name`, `severity` and `description`; the other fields "
             "depend on the type."]
    for kind, gate in GATE_TYPES.items():
        rows = [r for r in model_rows(gate) if r[0] != "`type`"]
        parts += [f"### `{kind}`", prose(gate.__doc__), table(FIELD_HEADER, rows)]
    del BootstrapSettings  # reached through Policy's `bootstrap` section above
    parts += ["## The built-in policy",
              "`workbench regress` and `workbench watch` use this policy when no `--policy` is given "
              "(`DEFAULT_POLICY_YAML` in `workbench/regression/policy.py`; the [gate guide](../guides/gate.md) "
              "explains each gate).",
              f"```yaml\n{DEFAULT_POLICY_YAML.rstrip()}\n```"]
    return "\n\n".join(parts)


def policy_fields() -> list[str]:
    """`gates[].TYPE.FIELD` and the policy's own fields."""
    from workbench.regression.policy import GATE_TYPES, Policy

    out = model_fields_dotted(Policy)
    for kind, gate in GATE_TYPES.items():
        out += [f"{kind}.{f}" for f in gate.model_fields]
    return out


def backends_markdown() -> str:
    from workbench.backends.registry import BACKENDS, ENTRY_POINT_GROUP
    from workbench.backends.remote import RemoteOptions

    rows = [[f"`{name}`", f"`{target}`"] for name, target in BACKENDS.items()]
    return "\n\n".join([
        "## Built-in backends", table(["name", "class"], rows),
        f"Installed packages add more through the entry-point group `{ENTRY_POINT_GROUP}`.",
        model_markdown(RemoteOptions, "Remote backend options")])


# ---------------------------------------------------------------- exit codes

#: The dispatcher's codes (hallucination_workbench/__init__.py: `_run`, `main`); the test checks each is there.
PROCESS_CODES: list[tuple[int, str]] = [
    (0, "success; for `regress` and `watch`, a gate verdict of pass or warn (table below)"),
    (1, "a check failed: a gate verdict of fail, a job that failed (`train`), a job that does not fit or is a risk "
        "(`preflight`)"),
    (2, "bad input or an error: the message (`error: ...` on stderr) names the file, line and field; never a "
        "traceback. Also `workbench` with no command"),
    (3, "the gate was inconclusive: a fail gate passed but could not have failed on this probe set"),
    (130, "interrupted by Ctrl-C: engines shut down, a run in progress is marked `interrupted`, finished answers are "
          "kept"),
    (141, "standard output was closed by its reader (`workbench runs --json | head`): the command ends quietly, "
          "as Unix tools do on SIGPIPE; a full standard output (`> /dev/full`) is an error, exit 2"),
    (143, "terminated by SIGTERM (a CI timeout, `kill`, systemd), handled as Ctrl-C"),
]


def exit_codes_markdown() -> str:
    from workbench.regression.comparison import EXIT_CODES

    verdicts = sorted(EXIT_CODES.items(), key=lambda kv: (kv[1], kv[0]))
    return "\n\n".join([
        table(["code", "meaning"], [[f"`{c}`", text] for c, text in PROCESS_CODES]),
        "### Gate verdicts",
        "`workbench regress` exits with its verdict's code; `workbench watch` with the worst of its scan "
        "(fail over inconclusive over pass). From `EXIT_CODES` in `workbench/regression/comparison.py`:",
        table(["verdict", "exit code"], [[f"`{v}`", f"`{c}`"] for v, c in verdicts]),
    ])


# ---------------------------------------------------------------- store

def _schema_comments() -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """The comments in workbench/store/schema.py: above each table, and beside (or above) each column."""
    from workbench.store import schema

    table_notes: dict[str, str] = {}
    column_notes: dict[tuple[str, str], str] = {}
    pending: list[str] = []
    current = None
    for line in inspect.getsource(schema).splitlines():
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("#:"):
            pending.append(stripped.lstrip("# "))
            continue
        if m := re.match(r"^(\w+) = Table\(", line):  # each table's variable is named as the table
            current = m.group(1)
            if pending:
                table_notes[current] = " ".join(pending)
        elif current and (m := re.search(r'Column\("(\w+)"', line)):
            note = line.split("#", 1)[1].strip() if "#" in line else ""  # no column declaration holds a '#'
            column_notes[(current, m.group(1))] = " ".join([*pending, note]).strip()
        elif stripped.startswith(")"):
            current = None
        pending = []
    return table_notes, column_notes


def store_markdown() -> str:
    from workbench.store import schema

    table_notes, column_notes = _schema_comments()
    added = {(t, c): v for v, cols in schema.ADDED_COLUMNS.items() for t, c, _ in cols}
    parts = [f"Schema version **{schema.SCHEMA_VERSION}**. A store written by older code is upgraded in place "
             "(the columns added since are nullable); a store newer than the code is refused."]
    for name, tbl in schema.metadata.tables.items():
        parts.append(f"### `{name}`")
        if name in table_notes:
            parts.append(table_notes[name])
        rows = []
        for col in tbl.columns:
            key = "primary key" if col.primary_key else ("" if col.nullable else "not null")
            note = column_notes.get((name, col.name), "")
            if (name, col.name) in added:
                note = (note + f" (added in schema {added[(name, col.name)]})").strip()
            rows.append([f"`{col.name}`", str(col.type), key, note])
        parts.append(table(["column", "type", "key / null", "note"], rows))
        indexes = [f"`{ix.name}` on " + ", ".join(f"`{c.name}`" for c in ix.columns) for ix in tbl.indexes]
        if indexes:
            parts.append("Indexes: " + "; ".join(indexes) + ".")
    return "\n\n".join(parts)


# ---------------------------------------------------------------- glossary

def glossary_markdown() -> str:
    from workbench import glossary

    groups = [("Attribution categories", "category", glossary.CATEGORY_HELP),
              ("Verdict transitions", "transition (baseline → candidate)", glossary.TRANSITIONS),
              ("Gate types", "gate type", glossary.GATE_HELP),
              ("Grades, verdicts and the fix", "term", glossary.TERMS),
              ("Measures", "measure", glossary.MEASURES)]
    parts = []
    for title, head, terms in groups:
        parts += [f"## {title}", table([head, "meaning"], [[f"`{k}`", v] for k, v in terms.items()])]
    return "\n\n".join(parts)


# ---------------------------------------------------------------- limits

def limits_markdown() -> str:
    from workbench import auth, prompting, safeload, safeopen
    from workbench.cli import _common
    from workbench.probes import _readers, suite

    mib = safeload.MAX_SPEC_BYTES / (1 << 20)

    def size(n: int) -> str:
        return f"{n / (1 << 20):g} MiB"

    rows: list[list[object]] = [
        ["every input file", "a regular file only (a FIFO, device, socket or directory is refused before it is "
                             "opened, and opened non-blocking); its size checked before reading, read in "
                             f"{size(safeopen.CHUNK)} chunks"],
        ["a corpus directory's members", "no symlinks (files or folders) unless `--follow-symlinks`; each .txt at "
                                         f"most {size(safeopen.MAX_DOCUMENT_BYTES)} (`MAX_DOCUMENT_BYTES`)"],
        ["one line of a corpus or JSONL file", f"{size(safeopen.MAX_LINE_BYTES)} (`MAX_LINE_BYTES`): a longer line "
                                               "is a bad row, skipped in bounded reads (`--skip-bad`)"],
        ["a probe file (read whole)", f"{size(safeopen.MAX_DATA_FILE_BYTES)} (`MAX_DATA_FILE_BYTES`); Parquet: "
                                      "the same once decoded, counted before decoding (a dictionary-encoded bomb is "
                                      "refused); one CSV field at most one record"],
        ["`--facts`, an app users file", f"{size(safeopen.MAX_TEXT_BYTES)} / {size(auth.MAX_AUTH_BYTES)}; UTF-8 "
                                         "(UTF-16 is named, not decoded as garbage)"],
        ["suite, job spec, policy (YAML)", f"{mib:g} MiB (`MAX_SPEC_BYTES`); `safe_load` only, duplicate keys "
                                           "refused, errors name the line"],
        ["one probe or corpus row (JSON)", f"{safeload.MAX_RECORD_BYTES / (1 << 20):g} MiB (`MAX_RECORD_BYTES`); "
                                           "duplicate keys refused"],
        ["a whole `.json` probe file", f"{_readers._WHOLE_FILE_NODES:,} values"],
        ["any document", f"{safeload.MAX_DEPTH} levels deep (`MAX_DEPTH`); {safeload.MAX_NODES:,} values once "
                         "YAML aliases are expanded (`MAX_NODES`; an anchor bomb is refused before it expands)"],
        ["integers / strings", f"at most {safeload.MAX_INT_DIGITS} digits (`MAX_INT_DIGITS`) / valid Unicode "
                               "(a lone surrogate such as `\"\\ud800\"` is refused)"],
        ["prompt templates", f"literal text and `{{{prompting.PLACEHOLDER}}}` only (`{{{{ }}}}` for braces), at "
                             f"most {prompting.MAX_TEMPLATE_CHARS:,} characters; or `{prompting.CHAT}`"],
        ["`--max-tokens`, suite `max_tokens`", f"1 to {suite.MAX_TOKENS:,}"],
        ["`--samples` / `--seed`", f"0 to {_common.MAX_SAMPLES:,} / 0 to {_common.MAX_SEED:,}"],
        ["`--dtype`", ", ".join(f"`{d}`" for d in _common.DTYPES)],
        ["app users file", f"`{auth.ALGORITHM}` with {auth.ITERATIONS:,} iterations, a random salt, "
                           "constant-time comparison; a file's counts within "
                           f"{auth.MIN_ITERATIONS:,}-{auth.MAX_ITERATIONS:,}, each user once"],
    ]
    return table(["input", "limit"], rows)


# ---------------------------------------------------------------- the synthetic world

def world_tiers_markdown() -> str:
    from evals.world import generate

    known_share = 1 - sum(generate.TIER_SHARES.values())
    rows: list[list[object]] = []
    for tier, category in generate.EXPECTED_CATEGORY.items():
        share = generate.TIER_SHARES.get(tier, known_share)
        plan = generate.TIER_PLAN[tier]
        seen = ", ".join(f"{n} x `{ph}`" for ph, n in plan.items()) or "never"
        if tier == "conflict":
            planted = generate.CONFLICT_PLAN.items()
            seen += "; the planted wrong value " + ", ".join(f"{n} x `{ph}`" for ph, n in planted)
        rows.append([f"`{tier}`", f"{share:.0%}" + (" (the rest)" if tier not in generate.TIER_SHARES else ""),
                     seen, f"`{category}`" if category else "(none: the model should know it)"])
    return "\n\n".join([
        table(["tier", "share of facts", "the true value in the corpus, by phrasing", "expected category"], rows),
        "Phrasings: " + ", ".join(f"`{p}`" for p in generate.PHRASINGS) + " (`qa_b` is the held-out paraphrase's).",
    ])


# ---------------------------------------------------------------- expansion

GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_markdown,
    "suite": suite_markdown,
    "job-spec": job_spec_markdown,
    "policy": policy_markdown,
    "backends": backends_markdown,
    "exit-codes": exit_codes_markdown,
    "store": store_markdown,
    "glossary": glossary_markdown,
    "limits": limits_markdown,
    "world-tiers": world_tiers_markdown,
}


#: Docstrings in the code still point at README sections whose measurements now live on the benchmark pages; a
#: generated part links to the page instead (every generated part sits one folder below docs/).
MOVED = {
    "Unreplayed known facts": "../benchmarks/fix_efficacy.md#unreplayed-known-facts",
    "Fix efficacy across worlds": "../benchmarks/fix_efficacy.md#across-worlds",
    "The real-model demo": "../benchmarks/real_model.md",
}


def _moved(text: str) -> str:
    return re.sub(r'README "([^"]+)"', lambda m: f"[{m.group(1)}]({MOVED[m.group(1)]})" if m.group(1) in MOVED
                  else m.group(0), text)


def expand(markdown: str) -> str:
    """`markdown` with every `<!-- generated:NAME -->` line replaced by that part; an unknown NAME is an error."""
    use_this_checkout()

    def part(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown generated part `{name}`; known: {', '.join(GENERATORS)}")
        return _moved(GENERATORS[name]().strip())

    return MARKER.sub(part, markdown)


def pages_with_markers(docs_dir: Path = ROOT / "docs") -> list[Path]:
    return sorted(p for p in docs_dir.rglob("*.md") if MARKER.search(p.read_text(encoding="utf-8")))


# mkdocs hook (mkdocs.yml `hooks:`): every page is expanded as it is built.
def on_page_markdown(markdown: str, **_: Any) -> str:
    return expand(markdown)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write the documentation pages that hold generated parts, expanded.")
    p.add_argument("--out", type=Path, required=True, help="folder to write the expanded pages into")
    args = p.parse_args(argv)
    docs = ROOT / "docs"
    for page in pages_with_markers(docs):
        target = args.out / page.relative_to(docs)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(expand(page.read_text(encoding="utf-8")), encoding="utf-8")
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())

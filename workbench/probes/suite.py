"""Suites: a named probe set plus prompt template and grading settings, read from YAML."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import pydantic

from workbench.errors import WorkbenchError, did_you_mean, unknown_name
from workbench.probes._row import PROBE_FIELDS
from workbench.probes.budget import PLAIN_BUDGET, default_budget
from workbench.probes.formats import FORMAT_NAMES
from workbench.probes.loader import HF_PREFIX, LoadResult, load_probes, with_tags
from workbench.prompting import check_template
from workbench.safeload import key_lines, read_yaml_file

GRADERS = ("match", "embedding", "judge", "match-judge")
DEFAULT_ABSTENTIONS = (
    "i don't know", "i do not know", "i'm not sure", "not sure",
    "unknown", "cannot answer", "no answer", "i have no idea",
)  # fmt: skip
SUITE_SUFFIXES = (".yaml", ".yml")
#: New tokens per answer at most (suite `max_tokens`, CLI --max-tokens). Sentence answers of a real chat
#: model to SimpleQA/NQ questions need 32-128 tokens; 4,096 is far beyond any answer to a factual question
#: and bounds what one setting can ask of every probe x sample (each token is one forward pass).
MAX_TOKENS = 4096


class Suite(pydantic.BaseModel, extra="forbid", use_attribute_docstrings=True):
    """A named set of probes with the settings to prompt and grade them."""

    name: str = pydantic.Field(min_length=1)
    """Suite name; shown in runs and reports."""
    data: str = pydantic.Field(min_length=1)
    """Probe data: a path relative to the YAML file, or "hf:name[:config]" for a Hugging Face dataset."""
    format: str = "auto"
    """How to read `data`: auto, a container (jsonl, json, csv, tsv, parquet, hf) or a public format
    (truthfulqa, simpleqa, popqa, nq_open, triviaqa, halueval). "auto" detects both from extension and columns."""
    columns: dict[str, str] = {}
    """Maps probe fields to source columns, e.g. {"question": "q", "answers": "a"}."""
    split: str | None = None
    """Split of a Hugging Face dataset (None: its only split)."""
    template: str = "Q: {question} A:"
    """Prompt template; must contain {question}. The literal "chat" uses the tokenizer's chat template."""
    system_prompt: str | None = None
    """System message for chat templates (ignored by plain templates)."""
    stop: list[str] = ["\n"]
    """Generation stops before the first of these strings."""
    max_tokens: int = pydantic.Field(default=PLAIN_BUDGET, ge=1, le=MAX_TOKENS)
    """New tokens at most per answer. Left out (and no --max-tokens), a run takes the default of its template and
    probe format (workbench/probes/budget.py: 128 for the chat template, 16 or 32 for a plain one)."""
    abstention_phrases: list[str] = list(DEFAULT_ABSTENTIONS)
    """The suite's own abstention phrases: an answer that says one of them (whole words, case-insensitive) and names
    no value counts as NOT_ATTEMPTED. They add to the refusal forms the grader reads by meaning in every language
    it covers (an apology with "I don't have information about X", "there is no record of", "I cannot answer"),
    which count anywhere in a short answer; a hedge that still names a value ("I'm not sure, but I think it's
    Lyon") is graded on that value."""
    grader: str = "match"
    """How answers are graded: match (normalized match against answers/aliases), embedding, judge, or match-judge
    (answers longer than a phrase: match where the answer names an accepted answer, else the judge; which one
    decided is stored per answer). judge and match-judge take the judge's `grader_options` (`model`, ...)."""
    grader_options: dict[str, Any] = {}
    """Options passed to the grader (e.g. a similarity threshold, the judge model)."""
    tags: list[str] = []
    """Tags added to every probe of the suite."""
    language: str | None = pydantic.Field(default=None, pattern=r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$")
    """Language of the probes ("zh", "zh-Hant", "ja", "es", ...) for those whose data names none; it picks
    the abstention and negation phrases the grader adds to `abstention_phrases`. None: each probe's is
    guessed from its question's script (Han -> zh, kana -> ja, Hangul -> ko, Cyrillic -> ru, ...)."""

    _base_dir: Path | None = pydantic.PrivateAttr(default=None)
    _data_format: str = pydantic.PrivateAttr(default="")  # the probe format resolve_probes read (or detected)
    _max_tokens_rule: str = pydantic.PrivateAttr(default="suite")

    @property
    def max_tokens_rule(self) -> str:
        """Where `max_tokens` came from: "suite" (its own value, or one set by code), "--max-tokens", or a
        default rule of workbench/probes/budget.py in words. A run records it in its options."""
        return self._max_tokens_rule

    @pydantic.field_validator("format")
    @classmethod
    def _known_format(cls, v: str) -> str:
        if v not in FORMAT_NAMES:
            raise ValueError(
                f"unknown format `{v}`.{did_you_mean(v, FORMAT_NAMES)} Known: {', '.join(FORMAT_NAMES)}"
            )
        return v

    @pydantic.field_validator("grader")
    @classmethod
    def _known_grader(cls, v: str) -> str:
        if v not in GRADERS:
            raise ValueError(f"unknown grader `{v}`.{did_you_mean(v, GRADERS)} Known: {', '.join(GRADERS)}")
        return v

    @pydantic.field_validator("columns")
    @classmethod
    def _probe_fields(cls, v: dict[str, str]) -> dict[str, str]:
        for field in v:
            if field not in PROBE_FIELDS:
                raise ValueError(f"`{field}` is not a probe field.{did_you_mean(field, PROBE_FIELDS)}")
        return v

    @pydantic.field_validator("template")
    @classmethod
    def _has_question(cls, v: str) -> str:
        if v == "chat":
            return v
        return check_template(v)

    @pydantic.field_validator("stop")
    @classmethod
    def _no_empty_stop(cls, v: list[str]) -> list[str]:
        if any(not s for s in v):
            raise ValueError("an empty stop string would end every answer before it starts")
        return v

    def with_generation(self, *, max_tokens: int | None = None, stop: list[str] | None = None,
                        system_prompt: str | None = None, template: str | None = None) -> Suite:
        """This suite with the given generation settings in place of its own (None keeps the suite's); the
        run records the result as its suite settings, so a resume or a rerun like it uses them too.
        `template` is the run's template override: a system prompt needs the chat template. A suite that set
        no `max_tokens` takes, without `max_tokens` here, the default of its template and probe format."""
        effective = template or self.template
        if system_prompt is not None and effective != "chat":
            raise WorkbenchError("--system-prompt is a system message for `--template chat`; this run's template "
                                 f"is `{effective}` (a plain template has no system turn)")
        rule = "--max-tokens"
        if max_tokens is None and "max_tokens" not in self.model_fields_set:
            max_tokens, rule = default_budget(effective, self._data_format or self.format)
        update = {k: v for k, v in (("max_tokens", max_tokens), ("stop", stop), ("system_prompt", system_prompt))
                  if v is not None}
        if not update:
            return self
        out = _validate({**self.model_dump(), **update}, f"suite `{self.name}`")
        out._base_dir, out._data_format = self._base_dir, self._data_format
        out._max_tokens_rule = rule if max_tokens is not None else self._max_tokens_rule
        return out

    def with_max_tokens_rule(self, rule: str) -> Suite:
        """This suite recording `rule` as where its `max_tokens` came from: a run rebuilt from a stored run's suite
        settings (a rerun like it) carries that run's rule instead of "suite"."""
        out = self.model_copy()
        out._max_tokens_rule = rule
        return out

    def data_source(self) -> str:
        """`data` as load_probes takes it: "hf:..." unchanged, a path resolved against the YAML's folder."""
        if self.data.startswith(HF_PREFIX) or self.format == "hf" or self._base_dir is None:
            return self.data
        return str(self._base_dir / Path(self.data).expanduser())


def suites_dir() -> Path | None:
    """evals/suites of the installed project, found without importing evals."""
    spec = importlib.util.find_spec("evals")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) / "suites" if locations else None


def _suite_path(path_or_name: str | Path) -> Path:
    path = Path(path_or_name)
    if path.suffix.lower() in SUITE_SUFFIXES or path.exists() or len(path.parts) > 1:
        if not path.exists():
            raise WorkbenchError(f"{path}: no such suite file")
        return path  # anything else that is not a regular file is named by the safe reader (a FIFO, a folder)
    folder = suites_dir()
    known = {p.stem: p for p in folder.glob("*.y*ml")} if folder and folder.is_dir() else {}
    if str(path_or_name) not in known:
        raise unknown_name("suite", str(path_or_name), known)
    return known[str(path_or_name)]


def load_suite(path_or_name: str | Path) -> Suite:
    """A suite from a YAML file, or by bare name from evals/suites/<name>.yaml."""
    path = _suite_path(path_or_name)
    try:
        spec = read_yaml_file(path)
    except ValueError as e:
        raise WorkbenchError(str(e)) from None
    if not isinstance(spec, dict):
        raise WorkbenchError(f"{path}: a suite must be a YAML mapping (name: ..., data: ...)")
    suite = _validate(spec, str(path), path)
    suite._base_dir = path.parent.resolve()
    return suite


def _validate(spec: dict[str, Any], where: str, path: Path | None = None) -> Suite:
    try:
        return Suite.model_validate(spec)
    except pydantic.ValidationError as e:
        errors = e.errors()
        lines = key_lines(path) if path is not None else {}
        located = [(lines.get(str(err["loc"][0])) if err["loc"] else None, _describe(err)) for err in errors]
        if len(located) == 1 and located[0][0]:
            raise WorkbenchError(f"{where}, line {located[0][0]}: {located[0][1]}") from None
        raise WorkbenchError(f"{where}: " + "; ".join(f"line {n}: {d}" if n else d for n, d in located)) from None


def _describe(err: Any) -> str:
    loc = ".".join(str(x) for x in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"unknown key `{loc}`.{did_you_mean(str(err['loc'][0]), Suite.model_fields)}"
    if err["type"] == "missing":
        return f"missing required key `{loc}`"
    return f"`{loc}`: {str(err['msg']).removeprefix('Value error, ')}"


def resolve_probes(
    spec: str | Path, *, format: str = "auto", skip_bad: bool = False
) -> tuple[Suite, LoadResult]:
    """Suite and probes from a suite YAML, a suite name, "hf:name[:config]", or a probe data file (then a
    default Suite named after the file). A `format` other than "auto" overrides the suite's."""
    text, path = str(spec), Path(spec)
    bare_name = not path.suffix and len(path.parts) == 1 and not path.exists()
    if path.suffix.lower() in SUITE_SUFFIXES:
        suite = load_suite(spec)
    elif text.startswith(HF_PREFIX) or format == "hf":
        suite = _validate({"name": text.removeprefix(HF_PREFIX), "data": text, "format": format}, text)
    elif bare_name:
        suite = load_suite(spec)
    else:
        suite = _validate({"name": path.stem, "data": text, "format": format}, text)
    result = load_probes(
        suite.data_source(),
        format=format if format != "auto" else suite.format,
        columns=suite.columns,
        skip_bad=skip_bad,
        split=suite.split,
    )
    suite._data_format = result.format
    return suite, with_language(with_tags(result, suite.tags), suite.language)


def with_language(result: LoadResult, language: str | None) -> LoadResult:
    """The same result with `language` set on every probe whose data named none."""
    if language is None:
        return result
    probes = tuple(p if p.language else dataclasses.replace(p, language=language) for p in result.probes)
    return dataclasses.replace(result, probes=probes)

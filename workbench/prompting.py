"""Prompt templates: literal text with exactly one placeholder, `{question}`.

Templates come from users (suite YAML, `--template`, job specs), so they are not `str.format` strings:
`{question:>100000000}` would allocate gigabytes, `{question.__class__.__mro__}` would leak Python
internals into the prompt, and `{0}` / `{other}` would end in a traceback. Here a template may hold
literal text, `{{` / `}}` for literal braces, and `{question}` (one or more times); anything else is
refused with a message that says what was found. The literal template "chat" means the tokenizer's
chat template and is handled by the backend, not here.
"""

from __future__ import annotations

import string

CHAT = "chat"
PLACEHOLDER = "question"
MAX_TEMPLATE_CHARS = 10_000


def check_template(template: str) -> str:
    """The template unchanged when it is valid; a ValueError that says what is wrong otherwise."""
    if template == CHAT:
        return template
    if len(template) > MAX_TEMPLATE_CHARS:
        raise ValueError(f"a template may be at most {MAX_TEMPLATE_CHARS:,} characters, got {len(template):,}")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as e:
        raise ValueError(f"bad template ({e}); write literal braces as {{{{ and }}}}") from None
    found = False
    for _literal, field, spec, conversion in parts:
        if field is None:
            continue
        if field != PLACEHOLDER:
            shown = "{" + field + "}" if field else "{}"
            raise ValueError(f"unknown placeholder `{shown}`: a template may use only {{question}} "
                             "(write literal braces as {{ and }})")
        if spec or conversion:
            raise ValueError("`{question}` takes no format spec or conversion (found "
                             f"`{{question{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}`)")
        found = True
    if not found:
        raise ValueError('must contain {question} (or be "chat")')
    return template


def render(template: str, question: str) -> str:
    """The template with `question` in place of every `{question}` (the template must pass check_template)."""
    check_template(template)
    return template.format(question=question)

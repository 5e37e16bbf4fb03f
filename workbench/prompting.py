"""Prompt templates: literal text with exactly one placeholder, `{question}`.

Templates come from users (suite YAML, `--template`, job specs), so they are not `str.format` strings:
`{question:>100000000}` would allocate gigabytes, `{question.__class__.__mro__}` would leak Python
internals into the prompt, and `{0}` / `{other}` would end in a traceback. Here a template may hold
literal text, `{{` / `}}` for literal braces, and `{question}` (one or more times); anything else is
refused with a message that says what was found. The literal template "chat" means the tokenizer's
chat template: `chat_messages` + `render_chat` give the text, the same for the evaluation (Backend.format_chat)
and for fix sets (finetune/chatform.py).
"""

from __future__ import annotations

import string
from typing import Any

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


Messages = list[dict[str, str]]


def chat_messages(question: str, system_prompt: str | None = None) -> Messages:
    """One user turn, after a system turn when `system_prompt` is given: what `template: chat` asks."""
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*system, {"role": "user", "content": question}]


def render_chat(tokenizer: Any, messages: Messages) -> str:
    """`messages` through the tokenizer's chat template, with the generation prompt (the assistant turn opened);
    a ValueError when the tokenizer has none (callers say which model and what to do)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the tokenizer has no chat template")
    return str(tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True))

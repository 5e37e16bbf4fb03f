"""Every HTML page and panel the workbench shows, rendered from Jinja2 templates in one place.

One `Environment` with autoescape on: every value a template prints is escaped unless it is `Markup` (the output
of another template), so probe text, model answers, reviewer names, reasons and report text can never become
markup, and no rendering code calls `escape` by hand. `StrictUndefined` turns a misspelt name into an error at
render time instead of an empty string on the page. Templates live in `templates/` (package data: an installed
wheel carries them) and load no asset from the network, so the self-contained reports stay self-contained.

The modules that own a panel (`workbench.views`, `evidence`, `verdict`, `signoff`, `plots`,
`gate_report`, `reports.views`) keep their public functions; each gathers plain values and calls
`render` or `macro`. Markdown panels (`*.md`) render here too: gradio's Markdown shows HTML, so the same escaping
applies, and the `md` filter also defuses Markdown's own marks in a user's words.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from workbench.glossary import term_html

__all__ = ["Markup", "macro", "render"]


def _fmt(value: Any, spec: str) -> str:
    # Python's format spec in a template ("{{ x|fmt('+.1f') }}"): the numbers keep the exact digits they had.
    return format(value, spec)


_MD_MARKS = re.compile(r"([\\`*_\[\]#|])")


def _md(text: str) -> str:
    # A user's words in Markdown, on one line, with Markdown's marks backslashed; `<` and `&` are left to
    # autoescape, which runs after this filter (a backslash before an entity would show the entity as text).
    return _MD_MARKS.sub(r"\\\1", str(text).replace("\n", " "))


def _term(term: str) -> Markup:
    return Markup(term_html(term))  # term_html escapes its values itself (Markup.format)


@functools.cache
def environment() -> Environment:
    """The one Environment every panel and report renders through (built once, on first use)."""
    env = Environment(loader=PackageLoader("workbench.html", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = _fmt
    env.filters["md"] = _md
    env.globals["term"] = _term
    return env


def render(template: str, **context: Any) -> str:
    """`template` rendered with `context`, as a plain str (not Markup: a caller that appends text to it must
    not have that text escaped behind its back)."""
    return environment().get_template(template).render(**context)


def macro(template: str, name: str, *args: Any, **kwargs: Any) -> str:
    """The output of macro `name` of `template`, as a plain str: one panel of a template that holds several."""
    return str(getattr(environment().get_template(template).module, name)(*args, **kwargs)).strip()

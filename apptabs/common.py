"""What every tab gets: the workspace (`Context`), the components tabs share (`Shared`) and the error wrapper."""

# No `from __future__ import annotations`: gradio reads the handlers' annotations (gr.Request) at wiring time.

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import gradio as gr

from workbench import views
from workbench.errors import WorkbenchError
from workbench.store import Store

F = TypeVar("F", bound=Callable[..., Any])
#: A handler's result: the new value (or a `gr.Dropdown(...)` update) of each component it changes; the
#: components it leaves out keep theirs.
Updates = dict[Any, Any]


def ui_errors(fn: F) -> F:
    """Show user-facing errors in the UI (and to API clients) instead of a generic failure."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (WorkbenchError, ValueError, KeyError) as e:
            raise gr.Error(str(e).strip("'\"")) from e

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class Context:
    """The workspace the app serves: its store, opened once (SQLite WAL lets the CLI write meanwhile)."""

    store: Store

    @property
    def ws(self) -> Path:
        return self.store.workspace

    def who(self, reviewer: str, request: gr.Request | None) -> str:
        """The logged-in user when auth is on, else the field. Logged in, another name in the field is refused
        (WorkbenchError), never recorded as the user: a reviewer cannot sign as someone else, nor think they did."""
        user = logged_in(request)
        if not user:
            return reviewer
        if (reviewer or "").strip() not in ("", user):
            raise WorkbenchError(f"you are signed in as `{user}`: the reviewer recorded is the signed-in user, not "
                                 f"`{reviewer.strip()}` (sign in as them to decide in their name)")
        return user

    def run_picker(self, value: str | None = None, *, pick: bool = False) -> Any:
        """A run dropdown's update: every run, newest first; with `pick`, `value` selected (None: none)."""
        choices = views.run_choices(self.store)
        return gr.Dropdown(choices=choices, value=value or None) if pick else gr.Dropdown(choices=choices)


def logged_in(request: gr.Request | None) -> str:
    """The signed-in user's name; "" without a login."""
    user = getattr(request, "username", None) if request is not None else None
    return str(user) if user else ""


def reviewer_box(request: gr.Request | None) -> Any:
    """A reviewer field's update on load: signed in, the user's name, read-only (the reviewer recorded is the
    signed-in user); without a login the field stays as it is, for the reviewer to type."""
    user = logged_in(request)
    return gr.Textbox(value=user, interactive=False, info="signed in") if user else gr.skip()


@dataclass(frozen=True)
class Shared:
    """The components one tab's events read or write in another, made before the tabs (unrendered) and rendered
    by the tab that shows them. Everything else stays inside its tab."""

    page: gr.Blocks  # its load event (after login): each tab fills itself
    tabs: gr.Tabs  # a probe clicked in Compare opens Probe detail
    refresh: gr.Button  # the Runs tab's Refresh: every run picker lists the runs again
    baseline: gr.Dropdown  # the selected pair, picked in Compare: Probe detail shows it, Review follows the candidate
    candidate: gr.Dropdown
    probe: gr.Dropdown  # the probe in Probe detail: a click in Compare's table or a step picks it; Review follows it
    listed: gr.State  # the probe ids Compare lists, in its order: Probe detail steps through them
    gate: gr.State  # the id of the gate Compare just recorded: Review offers it for sign-off
    show_pair: gr.State  # a gate opened from Decisions: Compare compares its pair (the pickers already hold it)


def shared_components(page: gr.Blocks, tabs: gr.Tabs) -> Shared:
    """The shared components, unrendered. Nothing from the workspace goes into the layout: gradio embeds the
    layout's values in the page's API description, which it serves before login (run ids arrive on load)."""
    def pick(label: str, elem_id: str) -> gr.Dropdown:
        return gr.Dropdown(elem_classes=["wb-run-pick"], label=label, choices=[], allow_custom_value=True,
                           elem_id=elem_id, render=False)

    return Shared(page=page, tabs=tabs,
                  refresh=gr.Button("Refresh", variant="primary", scale=1, elem_id="runs-refresh", render=False),
                  baseline=pick("baseline run", "baseline"), candidate=pick("candidate run", "candidate"),
                  probe=gr.Dropdown(label="probe", choices=[], allow_custom_value=True, elem_id="probe-pick",
                                    render=False),
                  listed=gr.State([], render=False), gate=gr.State("", render=False),
                  show_pair=gr.State("", render=False))


def place(component: Any) -> None:
    """Render a shared component (made unrendered by `shared_components`) where its tab shows it."""
    component.render()  # typed loosely: gradio's `render` carries no annotations

"""The app's shape, read from its source with `ast` (no gradio needed) and, once, from the built page: `app.py` only
assembles, every function is short, every event is named, and the public API keeps its endpoints."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP_FILES = [ROOT / "app.py", *sorted((ROOT / "apptabs").glob("*.py"))]
MAX_FUNCTION_LINES = 80
#: The API clients (and the tests) call these by name; every other event is private.
PUBLIC = {"refresh", "runs", "run_shares", "tag_metrics", "workspace_file", "compare", "gate", "probe_detail",
          "build_fixset", "preflight", "launch_job", "open_job", "stop_job", "override", "release", "reviews",
          "reports", "decide_report", "export_reports", "decide_signoff", "decide_block"}
LISTENERS = {"click", "change", "input", "submit", "select", "load", "then", "tick", "on"}


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{n.lineno} {n.name} ({(n.end_lineno or 0) - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and (n.end_lineno or 0) - n.lineno + 1 > limit]


def unnamed_events(path: Path) -> list[str]:
    """Event bindings (`x.click(fn, ...)`, `gr.on(...)`) without an explicit `api_name`: gradio would name them
    after their function and, on a clash, move an endpoint to `name_1`."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{n.lineno}" for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LISTENERS and n.args
            and not any(k.arg == "api_name" for k in n.keywords)]


def test_app_py_only_assembles() -> None:
    assert len((ROOT / "app.py").read_text().splitlines()) <= 150


def test_no_app_function_is_longer_than_80_lines() -> None:
    assert [f for path in APP_FILES for f in long_functions(path)] == []


def test_every_event_is_named_explicitly() -> None:
    assert [e for path in APP_FILES for e in unnamed_events(path)] == []


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    src = tmp_path / "tab.py"
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    src.write_text(f"def tab(btn, fn):\n{body}\n    btn.click(fn, None, None)\n"
                   "    btn.click(fn, None, None, api_name='ok')\n    print('not an event')\n")
    assert long_functions(src) == [f"tab.py:1 tab ({MAX_FUNCTION_LINES + 4} lines)"]
    assert unnamed_events(src) == [f"tab.py:{MAX_FUNCTION_LINES + 2}"]


@pytest.mark.slow  # over 5 s on 2 cores
def test_the_built_page_keeps_its_public_endpoints(tmp_path: Path) -> None:
    """Built over an empty workspace: the public endpoints are exactly the documented ones, every other event is
    private, and no name was given twice (gradio would have suffixed one)."""
    import app

    demo = app.build_app(tmp_path / "ws")
    names = [fn.api_name for fn in demo.fns.values()]
    public = {fn.api_name for fn in demo.fns.values() if fn.api_visibility == "public"}
    assert public == PUBLIC
    assert len(names) == len(set(names)) and not [n for n in names if n[-2:] in {f"_{i}" for i in range(1, 10)}]

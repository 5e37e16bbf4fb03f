"""Headless Chromium helpers shared by the app's browser tests: the browser's path and flags (ENVIRONMENT.md),
screenshots (to test-artifacts/app/, and with WORKBENCH_UPDATE_SCREENSHOTS=1 to docs/screenshots/ for the docs),
picking a dropdown option and finding a field by its elem_id."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts" / "app"
NEEDS_CHROMIUM = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                    reason=f"no Chromium at {CHROMIUM} (make setup-browser)")


def shot(page: Any, name: str, *, full_page: bool = True, folder: Path | None = None) -> Path:
    """Screenshot the page into `folder` (default test-artifacts/app/; at most 300 kB: the docs carry them);
    returns its path."""
    folder = folder or ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    assert path.stat().st_size < 300_000, f"{path} is too large for the docs"
    if os.environ.get("WORKBENCH_UPDATE_SCREENSHOTS") == "1":
        docs = REPO / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, docs / path.name)
    return path


def pick(page: Any, elem_id: str, text: str, *, exact: bool = False) -> None:
    """Open the dropdown `#elem_id` and click its first option containing `text` (named `text`, if exact)."""
    page.locator(f"#{elem_id} input").click()
    options = page.get_by_role("option")
    (page.get_by_role("option", name=text, exact=True) if exact else options.filter(has_text=text)).first.click()


def field(page: Any, elem_id: str) -> Any:
    """The text input or textarea of the component `#elem_id`."""
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first

"""The app shows Chinese text as written, in headless Chromium: runs of the Chinese world compared,
a probe opened, its question and answers checked in the page and drawn with real glyphs (not the empty
boxes Chromium draws when no CJK font is installed: `make setup-browser` installs fonts-noto-cjk and
fonts-thai-tlwg). Screenshots go to test-artifacts/app/cjk-*.png."""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from procs import free_port

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "app"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (make setup-browser)"),
]

# Draws `s` on a canvas in the font of `sel` and returns its pixels, so two strings can be compared.
# Without a font for a script, Chromium draws every character as the same empty box.
_PIXELS = """([sel, s]) => {
  const font = getComputedStyle(document.querySelector(sel)).fontFamily;
  const c = document.createElement('canvas'); c.width = 240; c.height = 60;
  const x = c.getContext('2d'); x.font = `32px ${font}`; x.fillText(s, 4, 44);
  return Array.from(x.getImageData(0, 0, 240, 60).data).join(',');
}"""


@dataclasses.dataclass(frozen=True)
class Served:
    url: str
    baseline: str
    candidate: str
    question: str
    answer: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    import app
    from evals.world import TEST_CONFIG, build_world
    from workbench.probes import resolve_probes
    from workbench.runner import EvalOptions, run_eval
    from workbench.store import Store
    from workbench.types import ModelSpec

    root = tmp_path_factory.mktemp("app-cjk")
    world = build_world(root / "world", dataclasses.replace(TEST_CONFIG, entities=8, lang="zh", steps=60))
    ws = root / "ws"
    store = Store.open(ws)
    suite, loaded = resolve_probes(str(world.suite))
    spec = ModelSpec(model=str(world.model), dtype="float32")
    opts = EvalOptions(samples=2, paraphrases=True, bootstrap=50)
    base = run_eval(store, spec, suite, loaded, opts).run_id
    cand = run_eval(store, spec, suite, loaded, opts).run_id  # the same model: a cached rerun
    probe = loaded.probes[0]
    demo, url = app.launch(ws, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield Served(url, base, cand, probe.question, probe.answers[0])
    finally:
        demo.close()
        shutil.rmtree(ws / ".gradio", ignore_errors=True)


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _pick(page: Any, elem_id: str, text: str) -> None:
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option").filter(has_text=text).first.click()


def _has_glyphs(page: Any, sel: str, text: str, other: str) -> bool:
    """`text` draws differently from another string of as many characters and from unassigned ones."""
    mine, theirs = page.evaluate(_PIXELS, [sel, text]), page.evaluate(_PIXELS, [sel, other])
    boxes = page.evaluate(_PIXELS, [sel, "\ue000" * len(text)])
    return mine != theirs and mine != boxes


def test_chinese_probes_render_in_the_app(served: Served) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(served.url)
            page.get_by_role("tab", name="Runs").click()
            page.locator("#runs-table [role=gridcell]").filter(has_text="world-zh").first.wait_for()
            page.get_by_role("tab", name="Compare").click()
            _pick(page, "baseline", served.baseline)
            _pick(page, "candidate", served.candidate)
            page.locator("#transition input").click()  # exactly `all`, not `broken_hallucinates`, which contains it
            page.get_by_role("option", name="all", exact=True).click()
            page.locator("#compare-btn").click()
            page.wait_for_selector("#compare-summary #wb-verdict")
            # The probes table shows each model's answers: the tiny world answers in Chinese characters.
            han = re.compile("[\u4e00-\u9fff]")
            page.locator("#probes-table [role=gridcell]").filter(has_text=han).first.wait_for()
            _shot(page, "cjk-compare")
            assert _has_glyphs(page, "#probes-table", "巴黎圣母院", "罗马斗兽场")
            for sample in ("臺灣玉山", "フランス", "도쿄서울", "กรุงเทพ"):  # traditional, kana, Hangul, Thai
                assert _has_glyphs(page, "#probes-table", sample, "\u4e00\u4e8c\u4e09\u56db"), sample

            page.locator("#probes-table [role=gridcell].first-column").first.click()
            page.wait_for_selector("#probe-detail #wb-probe-detail")
            detail = page.locator("#probe-detail").inner_text()
            assert served.question in detail and served.answer in detail  # as written, nothing escaped or lost
            _shot(page, "cjk-probe-detail")
        finally:
            browser.close()

"""One headless Chromium per test module, driven by Playwright, for the console's browser tests.

Per module, not per run: Playwright's sync API keeps its event loop set as the main thread's running
loop for as long as it is open, and every pytest-asyncio test after it would then fail with
"Runner.run() cannot be called from a running event loop". A launch costs about a second.

The browser is Debian's ``chromium`` (``scripts/install-system-deps.sh test`` installs it); Playwright
never downloads one of its own. Screenshots go to ``test-artifacts/console/`` at the repository root
(gitignored), kept after the run for a person to look at.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    pytest.importorskip("playwright", reason="pip install playwright (the [test] extra)")
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if executable is None:
        pytest.skip("chromium not installed (scripts/install-system-deps.sh test)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (own context: no cookies or cache shared between tests), 1280 px wide, that
    fails the test on any JavaScript error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(20_000)
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture(scope="session")
def screenshots() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS

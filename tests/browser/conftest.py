"""Real-browser fixtures: Debian's Chromium driven by Playwright against pytest-django's live server.

Playwright's sync API runs an asyncio loop in this thread, which makes Django refuse ORM calls
from it; the tests' own ORM use is synchronous and safe, so the guard is switched off — only while
a browser module runs (Playwright is started and stopped per module, and the variable must not
leak into other tests or the subprocesses they start). Screenshots go to test-results/screenshots/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORT = {"width": 1366, "height": 900}  # laptop width


def pytest_collection_modifyitems(config, items):
    """Browser tests need the system Chromium; skip them, with the reason, where it is missing."""
    if Path(CHROMIUM).exists():
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} not installed (apt-get install -y chromium; .ci/run does it)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def chromium() -> Iterator:
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport=VIEWPORT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors  # type: ignore[attr-defined]
    yield page
    context.close()


@pytest.fixture(scope="session")
def screenshot_dir(request) -> Path:
    path = Path(request.config.rootpath) / "test-results" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def shoot(page, screenshot_dir):
    """shoot("name") saves a full-page screenshot of the current page."""

    def take(name: str) -> Path:
        target = screenshot_dir / f"{name}.png"
        page.screenshot(path=str(target), full_page=True)
        return target

    return take


@pytest.fixture
def login(page, live_server):
    def log_in(username: str, password: str) -> None:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_load_state()
        assert "/accounts/login/" not in page.url, f"login as {username} failed"

    return log_in

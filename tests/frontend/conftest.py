"""Browser-app fixtures: a real headless Chromium (Debian's) driven by Playwright's sync API.

`browser_page` is a logged-in page on the live server that collects console errors and refuses
any request leaving 127.0.0.1/localhost; both are asserted when the test ends.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from access.roles import PLANNER
from tests.conftest import make_user

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LAPTOP = {"width": 1366, "height": 900}
TABLET = {"width": 820, "height": 1180}


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium per test module (never `playwright install`: Debian's binary)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM_PATH).exists():
        pytest.skip(f"{CHROMIUM_PATH} is missing (apt-get install chromium)")
    with pytest.MonkeyPatch.context() as patch:
        # Playwright's sync API runs an event loop in this thread, which trips Django's
        # async-safety check on every ORM call; set only while the browser runs, because the
        # variable would leak into subprocesses (check --deploy warns about it).
        patch.setitem(os.environ, "DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
            yield browser
            browser.close()


@dataclass
class PageProblems:
    console_errors: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)


@pytest.fixture
def page_factory(chromium, live_server) -> Iterator[Callable]:
    """New pages on the live server, guarded: console errors and non-local requests recorded."""
    contexts, problems = [], PageProblems()

    def guard(route) -> None:
        if urlsplit(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            problems.external_requests.append(route.request.url)
            route.abort()

    def console(message) -> None:
        if message.type == "error":
            problems.console_errors.append(f"{message.text} ({message.location.get('url')})")

    def new_page(viewport: dict | None = None):
        context = chromium.new_context(base_url=live_server.url, viewport=viewport or LAPTOP)
        context.set_default_timeout(10_000)
        context.route("**/*", guard)
        contexts.append(context)
        page = context.new_page()
        page.on("console", console)
        page.on("pageerror", lambda error: problems.console_errors.append(str(error)))
        return page

    new_page.problems = problems
    yield new_page
    for context in contexts:
        context.close()
    assert problems.external_requests == [], "requests left the app"
    assert problems.console_errors == [], "the browser console reported errors"


def log_in(page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


@pytest.fixture
def browser_planner(transactional_db):
    """A planner whose password the login form can use (the catalog too, lost on flushes)."""
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel

    load_catalog(AcceleratorModel)
    return make_user("browser-planner", PLANNER)


@pytest.fixture
def browser_page(page_factory, browser_planner):
    """A laptop-sized page, logged in as a planner through the login form."""
    page = page_factory()
    log_in(page, browser_planner.username, "pw-" + browser_planner.username)
    return page


@pytest.fixture
def screenshot() -> Callable:
    """Save a full-page PNG under test-artifacts/screenshots/ (git-ignored)."""
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOT_DIR / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take

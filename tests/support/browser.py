"""Driving Debian's headless Chromium through Playwright: sizes, the login form, and checks run
in the page. The fixtures (`chromium`, `page_factory`, `browser_page`, …) are in
tests/support/fixtures/browser.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LAPTOP = {"width": 1366, "height": 900}
TABLET = {"width": 820, "height": 1180}

# Checks run in the page: every form control has a label, headings never skip a level.
UNLABELLED_CONTROLS_JS = """
() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
  .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
  .map(el => el.name || el.id)
"""
HEADING_LEVELS_JS = "() => [...document.querySelectorAll('h1,h2,h3,h4')].map(h => +h.tagName[1])"


@dataclass
class PageProblems:
    console_errors: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)


def log_in(page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def assert_accessible_basics(page) -> None:
    assert page.evaluate(UNLABELLED_CONTROLS_JS) == []
    levels = page.evaluate(HEADING_LEVELS_JS)
    assert levels and levels[0] == 1 and levels.count(1) == 1, levels
    assert all(b - a <= 1 for a, b in zip(levels, levels[1:], strict=False)), levels

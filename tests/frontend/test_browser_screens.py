"""Any screen (issue 18): every page at 390 px (a phone) and 1440 px (a laptop), in the light
and the dark theme, is no wider than the viewport; the dark theme follows the system setting
for the page and its Plotly charts. Screenshots are kept under test-artifacts/screenshots/.
"""

from __future__ import annotations

import pytest

from tests.support.browser import log_in
from tests.support.demo_site import demo_pages
from tests.support.page_checks import CLIPPED_VALUES_JS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
LAPTOP_WIDE = {"width": 1440, "height": 900}
SCREENS = {"390": PHONE, "1440": LAPTOP_WIDE}
# The page's own width beyond the viewport (tables scroll in their box, never the page).
OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
BODY_BACKGROUND = "() => getComputedStyle(document.body).backgroundColor"
CHART_BACKGROUNDS = """() => [...document.querySelectorAll('.js-plotly-plot')]
  .map(div => getComputedStyle(div.querySelector('svg.main-svg')).backgroundColor)"""
# The outermost elements reaching past the viewport's right edge, to name the culprit.
WIDE_ELEMENTS = """() => [...document.querySelectorAll('main *')]
  .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
  .filter(e => !e.parentElement.closest('.table-scroll, table'))
  .slice(0, 3).map(e => e.tagName.toLowerCase() + '.' + [...e.classList].join('.'))"""
NAV_HEIGHT = "() => document.querySelector('.topbar').getBoundingClientRect().height"


def _more_pages(demo_pages: dict[str, str]) -> dict[str, str]:
    from inventory.models import Cluster, Site

    site, cluster = Site.objects.order_by("pk").first(), Cluster.objects.order_by("pk").first()
    return {
        **demo_pages,
        "Inventory": "/inventory/",
        "Sites": "/inventory/sites/",
        "Site": f"/inventory/sites/{site.pk}/",
        "Cluster": f"/inventory/clusters/{cluster.pk}/",
        "Pools": "/inventory/pools/",
        "Accelerators": "/inventory/accelerators/",
        "Usage import": "/usage/import/",
        "Inference planner": "/planner/inference/",
    }


def _darkness(rgb: str) -> float:
    """Mean of an `rgb(r, g, b)` colour's channels, 0 (black) … 255 (white)."""
    channels = [float(c) for c in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3]]
    return sum(channels) / 3


@pytest.fixture
def demo(browser_planner, django_capture_on_commit_callbacks, jobs_run_here):
    """The demo with a year of usage, computed; its pages by name (as in test_browser_walk)."""
    return demo_pages(browser_planner, django_capture_on_commit_callbacks, usage=True)


@pytest.fixture
def phone_page(page_factory, browser_planner):
    """A phone-sized page, logged in through the form (before the demo data is loaded)."""
    page = page_factory(PHONE)
    log_in(page, browser_planner.username, "pw-" + browser_planner.username)
    return page


@pytest.mark.timeout(600)  # ~45 pages with full-page screenshots per theme
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_fits_the_screen_in_both_themes(
    phone_page,
    demo,
    screenshot,
    scheme,
):
    pages = _more_pages(demo)
    problems: list[str] = []
    page = phone_page
    page.set_default_navigation_timeout(30_000)  # the planner pages compute on a busy machine
    page.emulate_media(color_scheme=scheme)
    for label, viewport in SCREENS.items():
        page.set_viewport_size(viewport)
        for name, path in pages.items():
            response = page.goto(path)
            assert response.status == 200, (name, path, response.status)
            page.wait_for_load_state("networkidle")
            screenshot(page, f"{scheme}-{label}-{name.lower().replace(' ', '-')}")
            for clipped in page.evaluate(CLIPPED_VALUES_JS):
                problems.append(f"{name} at {label} px ({scheme}): clipped {clipped}")
            overflow = page.evaluate(OVERFLOW)
            if overflow > 0:
                wide = ", ".join(page.evaluate(WIDE_ELEMENTS))
                problems.append(f"{name} at {label} px ({scheme}): {overflow} px wider ({wide})")
            background = _darkness(page.evaluate(BODY_BACKGROUND))
            # The print page is paper: light in both themes.
            if name != "Print page" and (scheme == "dark") != (background < 128):
                problems.append(f"{name} ({scheme}): page background {background:.0f}/255")
            for chart in page.evaluate(CHART_BACKGROUNDS):
                if chart and (scheme == "dark") != (_darkness(chart) < 128):
                    problems.append(f"{name} ({scheme}): a chart's background is {chart}")
        # On a phone the navigation folds into one row behind a menu button, not four rows.
        if label == "390" and page.evaluate(NAV_HEIGHT) >= 80:
            problems.append(f"the navigation is {page.evaluate(NAV_HEIGHT):.0f} px high")
    assert not problems, "\n".join(problems)


def test_the_menu_opens_on_a_phone(phone_page):
    page = phone_page
    page.goto("/")
    costs = page.get_by_role("link", name="Costs", exact=True)
    assert not costs.is_visible()
    page.get_by_role("button", name="Menu").click()
    costs.click()
    page.wait_for_url("**/costs/**")


def test_the_favicon_is_served_without_login(client):
    response = client.get("/favicon.ico", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[0][0].endswith("favicon.svg")

"""The planner in a real headless Chromium, computed by a real Celery worker.

A planner creates a plan through the form, the progress bar follows the worker to the result,
the scatter and the tornado render as SVG, and a what-if slider (moved with the keyboard)
changes the days through the training estimate endpoint.
"""

from __future__ import annotations

import re

import pytest

from planner.models import Plan
from tests.support.browser import TABLET, assert_accessible_basics, log_in

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WORKER_TIMEOUT_MS = 90_000


@pytest.fixture
def demo(celery_worker, browser_planner):
    from inventory.services import load_demo_fleet

    load_demo_fleet()


def _days(page) -> float:
    return float(page.locator('[data-result="days"]').inner_text().replace(",", ""))


def test_create_a_plan_watch_it_compute_and_play_what_if(
    browser_page, demo, screenshot, page_factory, browser_planner
):
    page = browser_page
    page.goto("/planner/")
    assert page.get_by_role("heading", level=1).inner_text() == "Capacity planner"
    assert_accessible_basics(page)
    # Fixed degrees and deadlines only show when chosen.
    assert page.get_by_label("Tensor parallel (TP)").is_hidden()
    assert page.get_by_label("Deadlines (days)").is_hidden()

    page.get_by_label(re.compile(r"^Name\b")).fill("GPT-3 in the browser")
    page.get_by_label("Parameters (billions)").fill("175")
    page.get_by_label("Training tokens (billions)").fill("300")
    page.get_by_label("FLOPs per parameter and token (k)").select_option("8")
    page.get_by_label("A100 SXM4 80GB", exact=True).check()
    page.get_by_label("H100 SXM5 80GB", exact=True).check()
    page.get_by_label("Card counts").fill("512, 1024, 2048")
    page.get_by_label("Frankfurt DC1 (air)", exact=True).check()
    page.get_by_label(re.compile(r"mixed-a100-h100")).check()
    page.get_by_label("Liquid-cooling retrofit, one-off cost").fill("2000000")
    page.get_by_role("button", name="Create plan").click()

    page.wait_for_url(re.compile(r"/planner/\d+/$"))
    plan = Plan.objects.get(name="GPT-3 in the browser")
    assert plan.owner == browser_planner
    # The progress bar polls the plan until the worker stores the result, then reloads.
    page.wait_for_selector("#chart-planner-days-vs-cost .main-svg", timeout=WORKER_TIMEOUT_MS)
    plan.refresh_from_db()
    assert plan.status == "succeeded" and page.locator(".job-progress").count() == 0
    assert page.locator("#chart-planner-sensitivity .main-svg").count() >= 1
    # One marker per feasible option, plus the Pareto front line.
    feasible = [r for r in plan.results["options"] if r["feasible"]]
    points = page.locator("#chart-planner-days-vs-cost .scatterlayer .trace .points path")
    front = len(plan.results["pareto_front"])
    assert points.count() == len(feasible) + front
    # One Pareto front line per currency (EUR at Frankfurt, USD in the pool).
    currencies = {r["currency"] for r in feasible}
    assert currencies == {"EUR", "USD"}
    lines = page.locator("#chart-planner-days-vs-cost .scatterlayer .js-line")
    assert lines.count() == len(currencies)
    assert page.locator("table.options-table tbody tr").count() == len(plan.results["options"])
    assert "Download data:" in page.locator("#chart-planner-days-vs-cost-figure").inner_text()
    # Frankfurt prices energy in EUR, the catalog's cards cost USD, and no rate was entered:
    # the shipped ECB reference rate converts them, and the page says which rate of which day.
    frankfurt = [r for r in plan.results["options"] if r["site"] == "Frankfurt DC1 (air)"]
    assert frankfurt and all(r["currency"] == "EUR" for r in frankfurt)
    assert not [r for r in plan.results["options"] if "exchange rate" in (r["reason"] or "")]
    facts = page.locator("dl.plan-facts").inner_text()
    assert "USD→EUR 0.952835 of 2024-11-25 (ECB euro reference rate" in facts
    assert_accessible_basics(page)

    # The what-if starts at the chosen option's stored days: the cheapest of the first
    # currency (EUR), as two currencies have no single cheapest.
    first = plan.summary["by_currency"][0]
    assert first["currency"] == "EUR" and plan.summary["cheapest"] is None
    cheapest = next(
        r for r in plan.results["options"] if r["option_id"] == first["cheapest"]["option_id"]
    )
    assert _days(page) == pytest.approx(cheapest["days"], abs=0.05)
    before = _days(page)
    mfu = page.get_by_label(re.compile(r"^MFU"))
    mfu.focus()
    for _ in range(10):
        page.keyboard.press("ArrowRight")  # +0.10 MFU: fewer days
    page.wait_for_function(
        "before => Number(document.querySelector('[data-result=\"days\"]')"
        ".textContent.replace(/,/g, '')) < before - 0.05",
        arg=before,
    )
    after = _days(page)
    expected = cheapest["days"] * cheapest["mfu"] / round(round(cheapest["mfu"], 2) + 0.10, 2)
    assert after == pytest.approx(expected, rel=0.02)  # other sliders round to 0.01
    assert "What-if estimate" in page.locator("[data-whatif-note]").inner_text()
    screenshot(page, "plan-detail")

    # The list shows the plan with its best option's headline.
    page.goto("/planner/")
    row = page.locator("table.plan-list tbody tr").filter(has_text="GPT-3 in the browser")
    assert "Succeeded" in row.inner_text() and cheapest["label"] in row.inner_text()
    screenshot(page, "planner")

    # Tablet: nothing but the wide table scrolls sideways.
    tablet = page_factory(TABLET)
    log_in(tablet, browser_planner.username, "pw-" + browser_planner.username)
    tablet.goto(f"/planner/{plan.pk}/")
    tablet.wait_for_selector("#chart-planner-sensitivity .main-svg")
    assert tablet.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    screenshot(tablet, "plan-detail-tablet")

"""The shared what-if script (whatif.js) drives the plan page's panel too: no worker needed,
the plan is computed in this process before the browser opens it."""

from __future__ import annotations

import pytest

from tests.support.builders import plan_payload
from tests.support.inline import run_plan_inline

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_plan_what_if_recomputes_through_the_shared_script(
    browser_page, browser_planner, jobs_run_here
):
    from inventory.services import load_demo_fleet
    from planner import plans

    load_demo_fleet()
    plan = plans.create_plan(owner=browser_planner, **plan_payload())
    run_plan_inline(plan.pk)
    page = browser_page
    page.goto(f"/planner/{plan.pk}/")
    days = page.locator('[data-result="days"]')
    before = days.inner_text()
    cards = page.get_by_label("Cards", exact=True)
    cards.fill("0")
    cards.dispatch_event("input")
    note = page.locator("[data-whatif-note]")
    page.wait_for_function("el => el.textContent.includes('at least 1')", arg=note.element_handle())
    cards.fill("4096")
    cards.dispatch_event("input")
    page.wait_for_function(
        "el => el.textContent.startsWith('What-if estimate')", arg=note.element_handle()
    )
    assert days.inner_text() != before

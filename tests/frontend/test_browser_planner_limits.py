"""The planner's limits in a real headless Chromium (issue: the what-if printed raw JSON and
kept stale numbers; the plan form accepted what the what-if refused; the options table hid
its "Choose" column off-screen at 1440 px). The plan is computed in this process.
"""

from __future__ import annotations

import pytest

from engine.limits import limit
from tests.support.builders import plan_payload
from tests.support.inline import run_plan_inline

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1440, "height": 900}
TOO_MANY_CARDS = "99999999"


@pytest.fixture
def plan(browser_planner, jobs_run_here):
    from inventory.services import load_demo_fleet
    from planner import plans

    load_demo_fleet()
    plan = plans.create_plan(owner=browser_planner, **plan_payload())
    run_plan_inline(plan.pk)
    return plan


def test_what_if_refusal_in_words_next_to_the_field_and_no_stale_numbers(
    browser_page, plan, page_factory
):
    page = browser_page
    page.goto(f"/planner/{plan.pk}/")
    days = page.locator('[data-result="days"]')
    assert days.inner_text() != "—"
    cards = page.get_by_label("Cards", exact=True)
    cards.fill(TOO_MANY_CARDS)
    cards.dispatch_event("input")
    note = page.locator("[data-whatif-note]")
    refused = "el => el.textContent.startsWith('Not computed')"
    page.wait_for_function(refused, arg=note.element_handle())
    message = limit("cards").message
    assert page.locator("#whatif-error-cards").inner_text() == message
    assert cards.get_attribute("aria-invalid") == "true"
    assert note.inner_text() == f"Not computed. Cards: {message}"
    assert "{" not in note.inner_text()  # words, not the API's JSON
    for name in ("days", "card_hours", "energy", "cost"):
        assert page.locator(f'[data-result="{name}"]').inner_text() == "—"
    # The browser logs the API's 400 itself; that is the only console error expected.
    errors = page_factory.problems.console_errors
    assert len(errors) == 1 and "400" in errors[0]
    errors.clear()
    # A good value again: the message goes and the numbers come back.
    cards.fill("4096")
    cards.dispatch_event("input")
    page.wait_for_function("el => el.textContent.startsWith('What-if')", arg=note.element_handle())
    assert page.locator("#whatif-error-cards").count() == 0
    assert days.inner_text() != "—"


def test_plan_form_refuses_what_the_what_if_refuses(browser_page):
    page = browser_page
    page.goto("/planner/")
    page.get_by_label("Parameters (billions)").fill("1e9")
    page.get_by_label("Training tokens (billions)").fill("300")
    page.get_by_label("H100 SXM5 80GB", exact=True).check()
    page.get_by_label("Card counts").fill(f"512, {TOO_MANY_CARDS}")
    page.get_by_role("button", name="Create plan").click()
    page.wait_for_selector(".error-summary")
    params = page.locator("#id_params_billions_error").inner_text()
    assert "from 1e-09 to 100000 billion parameters" in params
    assert limit("cards").message in page.locator("#id_cards_error").inner_text()
    assert TOO_MANY_CARDS in page.locator("#id_cards_error").inner_text()


def test_options_table_keeps_choose_visible_at_1440(page_factory, browser_planner, plan):
    from tests.support.browser import log_in

    page = page_factory(DESKTOP)
    log_in(page, browser_planner.username, "pw-" + browser_planner.username)
    page.goto(f"/planner/{plan.pk}/")
    page_width = page.evaluate("document.documentElement.scrollWidth")
    assert page_width <= DESKTOP["width"]  # the page itself never scrolls sideways
    box = page.locator(".table-scroll:has(table.options-table)")
    table_width = page.evaluate("el => el.scrollWidth", box.element_handle())
    assert table_width > box.bounding_box()["width"]  # wide: it scrolls inside its box
    choose = page.locator("table.options-table tbody tr").nth(1).get_by_role("link", name="Choose")
    place = choose.bounding_box()
    assert place is not None and place["x"] >= 0 and place["x"] + place["width"] <= DESKTOP["width"]

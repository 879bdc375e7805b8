"""Issue 31, "Forms", in a real browser: after a refused submit the focus is on the error
summary (and it is on screen); Tab goes from the PUE to the tariff in two presses; revoking a
spreadsheet link asks first, and Cancel keeps it."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FOCUSED = "() => document.activeElement.className || document.activeElement.name"
# The summary's box against the viewport: on screen when part of it is inside the window.
SUMMARY_ON_SCREEN = """() => { const box = document.querySelector('.error-summary')
  .getBoundingClientRect(); return box.bottom > 0 && box.top < window.innerHeight; }"""


def test_a_refused_site_focuses_its_errors_and_tab_runs_down_the_form(browser_page):
    page = browser_page
    page.goto("/inventory/sites/new/")
    page.get_by_label("Name").fill("Oslo DC3")
    page.get_by_label("Measured PUE").fill("1.2")
    with page.expect_navigation():  # to the refused form's page, loaded: app.js has run
        page.get_by_role("button", name="Save").click()
    assert page.evaluate(FOCUSED) == "error-summary"
    assert page.evaluate(SUMMARY_ON_SCREEN)
    summary = page.locator(".error-summary").inner_text()
    assert "3 problems" in summary and "Electricity tariff per kWh" in summary
    # Its link leads to the field; from the PUE, Tab reaches the tariff in two presses.
    page.get_by_label("Measured PUE").focus()
    pressed = []
    for _ in range(2):
        page.keyboard.press("Tab")
        pressed.append(page.evaluate(FOCUSED))
    assert pressed == ["pue_confirmed", "tariff_per_kwh"]
    page.keyboard.type("0.11")
    for _ in range(2):
        page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED) == "currency"
    page.keyboard.type("EUR")
    page.get_by_label("Carbon intensity unknown").check()
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(r"/inventory/sites/\d+/$"))
    assert "0.11 EUR per kWh" in page.inner_text("main")


def test_revoking_a_link_asks_and_cancel_keeps_it(browser_page, browser_planner):
    from exports import services

    token, _ = services.create_token(
        owner=browser_planner, name="Sites sheet", url="/api/v1/sites/", fmt="csv"
    )
    page = browser_page
    page.goto("/spreadsheet-links/")
    page.get_by_role("link", name="Revoke Sites sheet").click()
    page.wait_for_url(f"**/spreadsheet-links/{token.pk}/revoke/")
    assert "410 Gone" in page.inner_text("main")
    page.get_by_role("link", name="Cancel: keep it").click()
    page.wait_for_url("**/spreadsheet-links/")
    assert "active" in page.locator("tr", has_text="Sites sheet").inner_text()
    page.get_by_role("link", name="Revoke Sites sheet").click()
    page.get_by_role("button", name="Revoke the link").click()
    page.wait_for_selector(".message-success")
    assert "revoked" in page.locator("tr", has_text="Sites sheet").inner_text()


def test_a_refused_plan_focuses_its_errors_at_the_foot_of_the_page(browser_page):
    page = browser_page
    page.goto("/planner/")
    page.get_by_label("Utilization (% of calendar time)").fill("150")
    with page.expect_navigation():  # to the refused form's page, loaded: app.js has run
        page.get_by_role("button", name="Create plan").click()
    assert page.evaluate(FOCUSED) == "error-summary"
    assert page.evaluate(SUMMARY_ON_SCREEN)  # scrolled down to it: the form is below the lists
    assert "Utilization (% of calendar time): " in page.locator(".error-summary").inner_text()


# A pool analysis's money tiles (frontend/dashboards/money_by_currency.html) with the note the
# demo's pools carry, and a table wider than a phone: laid out by the app's own CSS.
TILES_AND_TABLE = """() => { document.querySelector('main').innerHTML = `
<dl class="stats">
  <div><dt>Effective compute</dt><dd>10,331 <span class="unit">PFLOP-days</span></dd></div>
  <div><dt>Cost this period</dt><dd>1,508,350 <span class="unit">USD</span></dd></div>
  <div><dt>Money lost this period</dt><dd><span class="money-line">1,109,104
    <span class="unit">USD</span></span><span class="hint money-note">Modeled: no usage
    measured in this scope and period; the losses rest on planned utilization and modeled or
    default factors.</span></dd></div>
  <div><dt>Lost most to</dt><dd>MFU <span class="unit">516,397 USD</span></dd></div>
</dl>
<div class="table-scroll" id="wide"><table><tr>${'<td>1,234,567 EUR</td>'.repeat(12)}</tr>
</table></div>`; }"""
MEASURE = """() => { const note = document.querySelector('.money-note');
  const figure = note.closest('dd'); const wide = document.getElementById('wide');
  return { row_px: note.closest('div').getBoundingClientRect().height,
    note_px: parseFloat(getComputedStyle(note).fontSize),
    figure_px: parseFloat(getComputedStyle(figure).fontSize),
    page_overflow_px: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    box_scrolls: wide.scrollWidth > wide.clientWidth }; }"""


@pytest.mark.parametrize("width", [390, 1440])
def test_a_tile_note_reads_as_a_note_and_a_wide_table_scrolls_in_its_box(browser_page, width):
    """The issue's pool tiles were a 430 px row at 1,440 px: the note in the figure's font."""
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/inventory/")
    page.evaluate(TILES_AND_TABLE)
    measured = page.evaluate(MEASURE)
    assert measured["note_px"] < 0.7 * measured["figure_px"], measured
    assert measured["row_px"] < 200, measured
    # The page never scrolls sideways; on a phone the table scrolls inside its box instead.
    assert measured["page_overflow_px"] == 0
    assert measured["box_scrolls"] or width > 390

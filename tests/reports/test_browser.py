"""The report pages, the print page and the e-mail HTML render in Chromium without errors."""

from __future__ import annotations

import base64
from email import message_from_bytes

import pytest

from reports import periods, services
from reports.models import ReportSchedule
from tests.support.browser import log_in
from tests.support.builders import APR, MAR, mailbox

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

IMAGES_LOADED = "[...document.images].every(img => img.complete && img.naturalWidth > 0)"


@pytest.fixture
def delivered(report_fleet, browser_planner):
    mailbox("leadership@example.com")  # the list's account: a fleet report may go to it
    schedule = services.save_schedule(
        ReportSchedule(
            name="Fleet quarterly review",
            frequency="monthly",
            template="efficiency_review",
            recipient_addresses=["leadership@example.com"],
            formats=["html_email", "xlsx", "csv", "print_html"],
        )
    )
    report, _ = services.get_or_create_report(schedule, periods.Period(MAR, APR))
    services.generate(report.pk)
    services.deliver(report.pk)
    report.refresh_from_db()
    return schedule, report


def test_report_pages_and_print_page_render_cleanly(
    page_factory, browser_planner, delivered, screenshot
):
    schedule, report = delivered
    page = page_factory()
    log_in(page, browser_planner.username, "pw-" + browser_planner.username)
    for name, url in {
        "reports-archive": "/reports/",
        "report-detail": f"/reports/{report.pk}/",
        "report-print": f"/reports/{report.pk}/view/",
        "report-schedules": "/reports/schedules/",
        "report-schedule": f"/reports/schedules/{schedule.pk}/",
        "report-run": f"/reports/schedules/{schedule.pk}/run/",
    }.items():
        response = page.goto(url)
        assert response.status == 200, url
        assert page.locator("h1").count() >= 1, url
        screenshot(page, name)
    page.goto(f"/reports/{report.pk}/view/")
    assert page.evaluate("document.images.length") == 4
    assert page.evaluate(IMAGES_LOADED)
    # Print layout: no horizontal overflow on A4 portrait width.
    page.emulate_media(media="print")
    page.set_viewport_size({"width": 794, "height": 1123})
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0


def test_email_html_renders_with_its_inline_charts(page_factory, delivered):
    from django.core import mail

    message = message_from_bytes(mail.outbox[-1].message().as_bytes())
    images = {
        part["Content-ID"].strip("<>"): part.get_payload(decode=True)
        for part in message.walk()
        if part.get_content_type() == "image/png"
    }
    html = next(
        part.get_payload(decode=True).decode()
        for part in message.walk()
        if part.get_content_type() == "text/html" and not part.get_filename()
    )
    # Resolve cid: references as a mail client does.
    for cid, png in images.items():
        html = html.replace(f"cid:{cid}", "data:image/png;base64," + base64.b64encode(png).decode())
    assert "cid:" not in html
    page = page_factory()
    page.set_content(html)
    assert page.evaluate("document.images.length") == len(images) == 4
    assert page.evaluate(IMAGES_LOADED)
    assert page.locator("h1").inner_text() == "Fleet quarterly review"

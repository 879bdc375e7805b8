"""Alerts in a real Chromium (issue #18): a rule made on the page fires once for a crossed
threshold, stays one alert while the figure stays crossed, clears, and fires once more only
after it crosses again; the alert is acknowledged on the page. Evaluation runs as the worker's
hourly task does (`alerts.services.evaluate_all`); the e-mail path is tested with a real worker
and SMTP server in tests/alerts."""

from __future__ import annotations

import pytest

from tests.support.builders import stored_fleet_analysis

pytestmark = pytest.mark.django_db(transaction=True)


def section_rows(page, heading: str) -> list[str]:
    """The row headers of the table under an <h2> (empty when the section says "No …")."""
    return page.evaluate(
        """(heading) => {
            const h2 = [...document.querySelectorAll('h2')].find(h => h.textContent === heading);
            const box = h2.nextElementSibling;
            return box.matches('.table-scroll')
                ? [...box.querySelectorAll('tbody th')].map(th => th.textContent.trim()) : [];
        }""",
        heading,
    )


def evaluate_and_reload(page) -> None:
    from alerts import services

    services.evaluate_all()
    page.reload()


def test_an_alert_fires_once_per_crossing_and_is_acknowledged(browser_page, browser_planner):
    from alerts.models import AlertEvent

    analysis = stored_fleet_analysis(mfu=0.30)
    page = browser_page
    page.goto("/alerts/")
    page.get_by_label("Name (required)").fill("Fleet MFU watch")
    page.get_by_label("Metric (required)").select_option("mfu")
    page.get_by_label("Scope (required)").select_option("fleet")
    page.get_by_label("Direction (required)").select_option("below")
    page.get_by_label("Threshold (required)").fill("0.4")
    page.get_by_role("button", name="Save and evaluate").click()
    page.wait_for_selector("text=Fleet MFU watch")
    fired = section_rows(page, "Active")
    assert len(fired) == 1 and "30.0%" in fired[0], fired
    # Still below the threshold: still one alert, no second event.
    evaluate_and_reload(page)
    assert section_rows(page, "Active") == fired
    assert AlertEvent.objects.count() == 1
    # Cleared: the alert moves to "Cleared".
    analysis.results = {"summary": {"mfu": 0.55}}
    analysis.save()
    evaluate_and_reload(page)
    assert section_rows(page, "Active") == []
    assert section_rows(page, "Cleared") == fired
    # Crossed again: one more alert.
    analysis.results = {"summary": {"mfu": 0.25}}
    analysis.save()
    evaluate_and_reload(page)
    again = section_rows(page, "Active")
    assert len(again) == 1 and "25.0%" in again[0], again
    assert AlertEvent.objects.count() == 2
    page.get_by_role("button", name="Acknowledge").click()
    page.wait_for_selector(f"text=by {browser_planner.username}")
    assert page.get_by_role("button", name="Acknowledge").count() == 0
    assert AlertEvent.objects.filter(acknowledged_at__isnull=False).count() == 1

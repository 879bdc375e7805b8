"""Usage import in a real headless Chromium with a real Celery worker: upload a sacct file
through the form, watch the progress bar follow the worker to "Done", read the records
written; a bad file on a tablet ends with its bad line on the page. Screenshot "usage-import".

The worker thread is held at a gate before it parses the file, so the page is certainly
showing the live bar (not an already finished job) when the test looks at it.
"""

from __future__ import annotations

import re
import threading

import pytest
from django.db.models import Sum

from accounting import services
from accounting.models import ImportJob, UsageRecord
from tests.support.alpha_usage import SACCT_LINES, sacct_text
from tests.support.browser import TABLET, assert_accessible_basics, log_in

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WORKER_TIMEOUT_MS = 60_000
# Keeps every text the progress bar shows, across the reload it does when the job ends.
RECORD_PROGRESS_JS = """
() => {
  const text = document.querySelector('.job-progress-text');
  const seen = () => JSON.parse(sessionStorage.getItem('progress-texts') || '[]');
  new MutationObserver(() => sessionStorage.setItem(
    'progress-texts', JSON.stringify([...seen(), text.textContent]))
  ).observe(text, {childList: true, characterData: true, subtree: true});
}
"""


@pytest.fixture
def gate(celery_worker, monkeypatch):
    """The worker waits here (inside its run) until the test opens the gate."""
    opened = threading.Event()
    original = services.import_file

    def held(*args, **kwargs):
        opened.wait(timeout=WORKER_TIMEOUT_MS / 1000)
        return original(*args, **kwargs)

    monkeypatch.setattr(services, "import_file", held)
    yield opened
    opened.set()  # never leave the shared worker thread waiting


def upload_through_the_form(page, text: str, name: str, screenshot=None) -> int:
    page.goto("/usage/")
    page.get_by_role("link", name="Import usage").click()
    page.wait_for_url(re.compile(r"/usage/import/$"))
    assert page.get_by_role("heading", level=1).inner_text() == "Import usage"
    assert_accessible_basics(page)
    page.get_by_label("Target cluster").select_option(label="Test DC / alpha")
    page.get_by_label("File kind").select_option("sacct")
    page.get_by_label(re.compile(r"^Usage file")).set_input_files(
        files=[{"name": name, "mimeType": "text/plain", "buffer": text.encode()}]
    )
    if screenshot is not None:
        screenshot(page, "usage-import-form")
    page.get_by_role("button", name="Import").click()
    page.wait_for_url(re.compile(r"/usage/import/\d+/$"))
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def test_upload_a_sacct_file_and_watch_the_import_finish(
    browser_page, alpha, gate, screenshot, browser_planner
):
    page = browser_page
    job_id = upload_through_the_form(page, sacct_text(), "march-sacct.txt", screenshot)
    job = ImportJob.objects.get(pk=job_id)
    assert (job.cluster, job.created_by, job.source_name) == (
        alpha,
        browser_planner,
        "march-sacct.txt",
    )

    # Live: the worker holds the job, the bar polls the API.
    bar = page.locator(".job-progress[data-poll-url] progress")
    bar.wait_for()
    page.wait_for_function(
        "() => /^(Queued|Running) · \\d+ %$/.test("
        "document.querySelector('.job-progress-text').textContent)"
    )
    assert UsageRecord.objects.count() == 0
    page.evaluate(RECORD_PROGRESS_JS)
    gate.set()

    # Done: the bar reaches 100 %, says so, and the page reloads with the result.
    page.locator('[data-result="records-written"]').wait_for(timeout=WORKER_TIMEOUT_MS)
    seen = page.evaluate("() => JSON.parse(sessionStorage.getItem('progress-texts') || '[]')")
    assert "Done · 100 %" in seen
    assert page.locator(".job-progress-text").inner_text() == "Done · 100 %"
    assert page.locator(".job-progress progress").get_attribute("value") == "100"

    job.refresh_from_db()
    assert job.status == "succeeded"
    stored = UsageRecord.objects.filter(cluster=alpha)
    # Three GPU jobs in the file (steps, the pending and the CPU job are skipped).
    assert stored.count() == 3
    assert stored.aggregate(total=Sum("card_hours"))["total"] == pytest.approx(48 + 48 + 16)
    assert page.locator('[data-result="records-written"]').inner_text() == "3"
    assert page.locator('[data-result="records-skipped"]').inner_text() == "2"
    assert page.locator(".usage-import-facts .status").inner_text() == "Succeeded"
    assert_accessible_basics(page)
    screenshot(page, "usage-import")

    # The list shows it, newest first, linking back to the job.
    page.goto("/usage/imports/")
    first = page.locator("table.usage-imports tbody tr").first
    assert "march-sacct.txt" in first.inner_text() and "Succeeded" in first.inner_text()
    assert_accessible_basics(page)
    screenshot(page, "usage-imports")
    first.get_by_role("link").click()
    page.wait_for_url(re.compile(rf"/usage/import/{job_id}/$"))
    page.get_by_role("link", name="Usage dashboard", exact=True).click()
    page.wait_for_url(re.compile(rf"/usage/\?cluster={alpha.pk}$"))


def test_a_bad_file_on_a_tablet_shows_its_bad_line(
    page_factory, alpha, gate, browser_planner, screenshot
):
    page = page_factory(TABLET)
    log_in(page, browser_planner.username, "pw-" + browser_planner.username)
    bad = sacct_text([SACCT_LINES[3], SACCT_LINES[0].replace("|1|", "|x|")])
    upload_through_the_form(page, bad, "bad-sacct.txt")
    page.locator(".job-progress[data-poll-url]").wait_for()
    gate.set()
    # The failure reloads the page: the bad line, by line and column, and a retry button.
    alert = page.get_by_role("alert")
    alert.wait_for(timeout=WORKER_TIMEOUT_MS)
    assert "Nothing from this file was stored" in alert.inner_text()
    row = page.locator("table.import-issues tbody tr").first
    cells = row.locator("td").all_inner_texts()
    assert cells[:2] == ["3", "NNodes"]
    assert page.get_by_role("button", name="Retry import").is_visible()
    assert UsageRecord.objects.count() == 0
    assert page.evaluate("() => document.documentElement.scrollWidth") <= TABLET["width"]
    assert_accessible_basics(page)
    screenshot(page, "usage-import-failed-tablet")

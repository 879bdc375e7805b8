"""Background XLSX exports run on a real Celery worker: progress, a typed file, owner-only."""

from __future__ import annotations

import pytest

from tests.support.polling import wait_for_status
from tests.support.tabular import assert_xlsx_equals_json, flat_rows, xlsx_rows

pytestmark = pytest.mark.worker


@pytest.fixture
def usage(alpha, import_text):
    """Only what the jobs read: three usage records (no analysis or plan writes racing)."""
    from tests.support.alpha_usage import sacct_text

    import_text(alpha, sacct_text())
    return alpha


JOBS = "/api/v1/export-jobs/"


def _wait(client, job_id: int, timeout_s: float = 60) -> dict:
    fetch = lambda: client.get(f"{JOBS}{job_id}/").json()  # noqa: E731
    return wait_for_status(fetch, f"export job {job_id}", timeout_s=timeout_s)


def test_a_big_xlsx_is_built_by_the_worker_and_downloaded(
    celery_worker, client_for, viewer, planner, usage, settings
):
    settings.EXPORT_XLSX_MAX_ROWS = 1
    client = client_for(viewer)
    url = "/api/v1/usage-records/?ordering=job_id&fields=job_id,cards,start,team"
    assert client.get(f"{url}&format=xlsx").status_code == 413
    queued = client.post(JOBS, {"url": url}, format="json")
    assert queued.status_code == 202, queued.content
    job = _wait(client, queued.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    assert (job["progress"], job["rows_total"], job["rows_written"]) == (100, 3, 3)

    download = client.get(job["download_url"])
    assert download.status_code == 200
    rows, book = xlsx_rows(b"".join(download.streaming_content))
    assert_xlsx_equals_json(rows, flat_rows(client.get(url).json()))
    assert book.worksheets[0].freeze_panes == "A2" and "About" in book.sheetnames

    # Jobs are private to their owner.
    assert client_for(planner).get(f"{JOBS}{job['id']}/").status_code == 404
    assert client_for(planner).get(job["download_url"]).status_code == 404
    assert client_for(None).get(job["download_url"]).status_code == 401


def test_a_job_fails_with_the_reason_and_roleless_users_cannot_start_one(
    celery_worker, client_for, no_role_user, viewer, usage
):
    client = client_for(viewer)
    queued = client.post(JOBS, {"url": "/api/v1/accounting/costs/rows/?start=soon"}, format="json")
    job = _wait(client, queued.json()["id"])
    assert job["status"] == "failed" and "400" in job["error"] and job["download_url"] is None
    assert client.get(f"{JOBS}{job['id']}/download/").status_code == 404
    refused = client_for(no_role_user).post(JOBS, {"url": "/api/v1/sites/"}, format="json")
    assert refused.status_code == 403

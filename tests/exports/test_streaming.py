"""Whole-table CSV streams in chunks with a constant number of queries, carries an ETag that
turns a refresh of unchanged data into 304, and big XLSX requests are sent to export jobs."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support.tabular import csv_rows


@pytest.mark.django_db
def test_usage_records_csv_streams_with_constant_queries(client_for, viewer, fleet, settings):
    client = client_for(viewer)
    with CaptureQueriesContext(connection) as few:
        response = client.get("/api/v1/usage-records/", {"format": "csv"})
        body = b"".join(response.streaming_content)
    assert response.streaming and response["X-Export-Rows"] == "3"
    assert len(csv_rows(body)) == 3

    from accounting.models import UsageRecord

    first = UsageRecord.objects.first()
    copies = []
    for number in range(200):
        first.pk = None
        first.record_key = f"copy-{number}"
        copies.append(
            UsageRecord(
                **{f.attname: getattr(first, f.attname) for f in first._meta.concrete_fields}
            )
        )
    UsageRecord.objects.bulk_create(copies)
    with CaptureQueriesContext(connection) as many:
        response = client.get("/api/v1/usage-records/", {"format": "csv"})
        body = b"".join(response.streaming_content)
    assert len(csv_rows(body)) == 203
    # Session, role and the version aggregate, then one values_list: no query per row.
    assert len(many.captured_queries) == len(few.captured_queries)


@pytest.mark.django_db
def test_streamed_csv_etag_gives_304_until_the_rows_change(client_for, viewer, fleet, import_text):
    from tests.support.alpha_usage import sacct_text

    client = client_for(viewer)
    url = "/api/v1/usage-records/?format=csv&team=team-a"
    first = client.get(url)
    etag = first["ETag"]
    assert etag.startswith('W/"')
    b"".join(first.streaming_content)
    again = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and not again.content
    assert client.get(url.replace("team-a", "team-b"), HTTP_IF_NONE_MATCH=etag).status_code == 200

    # A re-import that changes a record (its end moved) must change the ETag.
    changed = sacct_text().replace("2024-03-01T16:00:00|06:00:00", "2024-03-01T17:00:00|07:00:00")
    import_text(fleet.alpha, changed)
    refreshed = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert refreshed.status_code == 200 and refreshed["ETag"] != etag
    assert csv_rows(b"".join(refreshed.streaming_content))[0]["duration_h"] == "7.0"


@pytest.mark.django_db
def test_non_streamed_exports_carry_a_content_etag(client_for, viewer, fleet):
    client = client_for(viewer)
    first = client.get("/api/v1/sites/", {"format": "xlsx"})
    assert first.status_code == 200 and first["ETag"]
    again = client.get("/api/v1/sites/", {"format": "xlsx"}, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304


@pytest.mark.django_db
def test_xlsx_over_the_limit_points_to_an_export_job(client_for, viewer, fleet, settings):
    settings.EXPORT_XLSX_MAX_ROWS = 2
    response = client_for(viewer).get("/api/v1/usage-records/", {"format": "xlsx"})
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["rows"] == 3 and body["max_rows"] == 2 and "export-jobs" in body["jobs_url"]
    paged = client_for(viewer).get("/api/v1/usage-records/", {"format": "xlsx", "page_size": 2})
    assert paged.status_code == 200  # an explicit page is small enough

"""Usage import pages: the upload form (errors next to their field), the job page with its
progress and result, retry, the list of imports; imports run on a real Celery worker.

Expected numbers come from the hand-checked jobs of tests/support/alpha_usage.py: the sacct
file holds 3 GPU jobs of 48, 48 and 16 card-hours (plus 2 steps, a pending and a CPU job
that are skipped); the CSV holds 8 cards × 6 h and 4 cards × 12 h.
"""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Sum

from accounting.models import ImportJob, UsageRecord
from tests.support.alpha_usage import CSV_TEXT, SACCT_LINES, sacct_text
from tests.support.builders import make_user
from tests.support.polling import wait_for_status

IMPORT_URL = "/usage/import/"
LIST_URL = "/usage/imports/"


def detail_url(job_id: int) -> str:
    return f"/usage/import/{job_id}/"


def sacct_upload(text: str, name: str = "sacct.txt") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/plain")


def form_data(target, **fields) -> dict:
    return {"cluster": target.pk, "kind": "sacct", "timezone": "UTC", **fields}


def field_block(html: str, name: str) -> str:
    """The rendered field wrapper of one form field (label, input, errors, help)."""
    start = html.index(f'<label for="id_{name}"')
    start = html.rindex('<div class="field', 0, start)
    following = html.find('<div class="field', start + 1)
    return html[start : following if following != -1 else len(html)]


def wait_for(job_id: int, timeout_s: float = 60) -> ImportJob:
    fetch = lambda: ImportJob.objects.get(pk=job_id)  # noqa: E731
    return wait_for_status(fetch, f"import {job_id}", timeout_s=timeout_s)


# -- permissions ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_anonymous_users_go_to_the_login_page(client, alpha):
    job = ImportJob.objects.create(kind="sacct", cluster=alpha, source_name="x.txt")
    for url in (IMPORT_URL, LIST_URL, detail_url(job.pk)):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.post(f"/usage/import/{job.pk}/retry/").status_code == 302


@pytest.mark.django_db
def test_viewers_read_imports_but_cannot_import_or_retry(client, alpha, viewer):
    job = ImportJob.objects.create(
        kind="sacct", cluster=alpha, source_name="x.txt", status="failed", error="bad"
    )
    client.force_login(viewer)
    assert client.get(IMPORT_URL).status_code == 403
    posted = client.post(IMPORT_URL, {**form_data(alpha), "pasted_text": sacct_text()})
    assert posted.status_code == 403
    assert ImportJob.objects.count() == 1
    assert client.get(LIST_URL).status_code == 200
    page = client.get(detail_url(job.pk))
    assert page.status_code == 200 and "Retry import" not in page.content.decode()
    assert client.post(f"/usage/import/{job.pk}/retry/").status_code == 403
    # The Usage dashboard links the list for everyone, the import form for planners only.
    dashboard = client.get("/usage/").content.decode()
    assert 'href="/usage/imports/"' in dashboard and 'href="/usage/import/"' not in dashboard


@pytest.mark.django_db
def test_planners_see_the_labelled_form_and_the_dashboard_link(client, alpha, planner):
    client.force_login(planner)
    html = client.get(IMPORT_URL).content.decode()
    for name, label in [
        ("cluster", "Target cluster"),
        ("kind", "File kind"),
        ("file", "Usage file"),
        ("pasted_text", "Or paste the file&#x27;s text"),
        ("timezone", "Time zone of the file&#x27;s times"),
    ]:
        assert f'<label for="id_{name}">{label}' in html
    assert 'enctype="multipart/form-data"' in html
    # Every kind the accounting importer accepts, with the cluster as site / name.
    for kind in ("sacct", "sreport", "csv", "xlsx"):
        assert f'<option value="{kind}"' in html
    assert f'<option value="{alpha.pk}">Test DC / alpha</option>' in html
    assert 'href="/usage/import/"' in client.get("/usage/").content.decode()


# -- form errors ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"cluster": "", "pasted_text": "x"}, "cluster", "This field is required."),
        ({"cluster": "99999", "pasted_text": "x"}, "cluster", "Select a valid choice."),
        ({"kind": "pdf", "pasted_text": "x"}, "kind", "Select a valid choice."),
        ({}, "file", "Choose a file or paste its text."),
        ({"kind": "xlsx", "pasted_text": "a,b"}, "pasted_text", "cannot be pasted"),
        # These two come from the accounting service, mapped onto their fields.
        ({"timezone": "Mars/Olympus", "pasted_text": "x"}, "timezone", "Unknown time zone"),
        (
            {
                "pasted_text": "x",
                "report_period_start": "2024-03-02T00:00",
                "report_period_end": "2024-03-01T00:00",
            },
            "report_period_end",
            "must end after it starts",
        ),
    ],
)
def test_bad_input_is_an_error_next_to_its_field(client, alpha, planner, fields, field, message):
    client.force_login(planner)
    response = client.post(IMPORT_URL, form_data(alpha, **fields))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field] and message in errors[field][0]
    html = response.content.decode()
    block = field_block(html, field)
    assert "has-error" in block and message in block.replace("&#x27;", "'")
    # The summary at the top links to the field.
    assert re.search(
        rf'<a href="#id_{field}">[^<]*{re.escape(message)}', html.replace("&#x27;", "'")
    )
    assert ImportJob.objects.count() == 0


@pytest.mark.django_db
def test_advanced_options_open_when_one_of_them_is_wrong(client, alpha, planner):
    client.force_login(planner)
    html = client.post(
        IMPORT_URL, form_data(alpha, pasted_text="x", timezone="Nowhere/Land")
    ).content.decode()
    assert '<details class="more-options" open>' in html
    html = client.post(IMPORT_URL, form_data(alpha)).content.decode()
    assert '<details class="more-options">' in html


@pytest.mark.django_db
def test_a_file_and_pasted_text_together_are_refused(client, alpha, planner):
    client.force_login(planner)
    response = client.post(
        IMPORT_URL, form_data(alpha, file=sacct_upload(sacct_text()), pasted_text=sacct_text())
    )
    assert response.status_code == 400
    assert response.context["form"].errors == {"file": ["Choose a file or paste text, not both."]}


@pytest.mark.django_db
def test_a_file_over_the_upload_limit_is_refused_on_the_file_field(
    client, alpha, planner, settings
):
    settings.FLEETWISE_USAGE_UPLOAD_MAX_BYTES = 100
    client.force_login(planner)
    response = client.post(IMPORT_URL, form_data(alpha, file=sacct_upload(sacct_text())))
    assert response.status_code == 400
    assert "larger than the upload limit of 100 bytes" in response.context["form"].errors["file"][0]
    assert ImportJob.objects.count() == 0


@pytest.mark.django_db
def test_a_good_form_creates_the_job_through_the_service_and_shows_its_progress(
    client, alpha, planner, django_capture_on_commit_callbacks
):
    client.force_login(planner)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(
            IMPORT_URL, form_data(alpha, file=sacct_upload(sacct_text(), "march.txt"))
        )
    job = ImportJob.objects.get()
    assert response.status_code == 302 and response["Location"] == detail_url(job.pk)
    assert (job.kind, job.cluster, job.created_by, job.status) == (
        "sacct",
        alpha,
        planner,
        "queued",
    )
    assert job.source_name == "march.txt" and job.size_bytes == len(sacct_text().encode())
    assert len(callbacks) == 1  # the worker task is sent once the row is committed
    html = client.get(detail_url(job.pk)).content.decode()
    assert f'data-poll-url="/api/v1/import-jobs/{job.pk}/"' in html
    assert "frontend/progress.js" in html and "Queued" in html
    # The JSON the progress bar polls has the names it reads.
    polled = client.get(f"/api/v1/import-jobs/{job.pk}/").json()
    assert {"status", "progress", "error"} <= polled.keys()


# -- through the worker --------------------------------------------------------------------


def _import_through_the_page(client, cluster, **fields) -> ImportJob:
    response = client.post(IMPORT_URL, form_data(cluster, **fields))
    assert response.status_code == 302, response.context["form"].errors
    return wait_for(int(response["Location"].rstrip("/").rsplit("/", 1)[1]))


@pytest.mark.worker
def test_an_uploaded_sacct_file_is_imported_by_the_worker(celery_worker, alpha, planner, client):
    client.force_login(planner)
    job = _import_through_the_page(client, alpha, file=sacct_upload(sacct_text()))
    assert job.status == "succeeded", job.error
    assert (job.records_created, job.records_updated, job.records_skipped) == (3, 0, 2)
    records = UsageRecord.objects.filter(cluster=alpha)
    assert sorted(records.values_list("job_id", flat=True)) == ["1001", "1002", "1003"]
    assert records.aggregate(total=Sum("card_hours"))["total"] == pytest.approx(48 + 48 + 16)

    html = client.get(detail_url(job.pk)).content.decode()
    assert '<span class="status status-succeeded" data-status="succeeded">Succeeded</span>' in html
    assert '<dd data-result="records-written">3</dd>' in html
    assert '<dd data-result="records-skipped">2</dd>' in html
    assert "progress.js" not in html and "Done · 100 %" in html
    assert f'href="/usage/?cluster={alpha.pk}"' in html


@pytest.mark.worker
def test_pasted_csv_is_imported_by_the_worker(celery_worker, alpha, planner, client):
    client.force_login(planner)
    job = _import_through_the_page(client, alpha, kind="csv", pasted_text=CSV_TEXT)
    assert job.status == "succeeded", job.error
    assert job.source_name == "pasted.csv" and job.records_created == 2
    hours = dict(UsageRecord.objects.values_list("job_id", "card_hours"))
    assert hours == {"j-1": pytest.approx(8 * 6), "j-2": pytest.approx(4 * 12)}


@pytest.mark.worker
def test_a_bad_file_fails_with_its_line_and_column_and_stores_nothing(
    celery_worker, alpha, planner, client
):
    client.force_login(planner)
    # Line 2 is a good job; line 3 is bad, so the good one must not be stored either.
    bad = sacct_text([SACCT_LINES[3], SACCT_LINES[0].replace("COMPLETED", "EXPLODED")])
    job = _import_through_the_page(client, alpha, file=sacct_upload(bad))
    assert job.status == "failed"
    assert job.issues == ["line 3, column State: unknown state 'EXPLODED'"]
    assert UsageRecord.objects.count() == 0

    html = client.get(detail_url(job.pk)).content.decode()
    assert "Nothing from this file was stored" in html
    row = re.search(r'<tr><td class="num">3</td><td><code>State</code></td><td>([^<]*)</td>', html)
    assert row and row.group(1).replace("&#x27;", "'") == "unknown state 'EXPLODED'"
    assert "Retry import" in html

    # Retry runs the stored file again under a new run: it fails the same way.
    run_id = job.run_id
    response = client.post(f"/usage/import/{job.pk}/retry/")
    assert response.status_code == 302 and response["Location"] == detail_url(job.pk)
    retried = wait_for(job.pk)
    assert retried.run_id != run_id and retried.status == "failed"
    assert retried.issues == job.issues and UsageRecord.objects.count() == 0


# -- the list ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_list_is_newest_first_paginated_and_its_queries_are_bounded(
    client, alpha, viewer, django_assert_max_num_queries
):
    from inventory.models import Cluster

    beta = Cluster.objects.create(site=alpha.site, name="beta")
    users = [make_user(f"importer{i}", "planner") for i in range(3)]
    statuses = ["queued", "running", "succeeded", "failed"]
    ImportJob.objects.bulk_create(
        ImportJob(
            kind="sacct" if i % 2 else "csv",
            cluster=alpha if i % 3 else beta,
            source_name=f"file-{i:02d}.txt",
            status=statuses[i % 4],
            progress=40,
            records_created=i,
            records_updated=1,
            error="line 2, column State: bad" if i % 4 == 3 else "",
            created_by=users[i % 3],
        )
        for i in range(60)
    )
    client.force_login(viewer)
    with django_assert_max_num_queries(6):
        html = client.get(LIST_URL).content.decode()
    names = re.findall(r"#\d+ (file-\d\d)\.txt", html)
    # Same created second: ties go to the newer row.
    assert names[:3] == ["file-59", "file-58", "file-57"] and len(names) == 50
    assert "Page 1 of 2" in html and "Import usage" not in html
    # file-58 succeeded (58 % 4 == 2): 58 new + 1 changed records written.
    row = html[html.index("file-58.txt") :]
    row = row[: row.index("</tr>")]
    assert "status-succeeded" in row and '<td class="num">59</td>' in row
    with django_assert_max_num_queries(6):
        second = client.get(LIST_URL, {"page": 2}).content.decode()
    assert re.findall(r"#\d+ (file-\d\d)\.txt", second)[-1] == "file-00"


@pytest.mark.django_db
def test_the_job_page_reads_the_job_in_few_queries(
    client, alpha, viewer, django_assert_max_num_queries
):
    job = ImportJob.objects.create(
        kind="sacct", cluster=alpha, source_name="x.txt", status="failed", issues=["odd"]
    )
    client.force_login(viewer)
    # Session, user, role, team scope (access.scoping), the job.
    with django_assert_max_num_queries(5):
        html = client.get(detail_url(job.pk)).content.decode()
    # An issue that is not "line N, column X: reason" still shows, whole.
    assert "<td>odd</td>" in html
    assert client.get(detail_url(job.pk + 1000)).status_code == 404

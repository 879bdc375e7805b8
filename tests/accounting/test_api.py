"""The accounting REST API: permissions, validation, upload limits, query counts, the worker."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounting.models import ImportJob, UsageRecord
from tests.support.alpha_usage import SACCT_LINES, sacct_text
from tests.support.polling import wait_for_status

REPORTS = ("utilization", "costs", "chargeback")
PERIOD = {"start": "2024-03-01", "end": "2024-03-02", "granularity": "day"}


def upload(client, text: str, **fields):
    form = {
        "file": SimpleUploadedFile("sacct.txt", text.encode(), content_type="text/plain"),
        "kind": "sacct",
        "cluster": "alpha",
        **fields,
    }
    return client.post("/api/v1/usage-records/import/", form, format="multipart")


@pytest.mark.django_db
def test_anonymous_gets_401_everywhere(alpha, client_for):
    client = client_for(None)
    assert client.get("/api/v1/usage-records/").status_code == 401
    assert client.get("/api/v1/import-jobs/").status_code == 401
    for report in REPORTS:
        assert client.get(f"/api/v1/accounting/{report}/", PERIOD).status_code == 401
    assert upload(client, sacct_text()).status_code == 401


@pytest.mark.django_db
def test_viewer_reads_but_cannot_import(alpha, client_for, viewer, import_text):
    import_text(alpha, sacct_text())
    client = client_for(viewer)
    listed = client.get("/api/v1/usage-records/")
    assert listed.status_code == 200 and listed.json()["count"] == 3
    for report in REPORTS:
        answer = client.get(f"/api/v1/accounting/{report}/", {**PERIOD, "cluster": "alpha"})
        assert answer.status_code == 200, answer.content
    assert upload(client, sacct_text()).status_code == 403
    assert client.post("/api/v1/gres-aliases/", {}).status_code == 403
    assert ImportJob.objects.count() == 1  # only the fixture's


@pytest.mark.django_db
def test_planner_upload_is_accepted_and_queued(alpha, client_for, planner):
    answer = upload(client_for(planner), sacct_text(), timezone="Europe/Berlin")
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert body["status"] == "queued" and body["progress"] == 0
    assert body["cluster"] == alpha.pk and body["source_name"] == "sacct.txt"
    job = ImportJob.objects.get(pk=body["id"])
    assert job.file and job.timezone == "Europe/Berlin" and job.created_by == planner


@pytest.mark.django_db
def test_upload_validation_names_the_field(alpha, client_for, planner, settings):
    client = client_for(planner)
    assert "kind" in upload(client, sacct_text(), kind="slurm").json()
    assert "cluster" in upload(client, sacct_text(), cluster="nope").json()
    assert "timezone" in upload(client, sacct_text(), timezone="Mars/Olympus").json()
    missing = client.post("/api/v1/usage-records/import/", {"kind": "sacct"}, format="multipart")
    assert missing.status_code == 400 and "file" in missing.json()

    settings.FLEETWISE_USAGE_UPLOAD_MAX_BYTES = 200
    too_large = upload(client, sacct_text())
    assert too_large.status_code == 413
    assert too_large.json()["max_bytes"] == 200
    assert "upload limit of 200 bytes" in too_large.json()["detail"]
    assert ImportJob.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"start": "2024-03-02", "end": "2024-03-01"}, "end"),
        ({"granularity": "hour"}, "granularity"),
        ({"cluster": "nope"}, "cluster"),
        ({"cluster": "99999"}, "cluster"),
        ({"accelerator": "Z9000"}, "accelerator"),
        ({"team": "nobody"}, "team"),
        ({"group_by": "cluster,galaxy"}, "group_by"),
        ({"start": "yesterday"}, "start"),
    ],
)
def test_report_filters_are_validated(alpha, client_for, viewer, import_text, query, field):
    import_text(alpha, sacct_text())
    client = client_for(viewer)
    for report in REPORTS:
        if field == "team" and report == "costs":
            continue  # costs have no team filter
        if field == "group_by" and report == "chargeback":
            continue  # chargeback is per team
        answer = client.get(f"/api/v1/accounting/{report}/", {**PERIOD, **query})
        assert answer.status_code == 400, (report, answer.content)
        assert field in answer.json(), (report, answer.json())


@pytest.mark.django_db
def test_chargeback_idle_rule_is_validated_and_applied(alpha, client_for, viewer, import_text):
    import_text(alpha, sacct_text())
    client = client_for(viewer)
    bad = client.get("/api/v1/accounting/chargeback/", {**PERIOD, "idle_rule": "random"})
    assert bad.status_code == 400 and "idle_rule" in bad.json()
    for rule in ("none", "proportional", "even"):
        body = client.get("/api/v1/accounting/chargeback/", {**PERIOD, "idle_rule": rule}).json()
        assert body["idle_rule"] == rule
        charged = sum(row["chargeback_cost"] for row in body["rows"])
        assert charged == pytest.approx(body["totals"][0]["total_cost"])


@pytest.mark.django_db
def test_reports_accept_names_and_group_by(alpha, client_for, viewer, import_text):
    import_text(alpha, sacct_text())
    client = client_for(viewer)
    body = client.get(
        "/api/v1/accounting/utilization/",
        {
            **PERIOD,
            "cluster": "Test DC/alpha",
            "accelerator": "H100 SXM5 80GB",
            "group_by": "pool,team",
        },
    ).json()
    assert body["group_by"] == ["pool", "team"]
    assert {(row["pool"], row["team"]) for row in body["rows"]} == {
        ("h100", "team-a"),
        ("h100", "team-b"),
        ("h100", "team-c"),
    }
    assert body["coverage"][0]["records"] == 3
    costs = client.get("/api/v1/accounting/costs/", {**PERIOD, "group_by": "site,pool"}).json()
    assert [(row["site"], row["pool"]) for row in costs["rows"]] == [("Test DC", "h100")]
    assert costs["rows"][0]["factor_provenance"]["utilization"] == "measured"


@pytest.mark.django_db
def test_usage_record_list_is_filtered_and_has_no_n_plus_one(
    alpha, client_for, viewer, import_text
):
    client = client_for(viewer)
    import_text(alpha, sacct_text(SACCT_LINES[:4]))  # 2 records

    def queries_for(path: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(path).status_code == 200
        return len(captured)

    few = queries_for("/api/v1/usage-records/")
    more = [
        line.replace("1002|1002|", f"{n}|{n}|").replace(
            "2024-02-29T23:50:00", f"2024-02-2{n % 9}T00:00:00"
        )
        for n, line in ((4000 + n, SACCT_LINES[3]) for n in range(30))
    ]
    import_text(alpha, sacct_text(SACCT_LINES[:4] + more))
    assert UsageRecord.objects.count() == 32
    assert queries_for("/api/v1/usage-records/") == few
    assert queries_for("/api/v1/import-jobs/") <= few

    body = client.get("/api/v1/usage-records/", {"team": "team-a", "state": "completed"}).json()
    assert [row["job_id"] for row in body["results"]] == ["1001"]
    assert body["results"][0]["accelerator_name"] == "H100 SXM5 80GB"
    assert body["results"][0]["pool_name"] == "h100"
    page = client.get("/api/v1/usage-records/", {"page_size": 10, "ordering": "start"}).json()
    assert page["count"] == 32 and len(page["results"]) == 10
    window = client.get(
        "/api/v1/usage-records/",
        {"start": "2024-03-01T13:00:00Z", "end": "2024-03-01T14:00:00Z"},
    ).json()
    assert [row["job_id"] for row in window["results"]] == ["1001"]
    assert client.get("/api/v1/usage-records/", {"cluster": 99999}).status_code == 400
    assert "accelerator" in client.get("/api/v1/usage-records/", {"accelerator": "Z"}).json()
    bad_window = client.get("/api/v1/usage-records/", {"start": "2024-03-02", "end": "2024-03-01"})
    assert bad_window.status_code == 400 and "end" in bad_window.json()


def wait_for_job(client, job_id: int, timeout_s: float = 60) -> dict:
    fetch = lambda: client.get(f"/api/v1/import-jobs/{job_id}/").json()  # noqa: E731
    return wait_for_status(fetch, f"import {job_id}", timeout_s=timeout_s)


@pytest.mark.worker
def test_upload_runs_through_the_worker(celery_worker, alpha, client_for, planner):
    client = client_for(planner)
    accepted = upload(client, sacct_text())
    assert accepted.status_code == 202, accepted.content
    done = wait_for_job(client, accepted.json()["id"])
    assert done["status"] == "succeeded", done["error"]
    assert done["progress"] == 100
    assert (done["records_created"], done["records_skipped"], done["lines_read"]) == (3, 2, 8)
    assert UsageRecord.objects.count() == 3

    # The same file again: accepted, imported, nothing changes.
    again = wait_for_job(client, upload(client, sacct_text()).json()["id"])
    assert (again["records_created"], again["records_unchanged"]) == (0, 3)

    # A bad file fails with its lines listed; the records stored before stay as they were.
    bad = sacct_text([SACCT_LINES[0].replace("COMPLETED", "EXPLODED"), SACCT_LINES[3]])
    failed = wait_for_job(client, upload(client, bad).json()["id"])
    assert failed["status"] == "failed"
    assert failed["issues"] == ["line 2, column State: unknown state 'EXPLODED'"]
    assert UsageRecord.objects.count() == 3


@pytest.mark.django_db
def test_failed_import_can_be_retried(alpha, client_for, planner, viewer):
    from accounting import services

    accepted = upload(client_for(planner), sacct_text([SACCT_LINES[0].replace("|1|", "|x|")]))
    job = ImportJob.objects.get(pk=accepted.json()["id"])
    services.run_import_job(job.pk, str(job.run_id))  # what the worker does, here in-line
    job.refresh_from_db()
    assert job.status == "failed" and job.issues[0].startswith("line 2, column NNodes")
    assert client_for(viewer).post(f"/api/v1/import-jobs/{job.pk}/retry/").status_code == 403
    retried = client_for(planner).post(f"/api/v1/import-jobs/{job.pk}/retry/")
    assert retried.status_code == 202
    assert retried.json()["status"] == "queued" and retried.json()["issues"] == []
    # The superseded run can no longer write its outcome.
    assert services.run_import_job(job.pk, str(job.run_id)) == {"skipped": "superseded or deleted"}


@pytest.mark.django_db
def test_gres_aliases_and_partition_mappings_are_editable(alpha, client_for, planner):
    client = client_for(planner)
    created = client.post(
        "/api/v1/gres-aliases/",
        {"gres_type": "NVIDIA-Hopper", "accelerator": "H100 SXM5 80GB"},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["gres_type"] == "hopper"
    unknown = client.post(
        "/api/v1/gres-aliases/", {"gres_type": "x", "accelerator": "Z9000"}, format="json"
    )
    assert unknown.status_code == 400 and "accelerator" in unknown.json()

    from inventory.models import Cluster, Pool

    other = Cluster.objects.create(site=alpha.site, name="beta")
    foreign_pool = Pool.objects.create(cluster=other, name="p")
    mismatch = client.post(
        "/api/v1/partition-mappings/",
        {"cluster": alpha.pk, "partition": "gpu", "pool": foreign_pool.pk},
        format="json",
    )
    assert mismatch.status_code == 400 and "pool" in mismatch.json()
    mapped = client.post(
        "/api/v1/partition-mappings/",
        {"cluster": alpha.pk, "partition": "gpu", "accelerator": "H100 SXM5 80GB"},
        format="json",
    )
    assert mapped.status_code == 201, mapped.content


@pytest.mark.django_db
def test_every_accounting_endpoint_is_documented_without_warnings():
    from tests.support.openapi import validated_schema

    # Generated with --fail-on-warn: a warning about any view, these included, fails here.
    paths = validated_schema()["paths"]
    upload_operation = paths["/api/v1/usage-records/import/"]["post"]
    assert "multipart/form-data" in upload_operation["requestBody"]["content"]
    assert {"202", "400", "413"} <= set(upload_operation["responses"])
    for report in REPORTS:
        operation = paths[f"/api/v1/accounting/{report}/"]["get"]
        names = {parameter["name"] for parameter in operation["parameters"]}
        assert {"cluster", "accelerator", "start", "end", "granularity"} <= names, report
        assert "200" in operation["responses"]
    assert "idle_rule" in {
        p["name"] for p in paths["/api/v1/accounting/chargeback/"]["get"]["parameters"]
    }
    assert "/api/v1/usage-records/" in paths and "/api/v1/import-jobs/{id}/" in paths


@pytest.mark.django_db
def test_a_cluster_given_as_superscript_digits_is_a_bad_request(client_for, viewer, alpha):
    # Found by schemathesis: "¹".isdigit() is true but int("¹") fails (was a 500).
    response = client_for(viewer).get("/api/v1/accounting/utilization/rows/", {"cluster": "\u00b9"})
    assert response.status_code == 400
    assert "cluster" in response.json()


@pytest.mark.django_db
def test_a_time_filter_with_an_offset_beyond_postgresql_s_range_is_read_in_utc(
    client_for, viewer, alpha, import_text
):
    # Found by schemathesis on PostgreSQL: offsets beyond ±15:59 were sent as they came (500).
    import_text(alpha, sacct_text())
    client = client_for(viewer)
    # 2024-03-01T13:00Z written with a -20:06 offset: the same instant as the plain UTC query.
    odd = client.get("/api/v1/usage-records/", {"start": "2024-02-29T16:54:00-20:06"})
    utc = client.get("/api/v1/usage-records/", {"start": "2024-03-01T13:00:00Z"})
    assert odd.status_code == 200
    assert odd.json()["count"] == utc.json()["count"] > 0
    far = client.get("/api/v1/usage-records/", {"end": "0001-01-01T00:00:00+20:00"})
    assert far.status_code == 400 and "end" in far.json()

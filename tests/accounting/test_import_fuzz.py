"""Usage uploads under bad input, end to end: each bad file is refused at once, or fails its
job by line; nothing is stored; no request answers 500. (The parsers alone:
tests/accounting/parsing/test_parser_fuzz.py; the inventory import:
tests/inventory/test_import_fuzz.py.)"""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounting import services as usage_services
from accounting.models import ImportJob, UsageRecord
from inventory.models import Cluster
from tests.support.hostile import xlsx_bytes, zip_bomb

pytestmark = pytest.mark.django_db


def upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content)


def test_usage_upload_of_a_zip_bomb_is_refused_at_once(client_for, planner, demo_fleet):
    cluster = Cluster.objects.get(name="train-hetero")
    response = client_for(planner).post(
        "/api/v1/usage-records/import/",
        {"file": upload("usage.xlsx", zip_bomb(300)), "kind": "xlsx", "cluster": cluster.pk},
        format="multipart",
    )
    assert response.status_code == 400
    assert "looks like a zip bomb" in response.json()["file"]
    not_a_workbook = client_for(planner).post(
        "/api/v1/usage-records/import/",
        {"file": upload("usage.xlsx", b"PK\x03\x04 cut"), "kind": "xlsx", "cluster": cluster.pk},
        format="multipart",
    )
    assert not_a_workbook.status_code == 400
    assert "not a readable zip archive" in not_a_workbook.json()["file"]
    assert not ImportJob.objects.exists()


SREPORT_HEADER = (
    b"Cluster Utilization 2025-02-01T00:00:00 - 2025-02-28T23:59:59\n"
    b"Usage reported in TRES Hours\n"
    b"Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported\n"
)
CSV_HEADER = b"\xef\xbb\xbfcluster,job_id,cards,start,end,state,accelerator_model\n"


@pytest.mark.parametrize(
    ("kind", "content", "message"),
    [
        ("sacct", b"JobID|Start\n1|" + "é|±|\x7f|\\|".encode() * 400, "line 1, column AllocTRES"),
        (
            "sreport",
            b"Cluster|TRES Name|Allocated\nalpha|gres/gpu|NaN\n",
            "this is the sreport report unknown",
        ),
        ("csv", b"\xef\xbb\xbfcluster,job_id,cards\n" + b"a,b,1e999\n" * 5, "line 1, column start"),
    ],
)
def test_bad_headers_are_refused_at_upload_and_store_nothing(
    client_for, planner, demo_fleet, kind, content, message
):
    cluster = Cluster.objects.get(name="train-hetero")
    answer = client_for(planner).post(
        "/api/v1/usage-records/import/",
        {"file": upload(f"usage.{kind}", content), "kind": kind, "cluster": cluster.pk},
        format="multipart",
    )
    assert answer.status_code == 400, answer.content
    assert message in answer.json()["file"]
    assert not ImportJob.objects.exists()


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        (
            "sacct",
            b"JobID|Start|End|State|AllocTRES\n1|" + "é|±|\x7f|\\|".encode() * 400,
        ),
        ("sreport", SREPORT_HEADER + b"alpha|gres/gpu|NaN|0|0|0|0|0\n"),
        ("csv", CSV_HEADER + b"a,b,1e999,2025-01-01,2025-01-02,completed,h100\n" * 5),
        ("xlsx", xlsx_bytes([["cluster", "job_id", "cards"], ["train-hetero", "1", "=1/0"]])),
    ],
)
def test_bad_usage_files_fail_their_job_by_line_and_store_nothing(
    client_for, planner, demo_fleet, kind, content
):
    cluster = Cluster.objects.get(name="train-hetero")
    answer = client_for(planner).post(
        "/api/v1/usage-records/import/",
        {"file": upload(f"usage.{kind}", content), "kind": kind, "cluster": cluster.pk},
        format="multipart",
    )
    assert answer.status_code == 202, answer.content
    job = ImportJob.objects.get(pk=answer.json()["id"])
    usage_services.run_import_job(job.pk, str(job.run_id))  # what the worker does
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.issues and all(issue.startswith("line ") for issue in job.issues), job.issues
    assert UsageRecord.objects.count() == 0

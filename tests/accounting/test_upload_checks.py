"""The upload's synchronous checks: kind, layout, delimiter and header answer at upload time
(a 400 on the API, the page and the command alike), before anything is stored; a pasted
fixed-width table goes through and imports exactly."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounting import services
from accounting.models import ImportJob, UsageRecord
from tests.support.alpha_usage import sacct_text
from tests.support.slurm_tables import (
    JOBSTATS,
    NVIDIA_SMI_CSV,
    SACCT_FIXED_WIDTH,
    SACCT_FIXED_WIDTH_CUT,
    SEFF,
)

pytestmark = pytest.mark.django_db


def upload(client, text: str, kind: str = "sacct", **fields):
    form = {
        "file": SimpleUploadedFile(f"usage.{kind}", text.encode(), content_type="text/plain"),
        "kind": kind,
        "cluster": "alpha",
        **fields,
    }
    return client.post("/api/v1/usage-records/import/", form, format="multipart")


def refused(client, text: str, kind: str = "sacct", **fields) -> str:
    answer = upload(client, text, kind, **fields)
    assert answer.status_code == 400, answer.content
    assert not ImportJob.objects.exists()
    return answer.json()["file"]


def test_a_pasted_fixed_width_table_imports_exactly(alpha, client_for, planner):
    answer = upload(client_for(planner), SACCT_FIXED_WIDTH)
    assert answer.status_code == 202, answer.content
    job = ImportJob.objects.get(pk=answer.json()["id"])
    services.run_import_job(job.pk, str(job.run_id))  # what the worker does
    job.refresh_from_db()
    assert job.status == "succeeded", job.issues
    card_hours = dict(UsageRecord.objects.values_list("job_id", "card_hours"))
    assert card_hours == {"1001": 48.0, "1002": 24.0, "1003": 8.0}
    assert job.as_of_source == "file" and job.as_of.isoformat() == "2025-02-03T16:00:00+00:00"


@pytest.mark.parametrize(
    ("text", "kind", "says"),
    [
        (SEFF, "sacct", "this is seff output (a one-job efficiency summary)"),
        (JOBSTATS, "csv", "this is jobstats output"),
        (NVIDIA_SMI_CSV, "csv", "this is nvidia-smi --query-gpu CSV (GPU telemetry)"),
    ],
)
def test_other_tools_output_is_named_at_upload(alpha, client_for, planner, text, kind, says):
    message = refused(client_for(planner), text, kind)
    assert says in message
    assert "sacct --allusers --allocations --duplicates --parsable2" in message


def test_layout_and_header_problems_answer_at_upload(alpha, client_for, planner):
    client = client_for(planner)
    assert "AllocTRES%100" in refused(client, SACCT_FIXED_WIDTH_CUT)
    without_header = "\n".join(sacct_text().splitlines()[1:]) + "\n"
    assert "no header: pass --columns" in refused(client, without_header)
    piped_as_csv = refused(client, sacct_text(), "csv")
    assert "This looks like Slurm sacct output: import it with the sacct format." in piped_as_csv
    bannerless = "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported\n"
    no_period = refused(
        client, bannerless + "alpha|gres/gpu|1|0|0|0|0|1\n", "sreport", time_unit="hours"
    )
    assert "no report period: keep the banner or pass the period" in no_period


def test_the_as_of_field_is_stored_and_shown(alpha, client_for, planner):
    answer = upload(client_for(planner), sacct_text(), as_of="2024-03-05T00:00:00Z")
    assert answer.status_code == 202, answer.content
    job = ImportJob.objects.get(pk=answer.json()["id"])
    services.run_import_job(job.pk, str(job.run_id))
    body = client_for(planner).get(f"/api/v1/import-jobs/{job.pk}/").json()
    # The file's own latest time (the pending job's Submit) comes before the field.
    assert (body["as_of"], body["as_of_source"]) == ("2024-03-01T21:00:00Z", "file")
    assert body["exported_at"] == "2024-03-05T00:00:00Z"
    assert any("was not used" in warning for warning in body["warnings"])

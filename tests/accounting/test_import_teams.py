"""A team-scoped planner imports only their teams' usage (issue #28, Medium 9): an upload that
charges another team is refused with a 400 naming it (API and page), the worker refuses it
again with the creator's teams of that moment (nothing stored), a line may not take over
another team's record, and imports without a creator (the command) are not limited."""

from __future__ import annotations

import io

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile

from access.models import TeamMembership
from accounting import services
from accounting.models import ImportJob, UsageRecord
from tests.support.alpha_usage import SACCT_LINES, sacct_text
from tests.support.builders import team_viewer

pytestmark = pytest.mark.django_db

TEAM_A = SACCT_LINES[:3]  # job 1001 of team-a (and its steps)
TEAM_B = SACCT_LINES[3:4]  # job 1002 of team-b


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def planner_a(db):
    return team_viewer("planner-a", "team-a", role="planner")


def upload(lines=None) -> SimpleUploadedFile:
    return SimpleUploadedFile("usage.sacct", sacct_text(lines).encode(), "text/plain")


def run(job: ImportJob) -> ImportJob:
    services.run_import_job(job.pk, str(job.run_id))
    return ImportJob.objects.get(pk=job.pk)


def test_the_api_refuses_other_teams_usage_naming_them(client_for, planner_a, alpha):
    body = {"kind": "sacct", "cluster": alpha.pk, "file": upload(), "timezone": "UTC"}
    response = client_for(planner_a).post("/api/v1/usage-records/import/", body, format="multipart")
    assert response.status_code == 400
    message = str(response.json()["file"])
    assert "team team-b, team-c" in message and "your teams: team-a" in message
    assert not ImportJob.objects.exists()
    body["file"] = upload(TEAM_A)
    accepted = client_for(planner_a).post("/api/v1/usage-records/import/", body, format="multipart")
    assert accepted.status_code == 202, accepted.content


def test_the_page_refuses_other_teams_usage(client, planner_a, alpha):
    client.force_login(planner_a)
    form = {"kind": "sacct", "cluster": alpha.pk, "pasted_text": sacct_text(TEAM_B)}
    response = client.post("/usage/import/", {**form, "timezone": "UTC"})
    assert response.status_code == 400
    assert "charges usage to team team-b" in response.content.decode()
    assert not ImportJob.objects.exists()


def test_the_worker_checks_the_creator_teams_when_it_runs(planner_a, alpha):
    job = services.create_import_job(
        kind="sacct", cluster=alpha, upload=upload(TEAM_A), user=planner_a, queue=False
    )
    # Moved to team-b after uploading: the run is judged with the teams of now.
    TeamMembership.objects.filter(user=planner_a).update(team="team-b")
    failed = run(job)
    assert failed.status == "failed"
    assert "team 'team-a' is not one of planner-a's teams (team-b)" in failed.error
    assert not UsageRecord.objects.exists()


def test_a_line_may_not_take_over_another_teams_record(planner_a, alpha, import_text):
    import_text(alpha, sacct_text(TEAM_B))  # job 1002 is team-b's
    takeover = [TEAM_B[0].replace("|team-b|bob|", "|team-a|bob|")]
    job = services.create_import_job(
        kind="sacct", cluster=alpha, upload=upload(takeover), user=planner_a, queue=False
    )
    failed = run(job)
    assert failed.status == "failed" and "column JobID: job 1002@" in failed.error
    assert "is a record of team 'team-b'" in failed.error
    assert UsageRecord.objects.get().account == "team-b"


def test_imports_without_a_creator_and_by_fleet_wide_users_are_not_limited(alpha, planner):
    job = services.create_import_job(
        kind="sacct",
        cluster=alpha,
        upload=ContentFile(sacct_text().encode(), "u.sacct"),
        queue=False,
    )
    assert run(job).status == "succeeded"
    assert UsageRecord.objects.count() == 3
    again = services.create_import_job(
        kind="sacct", cluster=alpha, upload=upload(), user=planner, queue=False
    )
    assert run(again).status == "succeeded"
    counts = services.import_file(
        services.create_import_job(kind="sacct", cluster=alpha, queue=False),
        io.BytesIO(sacct_text().encode()),
    )
    assert counts.records_unchanged == 3

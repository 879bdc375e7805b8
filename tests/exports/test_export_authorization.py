"""Exports are checked against what their owner may see (issue #28): a link or background
export of a list the user may not read, or of a team they may not see, is refused when it is
made (403 in the API, an error on the form); its rows are the owner's teams' when it is used;
and a file built while the owner saw more is not downloaded once they see less."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from access.models import TeamMembership
from exports import services
from exports.models import ExportJob
from tests.support.builders import team_viewer

pytestmark = pytest.mark.django_db

TOKENS, JOBS = "/api/v1/export-tokens/", "/api/v1/export-jobs/"


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def viewer_a(db):
    return team_viewer("viewer-a", "team-a")


def test_a_link_to_another_teams_rows_is_refused_naming_the_team(client_for, viewer_a):
    client = client_for(viewer_a)
    body = {"name": "b", "url": "/api/v1/usage-records/?team=team-b&format=csv"}
    response = client.post(TOKENS, body, format="json")
    assert response.status_code == 403
    assert "viewer-a may not see team team-b" in response.json()["detail"]
    job = client.post(JOBS, {"url": "/api/v1/accounting/chargeback/rows/?team=team-c"})
    assert job.status_code == 403 and "team team-c" in job.json()["detail"]
    assert not services.ExportToken.objects.exists() and not ExportJob.objects.exists()
    own = {"name": "a", "url": "/api/v1/usage-records/?team=team-a"}
    assert client.post(TOKENS, own, format="json").status_code == 201


def test_a_link_to_a_list_of_a_higher_role_is_refused(client_for, viewer):
    response = client_for(viewer).post(TOKENS, {"name": "s", "url": "/api/v1/telemetry/sources/"})
    assert response.status_code == 403
    assert "/api/v1/telemetry/sources/" in response.json()["detail"]


def test_the_sharing_page_shows_the_refusal_on_the_form(client, viewer_a):
    client.force_login(viewer_a)
    body = {"name": "b", "url": "/api/v1/usage-records/?team=team-b", "format": "csv"}
    response = client.post(reverse("frontend:spreadsheet-links"), body)
    assert response.status_code == 400
    assert "may not see team team-b" in response.content.decode()


def test_a_link_gives_its_owners_teams_rows_as_they_are_when_used(client_for, viewer_a, team_usage):
    _, clear = services.create_token(owner=viewer_a, name="u", url="/api/v1/usage-records/")
    anonymous = client_for(None)
    first = anonymous.get(f"/api/v1/export/{clear}/")
    assert first.status_code == 200 and first["X-Export-Rows"] == "1"
    text = b"".join(first.streaming_content).decode()
    assert "team-a" in text and "team-b" not in text
    TeamMembership.objects.filter(user=viewer_a).delete()  # no team left: no rows
    later = anonymous.get(f"/api/v1/export/{clear}/")
    assert later["X-Export-Rows"] == "0"
    b"".join(later.streaming_content)


def test_a_file_built_with_more_teams_is_not_downloaded_by_a_narrower_owner(
    client_for, viewer_a, team_usage
):
    job = ExportJob.objects.create(owner=viewer_a, path="/api/v1/usage-records/")
    services.build_xlsx(job.pk)
    job.refresh_from_db()
    assert job.status == "succeeded" and job.built_for_teams == ["team-a"]
    url = f"{JOBS}{job.pk}/download/"
    response = client_for(viewer_a).get(url)
    assert response.status_code == 200
    b"".join(response.streaming_content)
    ExportJob.objects.filter(pk=job.pk).update(built_for_teams=None)  # built when it saw all
    refused = client_for(viewer_a).get(url)
    assert refused.status_code == 403 and "every team" in refused.json()["detail"]


def test_administrators_download_any_file(client_for, fleet_admin, viewer_a):
    job = ExportJob.objects.create(owner=viewer_a, path="/api/v1/sites/", status="succeeded")
    job.file.save("export.xlsx", ContentFile(b"PK"))
    response = client_for(fleet_admin).get(f"{JOBS}{job.pk}/download/")
    assert response.status_code == 200
    b"".join(response.streaming_content)

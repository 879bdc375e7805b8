"""Team scoping fails closed: every team needs an explicit grant (`access.FleetWideAccess`);
a user who loses their last membership sees nothing, and so do their export links. Admin
pages, import jobs, coverage counts and the ``?team=`` answer are scoped too."""

from __future__ import annotations

import importlib

import pytest

from tests.support.alpha_usage import OTHER_TEAMS, TEAM
from tests.support.builders import make_user, team_viewer

pytestmark = pytest.mark.django_db

DAY = {"start": "2024-03-01", "end": "2024-03-02", "granularity": "day"}


def fresh(user):
    from django.contrib.auth.models import User

    return User.objects.get(pk=user.pk)  # no cached teams


def test_every_team_needs_the_grant_and_a_membership_replaces_it():
    from access.models import FleetWideAccess, TeamMembership
    from access.scoping import visible_teams

    assert visible_teams(make_user("bare", "viewer", all_teams=False)) == frozenset()
    granted = make_user("granted", "viewer")
    assert visible_teams(granted) is None
    TeamMembership.objects.create(user=granted, team=TEAM)
    assert not FleetWideAccess.objects.filter(user=granted).exists()
    assert visible_teams(fresh(granted)) == {TEAM}
    TeamMembership.objects.filter(user=granted).delete()
    assert visible_teams(fresh(granted)) == frozenset()  # never widens to every team
    admin = make_user("boss", "admin", all_teams=False)
    assert visible_teams(admin) is None  # administrators by their role


def test_the_migration_grants_every_team_to_users_without_membership():
    from django.apps import apps

    from access.models import FleetWideAccess

    migration = importlib.import_module("access.migrations.0003_fleet_wide_access")
    unscoped = make_user("old-viewer", "viewer", all_teams=False)
    scoped = team_viewer("old-team-a", TEAM)
    migration.grant_users_without_teams(apps, None)
    assert FleetWideAccess.objects.filter(user=unscoped).exists()
    assert not FleetWideAccess.objects.filter(user=scoped).exists()


def test_losing_the_last_membership_empties_the_api_and_the_export_links(
    team_usage, client_for, client
):
    from access.models import TeamMembership
    from exports.services import create_token

    user = team_viewer("leaver", TEAM)
    token = create_token(owner=user, name="mine", url="/api/v1/usage-records/", fmt="csv")[1]
    before = b"".join(client.get(f"/api/v1/export/{token}/").streaming_content).decode()
    assert TEAM in before
    TeamMembership.objects.filter(user=user).delete()
    listed = client_for(fresh(user)).get("/api/v1/usage-records/").json()
    assert listed["count"] == 0
    response = client.get(f"/api/v1/export/{token}/")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode()
    assert all(team not in text for team in (TEAM, *OTHER_TEAMS))


def test_another_teams_name_gets_the_same_answer_as_no_team(team_usage, client_for):
    client = client_for(team_viewer("prober", TEAM))
    query = {**DAY, "group_by": "team"}
    existing = client.get("/api/v1/accounting/utilization/", {**query, "team": "team-b"})
    missing = client.get("/api/v1/accounting/utilization/", {**query, "team": "no-such-team"})
    assert existing.status_code == missing.status_code == 200
    assert existing.json()["rows"] == missing.json()["rows"] == []


def test_coverage_counts_only_the_users_teams(team_usage, client_for):
    from accounting.models import UsageRecord

    scoped = client_for(team_viewer("counter", TEAM))
    everyone = client_for(make_user("all", "viewer"))
    own = UsageRecord.objects.filter(account=TEAM).count()
    total = UsageRecord.objects.count()
    assert own < total
    mine = scoped.get("/api/v1/accounting/utilization/", DAY).json()["coverage"]
    theirs = everyone.get("/api/v1/accounting/utilization/", DAY).json()["coverage"]
    assert [row["records"] for row in mine] == [own]
    assert [row["records"] for row in theirs] == [total]


def test_import_jobs_holding_other_teams_data_are_hidden_and_cannot_be_retried(
    team_usage, client_for
):
    from accounting.models import ImportJob

    user = team_viewer("importer", TEAM, role="planner")
    own = ImportJob.objects.create(
        cluster=team_usage.cluster, kind="csv", source_name="mine.csv", created_by=user
    )
    client = client_for(user)
    listed = client.get("/api/v1/import-jobs/").json()
    assert [job["id"] for job in listed["results"]] == [own.pk]
    mixed = team_usage.import_job.pk
    assert client.get(f"/api/v1/import-jobs/{mixed}/").status_code == 404
    assert client.post(f"/api/v1/import-jobs/{mixed}/retry/").status_code == 404
    assert client.get(f"/usage/import/{mixed}/").status_code == 404
    assert client.post(f"/usage/import/{mixed}/retry/").status_code == 404
    listed_page = client.get("/usage/imports/").content.decode()
    assert "mine.csv" in listed_page and team_usage.import_job.source_name not in listed_page
    everyone = client_for(make_user("all", "planner")).get("/api/v1/import-jobs/").json()
    assert {job["id"] for job in everyone["results"]} == {own.pk, mixed}


def test_team_scoped_staff_see_only_their_teams_rows_in_admin(team_usage, client):
    from accounting.models import UsageRecord

    staff = team_viewer("staff-a", TEAM)
    staff.is_staff = True
    staff.save()
    client.force_login(staff)
    records = client.get("/admin/accounting/usagerecord/")
    assert records.status_code == 200
    assert records.context["cl"].result_count == UsageRecord.objects.filter(account=TEAM).count()
    jobs = client.get("/admin/accounting/importjob/")
    assert jobs.status_code == 200 and jobs.context["cl"].result_count == 0
    other = UsageRecord.objects.exclude(account=TEAM).first()
    assert client.get(f"/admin/accounting/usagerecord/{other.pk}/change/").status_code in (
        302,
        404,
    )

"""Team scoping fixtures: the 16-card "alpha" cluster with usage of team-a, team-b and team-c
on 2024-03-01 (tests/accounting/conftest.py), rolled up for the dashboards, and viewers
tied to team-a."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.accounting.conftest import alpha, import_text, sacct_text  # noqa: F401
from tests.conftest import make_user

TEAM = "team-a"
OTHER_TEAMS = ("team-b", "team-c")


def team_viewer(username: str, *teams: str, role: str = "viewer"):
    from access.models import TeamMembership

    user = make_user(username, role)
    for team in teams:
        TeamMembership.objects.create(user=user, team=team)
    return user


@pytest.fixture
def team_usage(alpha, import_text):  # noqa: F811
    from accounting.models import UsageRecord
    from accounting.rollups import refresh_usage_rollups

    job, _ = import_text(alpha, sacct_text())
    refresh_usage_rollups()
    records = {row.account: row for row in UsageRecord.objects.all()}
    assert set(records) == {TEAM, *OTHER_TEAMS}
    return SimpleNamespace(cluster=alpha, import_job=job, records=records)


@pytest.fixture
def team_a_viewer(db):
    return team_viewer("viewer-a", TEAM)


@pytest.fixture
def team_b_viewer(db):
    return team_viewer("viewer-b", "team-b")

"""A report goes only to those who may see it (issue #28, Medium 9): a fleet report, which
lists every team's chargeback, is not e-mailed to a team-scoped user, as a recipient user or
as a plain address; the withheld are named on the report; a role or team lost between
generation and sending withholds it then; schedules refuse such recipients when saved, and
only administrators (or the owner) change them."""

from __future__ import annotations

import pytest
from django.core import mail

from access.models import TeamMembership
from reports import services
from reports.models import Report, ReportSchedule
from tests.support.builders import (
    MARCH,
    SCHEDULES,
    VALID_SCHEDULE,
    finance_monthly_schedule,
    make_user,
    team_viewer,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def team_a_user(db):
    return team_viewer("member-a", "team-a", email="member-a@example.com")


def generated(schedule) -> Report:
    report, _ = services.get_or_create_report(schedule, MARCH)
    assert services.generate(report.pk).done
    report.refresh_from_db()
    return report


def test_a_fleet_report_is_not_emailed_to_a_team_scoped_user(report_fleet, team_a_user):
    schedule = finance_monthly_schedule(recipient_addresses=["finance@example.com"])
    schedule.recipient_users.add(team_a_user)
    ReportSchedule.objects.filter(pk=schedule.pk).update(
        recipient_addresses=["finance@example.com", "MEMBER-A@example.com", "x@elsewhere.org"]
    )
    report = generated(schedule)
    assert report.recipients == ["finance@example.com"]
    assert report.withheld_recipients == [
        "member-a@example.com: the account member-a may not see every team's figures "
        "(a fleet scope holds every team's)",
        "x@elsewhere.org: no active account holds this address",
    ]
    assert services.deliver(report.pk).done
    assert [message.to for message in mail.outbox] == [["finance@example.com"]]


def test_a_team_report_goes_to_its_team(report_fleet, team_a_user):
    schedule = finance_monthly_schedule(scope="team", team="team-a", recipient_addresses=[])
    schedule.recipient_users.add(team_a_user, team_viewer("member-b", "team-b", email="b@x.org"))
    report = generated(schedule)
    assert report.recipients == ["member-a@example.com"]
    assert [line.split(":")[0] for line in report.withheld_recipients] == ["b@x.org"]


def test_a_recipient_who_lost_the_team_before_sending_gets_nothing(report_fleet, team_a_user):
    schedule = finance_monthly_schedule(scope="team", team="team-a", recipient_addresses=[])
    schedule.recipient_users.add(team_a_user)
    report = generated(schedule)
    assert report.recipients == ["member-a@example.com"]
    TeamMembership.objects.filter(user=team_a_user).update(team="team-b")
    outcome = services.deliver(report.pk)
    assert not outcome.done and mail.outbox == []
    report.refresh_from_db()
    assert report.recipients == [] and report.status == "generated"
    assert report.withheld_recipients[0].startswith("member-a@example.com: the account member-a")


def test_the_api_refuses_recipients_who_may_not_see_the_report(
    client_for, fleet_admin, team_a_user
):
    client = client_for(fleet_admin)
    body = {**VALID_SCHEDULE, "recipient_users": [team_a_user.pk]}
    response = client.post(SCHEDULES, body, format="json")
    assert response.status_code == 400
    assert "member-a@example.com: the account member-a" in str(response.json()["recipient_users"])
    plain = {**VALID_SCHEDULE, "recipient_addresses": ["nobody@example.com"]}
    response = client.post(SCHEDULES, plain, format="json")
    assert "no active account" in str(response.json()["recipient_addresses"])
    team = {**body, "scope": "team", "team": "team-a"}
    assert client.post(SCHEDULES, team, format="json").status_code == 201
    assert not ReportSchedule.objects.filter(scope="fleet").exists()


def test_the_page_refuses_recipients_who_may_not_see_the_report(client, fleet_admin, team_a_user):
    client.force_login(fleet_admin)
    form = {
        "name": "Fleet weekly",
        "template": "utilization",
        "scope": "fleet",
        "frequency": "weekly",
        "send_time": "08:00",
        "timezone": "UTC",
        "recipient_users": [team_a_user.pk],
        "recipient_addresses": "",
        "formats": ["html_email"],
    }
    response = client.post("/reports/schedules/new/", form)
    assert response.status_code == 200
    assert "Would not get this report" in response.content.decode()
    assert not ReportSchedule.objects.exists()


def test_a_team_scoped_admin_role_still_sees_every_team(report_fleet):
    # Administrators see every team (access.scoping): a team membership does not narrow them.
    boss = make_user("boss", "admin", all_teams=False, email="boss@example.com")
    TeamMembership.objects.create(user=boss, team="team-a")
    schedule = finance_monthly_schedule(recipient_addresses=[])
    schedule.recipient_users.add(boss)
    assert generated(schedule).recipients == ["boss@example.com"]

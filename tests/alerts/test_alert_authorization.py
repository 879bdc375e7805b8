"""A team-scoped planner cannot read another team's figures through an alert rule (issue #28,
High 2): a rule for another team is refused on the API and the page, a rule that exists
anyway is never e-mailed to them, and only a rule's owner (or an administrator) changes its
recipients."""

from __future__ import annotations

import pytest
from django.core import mail

from alerts.models import AlertEvent, AlertRule
from alerts.services import notify
from tests.support.builders import make_user, team_viewer

pytestmark = pytest.mark.django_db

RULES = "/api/v1/alert-rules/"


@pytest.fixture
def planner_a(db):
    user = team_viewer("planner-a", "team-a", role="planner")
    user.email = "planner-a@example.com"
    user.save()
    return user


def budget(team: str = "team-b", **extra) -> dict:
    return {
        "name": f"{team} budget",
        "metric": "chargeback",
        "scope": "team",
        "team": team,
        "direction": "above",
        "threshold": 1,
        "currency": "USD",
        "recipients": ["planner-a@example.com"],
        **extra,
    }


def test_the_api_refuses_a_rule_for_another_team_naming_it(client_for, planner_a):
    client = client_for(planner_a)
    response = client.post(RULES, budget(), format="json")
    assert response.status_code == 403
    assert "team team-b" in response.json()["detail"]
    fleet = {
        **budget(),
        "metric": "mfu",
        "scope": "fleet",
        "team": "",
        "currency": "",
        "threshold": 0.4,
    }
    assert client.post(RULES, fleet, format="json").status_code == 403
    assert not AlertRule.objects.exists()
    own = client.post(RULES, budget("team-a"), format="json")
    assert own.status_code == 201, own.content
    moved = client.patch(f"{RULES}{own.json()['id']}/", {"team": "team-b"}, format="json")
    assert moved.status_code == 403
    assert AlertRule.objects.get().team == "team-a"


def test_the_page_refuses_a_rule_for_another_team(client, planner_a):
    client.force_login(planner_a)
    form = {**budget(), "recipients_text": "planner-a@example.com", "window_days": 7}
    del form["recipients"]
    response = client.post("/alerts/", form)
    assert response.status_code == 400
    assert "planner-a may not see team team-b" in response.content.decode().replace("&#x27;", "'")
    assert not AlertRule.objects.exists()


def test_a_rule_for_another_team_is_never_emailed_to_a_scoped_planner(planner_a):
    # Made before the fix (or by an administrator) with the planner's address.
    rule = AlertRule.objects.create(**budget(), created_by=planner_a)
    event = AlertEvent.objects.create(
        rule=rule,
        value=495_325,
        message="team-b budget: Chargeback of a team 495,325 USD",
        fired_at="2025-03-03T00:00:00Z",
    )
    assert notify(event.pk) is False
    assert mail.outbox == []
    event.refresh_from_db()
    assert event.notified_at is None
    assert "planner-a@example.com: the account planner-a holding it" in event.notify_error
    # Someone who sees team-b gets it; the planner's address is named as withheld.
    finance = make_user("finance", "viewer", email="finance@example.com")
    AlertRule.objects.filter(pk=rule.pk).update(recipients=["planner-a@example.com", finance.email])
    assert notify(event.pk) is True
    assert [message.to for message in mail.outbox] == [["finance@example.com"]]
    assert "planner-a@example.com" in AlertEvent.objects.get(pk=event.pk).notify_error


def test_only_the_owner_or_an_administrator_changes_the_recipients(
    client_for, planner_a, planner, fleet_admin
):
    rule = AlertRule.objects.create(**budget("team-a"), created_by=planner_a)
    url = f"{RULES}{rule.pk}/"
    other = client_for(planner).patch(url, {"recipients": []}, format="json")
    assert other.status_code == 403 and "owner (planner-a)" in other.json()["detail"]
    assert client_for(planner).patch(url, {"threshold": 2}, format="json").status_code == 200
    assert client_for(planner_a).patch(url, {"recipients": []}, format="json").status_code == 200
    back = {"recipients": ["planner-a@example.com"]}
    assert client_for(fleet_admin).patch(url, back, format="json").status_code == 200
    assert AlertRule.objects.get().recipients == ["planner-a@example.com"]


def test_a_recipient_who_may_not_see_the_rule_is_refused_naming_them(client_for, planner_a):
    team_viewer("viewer-b", "team-b", email="viewer-b@example.com")
    body = budget("team-a", recipients=["viewer-b@example.com", "nobody@example.com"])
    response = client_for(planner_a).post(RULES, body, format="json")
    assert response.status_code == 400
    message = str(response.json()["recipients"])
    assert "viewer-b@example.com: the account viewer-b" in message
    assert "nobody@example.com: no active account holds this address" in message

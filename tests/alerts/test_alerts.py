"""Alerts and budgets (issue 18): a rule fires once per crossing, with one e-mail through a real
SMTP server and a real worker; no data never fires; usage figures are measured by hand here."""

from __future__ import annotations

import datetime as dt
import io
import socket
from email import message_from_bytes

import pytest
from django.test import override_settings
from django.utils import timezone

from alerts.models import AlertEvent, AlertRule, RuleState
from tests.support.builders import make_user, stored_fleet_analysis
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2025, 3, 3, tzinfo=dt.UTC)
# Two hand-written jobs on inference-eu (128 L40S in the demo fleet) over the two days before NOW:
# 128 cards × 24 h + 32 cards × 24 h = 3,840 of 128 × 48 = 6,144 card-hours → 0.625.
USAGE = (
    "cluster,job_id,cards,start,end,state,accelerator_model,team,user,gpu_utilization,mfu\n"
    "inference-eu,a-1,128,2025-03-01T00:00:00Z,2025-03-02T00:00:00Z,completed,L40S,team-a,ann,,\n"
    "inference-eu,a-2,32,2025-03-02T00:00:00Z,2025-03-03T00:00:00Z,completed,L40S,team-b,bob,,\n"
)


def mfu_rule(**extra) -> AlertRule:
    fields = {
        "name": "Fleet MFU",
        "metric": "mfu",
        "scope": "fleet",
        "direction": "below",
        "threshold": 0.4,
        "recipients": ["ops@example.com"],
    }
    return AlertRule.objects.create(**{**fields, **extra})


def import_usage(cluster_name: str, text: str) -> None:
    from accounting import services
    from inventory.models import Cluster

    cluster = Cluster.objects.get(name=cluster_name)
    job = services.create_import_job(kind="csv", cluster=cluster, source_name="a.csv", queue=False)
    services.import_file(job, io.BytesIO(text.encode()))


class Inbox:
    """An aiosmtpd handler keeping every message it accepts."""

    def __init__(self) -> None:
        self.received: list[bytes] = []

    async def handle_DATA(self, server, session, envelope):
        self.received.append(envelope.content)
        return "250 OK"


@pytest.fixture
def smtp_inbox():
    from aiosmtpd.controller import Controller

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    with override_settings(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=port,
    ):
        yield inbox
    controller.stop()


@pytest.mark.worker
def test_a_rule_fires_once_per_crossing_through_the_worker(celery_worker, smtp_inbox):
    from alerts.tasks import evaluate_alerts

    # A fleet rule's e-mail goes only to an account that sees every team (access.recipients).
    make_user("ops", "viewer", email="ops@example.com")
    rule = mfu_rule()
    analysis = stored_fleet_analysis(mfu=0.30, now=NOW)

    def evaluated_after(moment):
        evaluate_alerts.delay()
        return wait_until(
            lambda: AlertRule.objects.get(pk=rule.pk),
            lambda r: r.last_evaluated_at is not None and r.last_evaluated_at > moment,
            what="the worker to evaluate the rule",
        )

    assert evaluated_after(timezone.now()).state == RuleState.FIRING
    wait_until(lambda: len(smtp_inbox.received), lambda n: n == 1, what="the first e-mail")
    # Still below: no second event, no second e-mail.
    assert evaluated_after(timezone.now()).state == RuleState.FIRING
    assert AlertEvent.objects.filter(rule=rule).count() == 1
    # Cleared, then crossed again: one more event and one more e-mail.
    analysis.results = {"summary": {"mfu": 0.55}}
    analysis.save()
    assert evaluated_after(timezone.now()).state == RuleState.OK
    assert AlertEvent.objects.get(rule=rule).cleared_at is not None
    analysis.results = {"summary": {"mfu": 0.25}}
    analysis.save()
    assert evaluated_after(timezone.now()).state == RuleState.FIRING
    wait_until(lambda: len(smtp_inbox.received), lambda n: n == 2, what="the second e-mail")
    events = list(AlertEvent.objects.filter(rule=rule).order_by("fired_at"))
    assert [e.value for e in events] == [0.30, 0.25]
    assert events[0].cleared_at is not None and events[1].cleared_at is None
    subject = message_from_bytes(smtp_inbox.received[1])["Subject"]
    assert "25.0%" in subject and "40.0%" in subject


def test_no_data_never_fires_and_says_why(demo_fleet):
    from alerts.services import evaluate
    from inventory.models import Cluster

    cluster = Cluster.objects.get(name="inference-eu")
    rule = AlertRule.objects.create(
        name="inference idle",
        metric="utilization",
        scope="cluster",
        object_id=cluster.pk,
        direction="below",
        threshold=0.6,
        window_days=2,
    )
    assert evaluate(rule, NOW) is None
    rule.refresh_from_db()
    assert rule.state == RuleState.NO_DATA and rule.last_value is None
    assert "No usage records" in rule.last_reason
    # A factor rule without an analysis: no data either, never a 0 that crosses "below".
    factor = mfu_rule()
    assert evaluate(factor, NOW) is None
    factor.refresh_from_db()
    assert factor.state == RuleState.NO_DATA and "No successful analysis" in factor.last_reason


def test_utilization_is_measured_from_the_usage_records(demo_fleet):
    from alerts.services import evaluate
    from inventory.models import Cluster

    import_usage("inference-eu", USAGE)
    cluster = Cluster.objects.get(name="inference-eu")
    below = AlertRule.objects.create(
        name="inference below 70 %",
        metric="utilization",
        scope="cluster",
        object_id=cluster.pk,
        direction="below",
        threshold=0.7,
        window_days=2,
    )
    event = evaluate(below, NOW)
    below.refresh_from_db()
    assert below.last_value == pytest.approx(3_840 / 6_144)
    assert event is not None and below.state == RuleState.FIRING
    assert "62.5%" in event.message
    above = AlertRule.objects.get(pk=below.pk)
    above.pk, above.name, above.threshold = None, "inference below 60 %", 0.6
    above.save()
    assert evaluate(above, NOW) is None
    above.refresh_from_db()
    assert above.state == RuleState.OK


def test_a_team_chargeback_budget_is_read_in_its_currency(demo_fleet):
    from alerts.services import evaluate
    from inventory.models import Cluster

    import_usage("inference-eu", USAGE)
    currency = Cluster.objects.get(name="inference-eu").site.currency
    budget = AlertRule.objects.create(
        name="team-a budget",
        metric="chargeback",
        scope="team",
        team="team-a",
        direction="above",
        threshold=1,
        currency=currency,
        window_days=2,
    )
    evaluate(budget, NOW)
    budget.refresh_from_db()
    assert budget.state == RuleState.FIRING and budget.last_value > 1
    other = "JPY" if currency != "JPY" else "CHF"
    budget.currency = other
    budget.save()
    evaluate(budget, NOW)
    budget.refresh_from_db()
    # No figure in that currency: no data (money is never converted silently).
    assert budget.last_value is None and other in budget.last_reason


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"metric": "chargeback", "scope": "fleet"}, "scope"),
        ({"metric": "idle_cost", "currency": "XXY", "threshold": 100}, "currency"),
        ({"threshold": 5}, "threshold"),
        ({"threshold": "NaN"}, "threshold"),
        ({"window_days": 1000}, "window_days"),
        ({"scope": "cluster"}, "object_id"),
        ({"recipients": ["not an address"]}, "recipients"),
    ],
)
def test_the_api_refuses_a_bad_rule_naming_the_field(client, planner, change, field):
    client.force_login(planner)
    body = {
        "name": "r",
        "metric": "mfu",
        "scope": "fleet",
        "direction": "below",
        "threshold": 0.4,
        **change,
    }
    response = client.post("/api/v1/alert-rules/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not AlertRule.objects.exists()


def test_api_creates_lists_and_acknowledges(client, planner):
    client.force_login(planner)
    body = {"name": "MFU", "metric": "mfu", "direction": "below", "threshold": 0.4}
    response = client.post("/api/v1/alert-rules/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["state"] == "no_data"
    stored_fleet_analysis(mfu=0.1, now=NOW)
    from alerts.services import evaluate

    event = evaluate(AlertRule.objects.get(), NOW)
    listed = client.get("/api/v1/alert-events/?active=true").json()["results"]
    assert [row["id"] for row in listed] == [event.pk]
    acked = client.post(f"/api/v1/alert-events/{event.pk}/acknowledge/").json()
    assert acked["acknowledged_by"] == "planner" and acked["active"] is True
    assert client.get("/api/v1/alert-events/?format=csv").status_code == 200


def test_team_users_see_only_their_teams_rules(client):
    from access.models import TeamMembership

    mfu_rule()
    AlertRule.objects.create(
        name="team-a budget",
        metric="chargeback",
        scope="team",
        team="team-a",
        direction="above",
        threshold=10,
        currency="EUR",
    )
    member = make_user("member", "viewer", all_teams=False)
    TeamMembership.objects.create(user=member, team="team-a")
    client.force_login(member)
    names = [row["name"] for row in client.get("/api/v1/alert-rules/").json()["results"]]
    assert names == ["team-a budget"]
    outsider = make_user("outsider", "viewer", all_teams=False)
    client.force_login(outsider)
    assert client.get("/api/v1/alert-rules/").json()["results"] == []
    client.logout()
    assert client.get("/alerts/").status_code == 302
    assert client.get("/api/v1/alert-rules/").status_code in (401, 403)


def test_the_page_creates_a_rule_and_acknowledges_its_event(client, planner):
    client.force_login(planner)
    stored_fleet_analysis(mfu=0.2, now=NOW)
    form = {
        "name": "Fleet MFU page",
        "metric": "mfu",
        "scope": "fleet",
        "direction": "below",
        "threshold": "0.4",
        "window_days": "7",
        "enabled": "on",
        "recipients_text": "",
    }
    response = client.post("/alerts/", form, follow=True)
    assert response.status_code == 200
    event = AlertEvent.objects.get()
    assert event.message in response.content.decode()
    client.post(f"/alerts/events/{event.pk}/acknowledge/")
    event.refresh_from_db()
    assert event.acknowledged_at is not None
    bad = client.post("/alerts/", {**form, "threshold": "7"})
    assert bad.status_code == 400 and "Must be a number from 0 to 1" in bad.content.decode()

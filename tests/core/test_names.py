"""Names that cannot break delivery (issue #28): a line break, a direction override or a
zero-width character in a name is refused on the API, the forms, the admin and the
inventory import alike (core/text.py, access/admin_names.py, engine/text.py); a name stored
before the rule no longer leaves a report in "sending" or an alert e-mail unsent, and reaches
spreadsheets without its invisible characters."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.contrib.auth.models import User
from django.core import mail
from openpyxl import load_workbook

from tests.support.builders import MARCH, VALID_SCHEDULE, stored_fleet_analysis
from tests.support.builders import finance_monthly_schedule as make_schedule

pytestmark = pytest.mark.django_db

BAD_NAMES = ["Oslo\nDC3", "Oslo\u202eDC3", "Oslo\u200bDC3", "Oslo\x00DC3"]
RULE = "A name is one line of visible text"


def refused_under(response, field: str) -> bool:
    errors = response.json()
    return response.status_code == 400 and RULE in str(errors.get(field, ""))


# -- API --------------------------------------------------------------------------------------


def api_bodies(demo: dict) -> list[tuple[str, str, dict]]:
    """(path, field, body) for every API that takes a name; the name is put in ``field``."""
    from inventory.models import AcceleratorModel, Cluster, Site

    site = Site.objects.order_by("pk").first()
    cluster = Cluster.objects.order_by("pk").first()
    card = AcceleratorModel.objects.order_by("pk").first()
    return [
        ("/api/v1/sites/", "name", {}),
        ("/api/v1/sites/", "location", {"name": "Fine"}),
        ("/api/v1/clusters/", "name", {"site": site.pk}),
        ("/api/v1/pools/", "name", {"cluster": cluster.pk, "purpose": "training"}),
        ("/api/v1/node-groups/", "name", {"accelerator": card.pk}),
        ("/api/v1/accelerator-models/", "vendor", {"name": "XPU"}),
        ("/api/v1/alert-rules/", "name", {"metric": "mfu", "scope": "fleet"}),
        ("/api/v1/alert-rules/", "team", {"name": "Fine", "metric": "chargeback"}),
        ("/api/v1/report-schedules/", "name", dict(VALID_SCHEDULE)),
        ("/api/v1/report-schedules/", "team", {**VALID_SCHEDULE, "scope": "team"}),
        ("/api/v1/plans/", "name", {}),
        ("/api/v1/inference-plans/", "name", {"inputs": {}}),
        ("/api/v1/export-tokens/", "name", {"url": "/api/v1/sites/"}),
        ("/api/v1/gres-aliases/", "gres_type", {"accelerator": card.pk}),
        ("/api/v1/partition-mappings/", "partition", {"cluster": cluster.pk}),
    ]


def test_every_api_that_takes_a_name_refuses_unsafe_ones(client_for, fleet_admin, demo_fleet):
    client = client_for(fleet_admin)
    refused = []
    for path, field, body in api_bodies(demo_fleet):
        for bad in BAD_NAMES:
            response = client.post(path, {**body, field: bad}, format="json")
            if not refused_under(response, field):
                refused.append(
                    f"{path} {field}={bad!r}: {response.status_code} {response.content[:200]!r}"
                )
    assert not refused, "\n".join(refused)


def test_the_error_names_the_character_and_a_good_name_still_saves(client_for, planner):
    client = client_for(planner)
    bad = client.post("/api/v1/sites/", {"name": "Oslo\u202eDC3"}, format="json")
    assert bad.json()["name"] == [
        "A name is one line of visible text: no control characters (line breaks, tabs), "
        "direction overrides or zero-width characters. Found U+202E (RIGHT-TO-LEFT OVERRIDE)."
    ]
    money = {"tariff_per_kwh": 0.2, "currency": "CHF"}
    good = client.post("/api/v1/sites/", {"name": "Zürich DC 東京", **money}, format="json")
    assert good.status_code == 201, good.content
    site_id = good.json()["id"]
    renamed = client.patch(f"/api/v1/sites/{site_id}/", {"name": "Zürich\r\nDC"}, format="json")
    assert refused_under(renamed, "name")


# -- forms and pages --------------------------------------------------------------------------


def test_every_form_that_takes_a_name_refuses_unsafe_ones(demo_fleet):
    from alerts.forms import AlertRuleForm
    from frontend.forms_planner import PlanForm
    from inventory.forms import (
        AcceleratorModelForm,
        ClusterForm,
        NodeGroupForm,
        PoolForm,
        SiteForm,
    )
    from reports.forms import ScheduleForm

    forms = [
        (SiteForm, "name"),
        (SiteForm, "location"),
        (ClusterForm, "name"),
        (PoolForm, "name"),
        (NodeGroupForm, "name"),
        (AcceleratorModelForm, "vendor"),
        (AcceleratorModelForm, "name"),
        (AlertRuleForm, "name"),
        (AlertRuleForm, "team"),
        (ScheduleForm, "name"),
        (PlanForm, "name"),
    ]
    kept = []
    for form_class, field in forms:
        for bad in BAD_NAMES:
            form = build_form(form_class, {field: bad})
            if form.is_valid() or RULE not in " ".join(form.errors.get(field, [])):
                kept.append(f"{form_class.__name__}.{field}={bad!r}: {form.errors.get(field)}")
    assert not kept, "\n".join(kept)


def build_form(form_class, data: dict):
    from alerts.forms import AlertRuleForm

    if form_class is AlertRuleForm:
        user = User.objects.filter(is_superuser=True).first() or User.objects.create_superuser(
            "names-root", password="pw"
        )
        return form_class(data, user=user)
    return form_class(data)


def test_the_site_page_refuses_a_line_break_and_saves_nothing(client, planner):
    from inventory.models import Site

    client.force_login(planner)
    response = client.post("/inventory/sites/new/", {"name": "Oslo\nDC3", "cooling_type": "air"})
    assert response.status_code == 200  # the form again, with its error
    assert RULE in response.content.decode()
    assert not Site.objects.filter(name__startswith="Oslo").exists()


def test_saving_an_inference_plan_from_the_tab_refuses_an_unsafe_name(client_for, planner):
    from django.contrib.messages import get_messages

    from planner.models import InferencePlan
    from tests.support.inference_inputs import TAB_QUERY

    data = {**TAB_QUERY, "name": "Chat\u202eon L4"}
    response = client_for(planner).post("/planner/inference/save/", data, format="multipart")
    assert response.status_code == 302 and "/planner/inference/" in response["Location"]
    (message,) = [str(m) for m in get_messages(response.wsgi_request)]
    assert message.startswith("Not saved: name: " + RULE)
    assert not InferencePlan.objects.exists()


def test_the_admin_refuses_unsafe_team_and_display_names(client):
    root = User.objects.create_superuser("names-admin", password="pw-names-admin")
    other = User.objects.create_user("someone", password="pw-someone")
    client.force_login(root)
    team = client.post(
        "/admin/access/teammembership/add/", {"user": other.pk, "team": "team\u202ea"}
    )
    assert team.status_code == 200 and RULE in team.content.decode()
    change = client.get(f"/admin/auth/user/{other.pk}/change/")
    assert change.status_code == 200
    form = {
        "username": "someone",
        "first_name": "Ann\u200b",
        "last_name": "Lee",
        "email": "",
        "is_active": "on",
        "date_joined_0": "2024-01-01",
        "date_joined_1": "00:00:00",
    }
    renamed = client.post(f"/admin/auth/user/{other.pk}/change/", form)
    assert renamed.status_code == 200 and RULE in renamed.content.decode()
    other.refresh_from_db()
    assert other.first_name == ""


def test_an_inventory_import_row_with_an_unsafe_name_is_a_row_error(demo_fleet):
    from inventory.imports.reading import parse_text
    from inventory.imports.rows import preview_import

    text = (
        "name,location,tariff_per_kwh,currency\nOslo\u202eDC3,Norway,0.1,NOK\n"
        "Bergen,Nor\u200bway,0.1,NOK\nFine,Norway,0.1,NOK\n"
    )
    preview = preview_import("sites", parse_text(text))
    messages = [str(error) for row in preview.rows for error in row.errors]
    assert len(messages) == 2, messages
    assert messages[0].startswith("row 2, column name: " + RULE)
    assert "U+202E (RIGHT-TO-LEFT OVERRIDE)" in messages[0]
    assert messages[1].startswith("row 3, column location: " + RULE)


# -- delivery of names stored before the rule ------------------------------------------------


def mailed_schedule(user):
    """The finance schedule e-mailed to ``user`` (an account that sees every team)."""
    user.email = "reader@example.com"
    user.save()
    schedule = make_schedule(recipient_addresses=[])
    schedule.recipient_users.add(user)
    return schedule


def generated_report(schedule):
    from reports import services

    report, _ = services.get_or_create_report(schedule, MARCH)
    assert services.generate(report.pk).done
    report.refresh_from_db()
    return report


def test_a_report_of_a_schedule_named_with_a_line_break_is_delivered(report_fleet, viewer):
    from reports import services
    from reports.models import ReportSchedule, ReportStatus

    schedule = mailed_schedule(viewer)
    # Stored before names were checked: the ORM takes what the forms now refuse.
    ReportSchedule.objects.filter(pk=schedule.pk).update(name="Finance\r\nmonthly\u202e")
    schedule.refresh_from_db()
    report = generated_report(schedule)
    outcome = services.deliver(report.pk)
    report.refresh_from_db()
    assert outcome.done and report.status == ReportStatus.DELIVERED, report.error
    assert mail.outbox[0].subject == "Finance monthly: 2024-03-01 – 2024-03-31"


def test_an_email_that_cannot_be_built_fails_the_delivery_with_its_reason(report_fleet, viewer):
    from reports import services
    from reports.models import Report, ReportStatus

    report = generated_report(mailed_schedule(viewer))
    # Figures the e-mail cannot render (as stored by an older version): not an SMTP error.
    Report.objects.filter(pk=report.pk).update(numbers={"period": "unreadable"})
    outcome = services.deliver(report.pk)
    report.refresh_from_db()
    assert not outcome.done
    assert report.status == ReportStatus.DELIVERY_FAILED
    assert report.error.startswith("The e-mail could not be built: ")
    assert report.claimed_at is None and not mail.outbox


def test_an_alert_of_a_rule_named_with_a_line_break_is_e_mailed(demo_fleet, viewer):
    from alerts import services
    from alerts.models import AlertEvent, AlertRule

    viewer.email = "reader@example.com"
    viewer.save()
    stored_fleet_analysis(mfu=0.2)
    rule = AlertRule.objects.create(
        name="Fleet\nMFU\u200b",
        metric="mfu",
        scope="fleet",
        direction="below",
        threshold=0.4,
        recipients=["reader@example.com"],
        created_by=viewer,
    )
    event = services.evaluate(rule, now=None)
    assert event is not None
    assert services.notify(event.pk)
    event.refresh_from_db()
    assert event.notified_at is not None and event.notify_error == ""
    subject = mail.outbox[0].subject
    assert subject.startswith("[Fleetwise alert] Fleet MFU: ")
    assert not re.search(r"[\r\n\u200b]", subject)
    assert AlertEvent.objects.count() == 1


# -- spreadsheets of names stored before the rule --------------------------------------------


def test_spreadsheet_exports_drop_overrides_and_zero_widths(client_for, viewer, demo_fleet):
    from inventory.models import Site

    Site.objects.create(name="\u202eexe.txt")
    Site.objects.create(name='\u200b=HYPERLINK("http://x")')
    client = client_for(viewer)
    text = client.get("/api/v1/sites/", {"format": "csv", "page_size": 500})
    assert text.status_code == 200
    body = b"".join(text.streaming_content) if text.streaming else text.content
    names = [row["name"] for row in csv.DictReader(io.StringIO(body.decode()))]
    assert "exe.txt" in names
    assert '\'=HYPERLINK("http://x")' in names  # stripped, then seen as a formula
    assert not any(re.search("[\u202e\u200b]", name) for name in names)
    book = client.get("/api/v1/sites/", {"format": "xlsx", "page_size": 500})
    body = b"".join(book.streaming_content) if book.streaming else book.content
    cells = [c for row in load_workbook(io.BytesIO(body)).active.iter_rows() for c in row]
    texts = [c.value for c in cells if isinstance(c.value, str)]
    assert "exe.txt" in texts and '=HYPERLINK("http://x")' in texts
    formula = next(c for c in cells if c.value == '=HYPERLINK("http://x")')
    assert formula.data_type == "s" and formula.quotePrefix
    assert not any(re.search("[\u202e\u200b]", value) for value in texts)

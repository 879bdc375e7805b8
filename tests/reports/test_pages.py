"""Report pages: login everywhere; viewers read, planners run and preview, admins manage."""

from __future__ import annotations

import datetime as dt

import pytest

from reports import periods, services
from reports.models import Report, ReportSchedule
from tests.support.builders import APR, MAR, mailbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def generated(report_fleet):
    schedule = services.save_schedule(
        ReportSchedule(
            name="Fleet monthly",
            frequency="monthly",
            template="efficiency_review",
            formats=["html_email", "xlsx", "csv", "print_html"],
        )
    )
    report, _ = services.get_or_create_report(schedule, periods.Period(MAR, APR))
    services.generate(report.pk)
    report.refresh_from_db()
    return schedule, report


def urls_of(schedule, report) -> dict[str, list[str]]:
    s, r = schedule.pk, report.pk
    return {
        "read": [
            "/reports/",
            f"/reports/{r}/",
            f"/reports/{r}/view/",
            f"/reports/{r}/download/xlsx/",
            "/reports/schedules/",
            f"/reports/schedules/{s}/",
        ],
        "run": [f"/reports/schedules/{s}/run/", f"/reports/schedules/{s}/preview/"],
        "manage": [
            "/reports/schedules/new/",
            f"/reports/schedules/{s}/edit/",
            f"/reports/schedules/{s}/delete/",
        ],
    }


def test_anonymous_goes_to_login_everywhere(client, generated):
    urls = urls_of(*generated)
    for url in urls["read"] + urls["run"] + urls["manage"]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/"), url


def test_viewer_reads_but_cannot_run_or_manage(client, viewer, generated):
    schedule, report = generated
    urls = urls_of(schedule, report)
    client.force_login(viewer)
    for url in urls["read"]:
        assert client.get(url).status_code == 200, url
    for url in urls["run"] + urls["manage"]:
        assert client.get(url).status_code == 403, url
    assert client.post(f"/reports/schedules/{schedule.pk}/pause/").status_code == 403
    assert client.post(f"/reports/{report.pk}/retry-delivery/").status_code == 403
    html = client.get(f"/reports/{report.pk}/").content.decode()
    assert "Effective utilization" in html and "Download XLSX" in html
    assert "Retry delivery" not in html


def test_no_role_user_reads_nothing(client, no_role_user, generated):
    client.force_login(no_role_user)
    for url in urls_of(*generated)["read"]:
        assert client.get(url).status_code == 403, url


def test_archive_lists_reports_with_downloads_and_filters(client, viewer, generated):
    schedule, report = generated
    client.force_login(viewer)
    html = client.get("/reports/").content.decode()
    assert "Fleet monthly" in html and "2024-03-01 – 2024-03-31" in html
    assert f"/reports/{report.pk}/download/xlsx/" in html
    assert "1 report." in html
    assert "0 reports." in client.get("/reports/", {"status": "failed"}).content.decode()
    download = client.get(f"/reports/{report.pk}/download/csv/")
    assert download["Content-Type"].startswith("text/csv")
    assert b"section,group,name,metric,value" in b"".join(download.streaming_content)


def test_planner_runs_now_and_a_second_run_sends_nothing_new(client, planner, generated):
    schedule, report = generated
    client.force_login(planner)
    page = client.get(f"/reports/schedules/{schedule.pk}/run/")
    assert page.status_code == 200
    response = client.post(f"/reports/schedules/{schedule.pk}/run/", {"day": "2024-03-09"})
    assert response.status_code == 302
    assert response["Location"] == f"/reports/{report.pk}/"  # the existing March report
    follow = client.get(response["Location"]).content.decode()
    assert "already exists" in follow
    response = client.post(
        f"/reports/schedules/{schedule.pk}/run/", {"day": "2024-02-09", "deliver": "on"}
    )
    february = Report.objects.get(period_start=dt.datetime(2024, 2, 1, tzinfo=dt.UTC))
    assert response["Location"] == f"/reports/{february.pk}/"
    assert february.requested_by == planner and february.trigger == "manual"
    bad = client.post(f"/reports/schedules/{schedule.pk}/run/", {"day": "2099-01-01"})
    assert bad.status_code == 200 and "has not ended yet" in bad.content.decode()


def test_planner_previews_a_period_without_storing_it(client, planner, generated):
    schedule, _ = generated
    client.force_login(planner)
    response = client.get(f"/reports/schedules/{schedule.pk}/preview/", {"day": "2024-02-10"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "2024-02-01 – 2024-02-29" in html and "data:image/png;base64," in html
    assert Report.objects.count() == 1
    bad = client.get(f"/reports/schedules/{schedule.pk}/preview/", {"day": "soon"})
    assert bad.status_code == 400 and "day" in bad.content.decode()


def test_admin_creates_edits_pauses_and_deletes_a_schedule(client, fleet_admin, report_fleet):
    for address in ("owner@example.com", "ops@example.com"):
        mailbox(address)
    client.force_login(fleet_admin)
    assert client.get("/reports/schedules/new/").status_code == 200
    form = {
        "name": "Alpha weekly",
        "template": "utilization",
        "scope": "cluster",
        "cluster": report_fleet["alpha"].pk,
        "site": report_fleet["site"].pk,  # not the chosen scope: dropped, not an error
        "frequency": "weekly",
        "send_time": "08:30",
        "timezone": "Europe/Berlin",
        "recipient_addresses": "owner@example.com\nops@example.com, owner@example.com",
        "formats": ["html_email", "xlsx"],
        "enabled": "on",
    }
    response = client.post("/reports/schedules/new/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    schedule = ReportSchedule.objects.get(name="Alpha weekly")
    assert schedule.owner == fleet_admin and schedule.site is None
    assert schedule.recipient_addresses == ["owner@example.com", "ops@example.com"]
    assert schedule.next_run_at.astimezone(schedule.spec().tz).strftime("%a %H:%M") == "Mon 08:30"
    bad = client.post(
        f"/reports/schedules/{schedule.pk}/edit/",
        {**form, "frequency": "cron", "cron_expression": "0 25 * * *"},
    )
    assert bad.status_code == 200
    assert "outside 0-23 in the hour field" in bad.content.decode()
    client.post(f"/reports/schedules/{schedule.pk}/pause/")
    schedule.refresh_from_db()
    assert not schedule.enabled and schedule.next_run_at is None
    assert client.get(f"/reports/schedules/{schedule.pk}/delete/").status_code == 200
    client.post(f"/reports/schedules/{schedule.pk}/delete/")
    assert not ReportSchedule.objects.filter(pk=schedule.pk).exists()


def test_planner_cannot_manage_schedules(client, planner, generated):
    schedule, _ = generated
    client.force_login(planner)
    assert client.get("/reports/schedules/new/").status_code == 403
    assert client.post(f"/reports/schedules/{schedule.pk}/pause/").status_code == 403
    html = client.get(f"/reports/schedules/{schedule.pk}/").content.decode()
    assert "Run now" in html and "Edit" not in html


def test_the_nav_link_opens_the_archive(client, viewer):
    client.force_login(viewer)
    html = client.get("/reports/").content.decode()
    assert '<a href="/reports/" aria-current="page">Reports</a>' in html


def test_demo_schedules_load_once(demo_fleet):
    from django.core.management import call_command

    call_command("load_demo_reports")
    call_command("load_demo_reports")
    assert ReportSchedule.objects.count() == 3
    assert set(ReportSchedule.objects.values_list("frequency", flat=True)) == {
        "weekly",
        "monthly",
        "quarterly",
    }
    assert all(s.next_run_at for s in ReportSchedule.objects.all())
    # Each list address has an account that sees every team, so the reports reach it.
    from reports.authorization import deliverable

    for schedule in ReportSchedule.objects.all():
        assert deliverable(schedule).withheld == (), schedule.name


def test_django_admin_lists_schedules_and_reports(client, django_user_model, generated):
    client.force_login(django_user_model.objects.create_superuser("root", "", "pw"))
    assert "Fleet monthly" in client.get("/admin/reports/reportschedule/").content.decode()
    assert client.get("/admin/reports/report/").status_code == 200

"""The report API: roles per action, validation naming the field, run now, downloads, exports."""

from __future__ import annotations

import io

import pytest
from openpyxl import load_workbook

from reports import periods, services
from reports.models import Report, ReportSchedule
from tests.support.builders import APR, MAR, SCHEDULES, VALID_SCHEDULE

pytestmark = pytest.mark.django_db

REPORTS = "/api/v1/reports/"


def test_admins_create_schedules_with_the_next_local_firing(client_for, fleet_admin):
    response = client_for(fleet_admin).post(SCHEDULES, VALID_SCHEDULE, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["owner"] == fleet_admin.pk
    schedule = ReportSchedule.objects.get(pk=body["id"])
    assert schedule.next_run_at is not None
    local = schedule.next_run_at.astimezone(schedule.spec().tz)
    assert (local.weekday(), local.hour, local.minute) == (0, 8, 0)


@pytest.mark.parametrize("user_fixture", ["viewer", "planner"])
def test_viewers_and_planners_cannot_change_schedules(request, client_for, user_fixture):
    user = request.getfixturevalue(user_fixture)
    client = client_for(user)
    assert client.get(SCHEDULES).status_code == 200
    assert client.post(SCHEDULES, VALID_SCHEDULE, format="json").status_code == 403
    schedule = services.save_schedule(ReportSchedule(name="x"))
    assert client.patch(f"{SCHEDULES}{schedule.pk}/", {"enabled": False}).status_code == 403
    assert client.delete(f"{SCHEDULES}{schedule.pk}/").status_code == 403


def test_no_role_and_anonymous_read_nothing(client_for, no_role_user):
    for client in (client_for(no_role_user), client_for(None)):
        assert client.get(SCHEDULES).status_code in (401, 403)
        assert client.get(REPORTS).status_code in (401, 403)


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"timezone": "Mars/Olympus"}, "timezone", "Unknown time zone"),
        ({"frequency": "cron", "cron_expression": "61 * * * *"}, "cron_expression", "0-59"),
        ({"frequency": "cron"}, "cron_expression", "5 fields"),
        ({"scope": "site"}, "site", "Choose the site"),
        ({"scope": "team"}, "team", "Choose the team"),
        ({"recipient_addresses": ["not-an-address"]}, "recipient_addresses", "valid email"),
        ({"formats": ["pdf"]}, "formats", "not a valid choice"),
        ({"formats": []}, "formats", "empty"),
        ({"frequency": "hourly"}, "frequency", "not a valid choice"),
    ],
)
def test_bad_input_names_the_field(client_for, fleet_admin, change, field, fragment):
    response = client_for(fleet_admin).post(SCHEDULES, {**VALID_SCHEDULE, **change}, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert field in errors, errors
    assert fragment.lower() in str(errors[field]).lower(), errors


def test_admins_pause_and_resume_by_patch(client_for, fleet_admin):
    client = client_for(fleet_admin)
    schedule_id = client.post(SCHEDULES, VALID_SCHEDULE, format="json").json()["id"]
    paused = client.patch(f"{SCHEDULES}{schedule_id}/", {"enabled": False}, format="json").json()
    assert paused["enabled"] is False and paused["next_run_at"] is None
    resumed = client.patch(f"{SCHEDULES}{schedule_id}/", {"enabled": True}, format="json").json()
    assert resumed["next_run_at"] is not None


def test_planners_run_now_once_per_period_and_viewers_may_not(
    client_for, planner, viewer, report_fleet
):
    schedule = services.save_schedule(ReportSchedule(name="Monthly", frequency="monthly"))
    url = f"{SCHEDULES}{schedule.pk}/run/"
    assert client_for(viewer).post(url, {"day": "2024-03-15"}, format="json").status_code == 403
    client = client_for(planner)
    first = client.post(url, {"day": "2024-03-15"}, format="json")
    assert first.status_code == 202, first.content
    assert first.json()["queued"] is True
    assert first.json()["report"]["period_start"].startswith("2024-03-01")
    second = client.post(url, {"day": "2024-03-31"}, format="json")
    assert second.status_code == 200 and second.json()["queued"] is False
    assert second.json()["report"]["id"] == first.json()["report"]["id"]
    assert Report.objects.count() == 1
    future = client.post(url, {"day": "2999-01-01"}, format="json")
    assert future.status_code == 400 and "day" in future.json()


def test_preview_returns_numbers_for_planners_only(client_for, planner, viewer, report_fleet):
    schedule = services.save_schedule(ReportSchedule(name="Monthly", frequency="monthly"))
    url = f"{SCHEDULES}{schedule.pk}/preview/"
    assert client_for(viewer).get(url, {"day": "2024-03-10"}).status_code == 403
    body = client_for(planner).get(url, {"day": "2024-03-10"}).json()
    assert body["period"]["label"] == "2024-03-01 – 2024-03-31"
    assert body["summary"]["factors"][0]["name"] == "effective_utilization"
    assert not Report.objects.exists()


def test_reports_list_detail_download_and_exports(client_for, viewer, report_fleet):
    schedule = services.save_schedule(
        ReportSchedule(name="Monthly", frequency="monthly", formats=["xlsx", "csv"])
    )
    report, _ = services.get_or_create_report(schedule, periods.Period(MAR, APR))
    services.generate(report.pk)
    client = client_for(viewer)
    listed = client.get(REPORTS, {"schedule": schedule.pk}).json()
    assert listed["count"] == 1
    row = listed["results"][0]
    assert "numbers" not in row  # lists stay small
    assert row["files"]["xlsx"].endswith(f"/api/v1/reports/{report.pk}/download/xlsx/")
    assert row["files"]["print_html"] is None
    detail = client.get(f"{REPORTS}{report.pk}/").json()
    assert detail["numbers"]["period"]["label"] == "2024-03-01 – 2024-03-31"
    download = client.get(row["files"]["xlsx"])
    assert download.status_code == 200
    assert "attachment" in download["Content-Disposition"]
    workbook = load_workbook(io.BytesIO(b"".join(download.streaming_content)))
    assert "Summary" in workbook.sheetnames
    assert client.get(f"{REPORTS}{report.pk}/download/print_html/").status_code == 404
    exported = client.get(REPORTS, {"format": "csv"})
    assert exported.status_code == 200
    text = (
        b"".join(exported.streaming_content) if exported.streaming else exported.content
    ).decode()
    assert "period_start" in text.splitlines()[0]
    xlsx = client.get(REPORTS, {"format": "xlsx", "page": 1})
    assert xlsx.status_code == 200
    assert load_workbook(io.BytesIO(xlsx.content)).active.max_row >= 2
    schedules_csv = client.get(SCHEDULES, {"format": "csv"})
    assert schedules_csv.status_code == 200


def test_retry_delivery_needs_a_failed_delivery(client_for, planner, viewer, report_fleet):
    schedule = services.save_schedule(ReportSchedule(name="Monthly", frequency="monthly"))
    report, _ = services.get_or_create_report(schedule, periods.Period(MAR, APR))
    url = f"{REPORTS}{report.pk}/retry-delivery/"
    assert client_for(viewer).post(url).status_code == 403
    response = client_for(planner).post(url)
    assert response.status_code == 409
    Report.objects.filter(pk=report.pk).update(status="delivery_failed", error="SMTP down")
    assert client_for(planner).post(url).status_code == 202


def test_lists_take_a_constant_number_of_queries(
    client_for, fleet_admin, django_assert_max_num_queries, report_fleet
):
    client = client_for(fleet_admin)
    fleet_admin.email = "a@example.com"
    fleet_admin.save()

    def add(count: int, offset: int) -> None:
        for index in range(count):
            schedule = services.save_schedule(
                ReportSchedule(
                    name=f"s{offset + index}", scope="cluster", cluster=report_fleet["alpha"]
                )
            )
            schedule.recipient_users.add(fleet_admin)
            services.get_or_create_report(schedule, periods.Period(MAR, APR))

    add(2, 0)
    for url in (SCHEDULES, REPORTS):
        client.get(url)  # warm caches (content types, sessions)
    counts = {}
    for url in (SCHEDULES, REPORTS):
        with django_assert_max_num_queries(20) as captured:
            client.get(url)
        counts[url] = len(captured)
    add(8, 2)
    for url in (SCHEDULES, REPORTS):
        with django_assert_max_num_queries(counts[url]):
            assert client.get(url).json()["count"] == 10

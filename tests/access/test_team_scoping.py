"""Team scoping: a viewer tied to team-a never sees team-b or team-c rows, in the API (JSON,
CSV, XLSX), export links and background exports (run as their owner), the Usage and Costs
pages, their chart downloads, and reports. Viewers with the fleet-wide grant (the fixtures'
default, `tests.support.builders.make_user`) see every team."""

from __future__ import annotations

import io
import json

import openpyxl
import pandas as pd
import pytest

from tests.support.alpha_usage import OTHER_TEAMS, TEAM
from tests.support.builders import team_viewer

pytestmark = pytest.mark.django_db

DAY = {"start": "2024-03-01", "end": "2024-03-02", "granularity": "day"}
MONTH = {"start": "2024-03-01", "end": "2024-04-01", "granularity": "month"}
# Job 1001 (team-a): 8 cards × 6 h on 2024-03-01.
TEAM_A_CARD_HOURS = 48.0


def text_of(response) -> str:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return body.decode()


def xlsx_values(content: bytes) -> list[tuple]:
    book = openpyxl.load_workbook(io.BytesIO(content))
    return list(book.worksheets[0].iter_rows(values_only=True))


def assert_no_other_team(text: str, where: str) -> None:
    for team in OTHER_TEAMS:
        assert team not in text, f"{team} leaks into {where}"


@pytest.fixture
def as_team_a(team_usage, team_a_viewer, client_for):
    return client_for(team_a_viewer)


@pytest.fixture
def as_everyone(team_usage, viewer, client_for):
    return client_for(viewer)


def test_visible_teams():
    from django.contrib.auth.models import AnonymousUser

    from access.scoping import visible_teams
    from tests.support.builders import make_user

    assert visible_teams(AnonymousUser()) == frozenset()
    assert visible_teams(make_user("plain", "viewer")) is None
    assert visible_teams(team_viewer("two", "team-a", "team-b")) == {"team-a", "team-b"}
    # Administrators manage memberships: a membership does not hide anything from them.
    assert visible_teams(team_viewer("boss", "team-a", role="admin")) is None


def test_usage_records_list_detail_and_files(as_team_a, as_everyone, team_usage):
    listed = as_team_a.get("/api/v1/usage-records/").json()
    assert [row["team"] for row in listed["results"]] == [TEAM]
    assert len(as_everyone.get("/api/v1/usage-records/").json()["results"]) == 3
    for team, record in team_usage.records.items():
        expected = 200 if team == TEAM else 404
        assert as_team_a.get(f"/api/v1/usage-records/{record.pk}/").status_code == expected
        assert as_everyone.get(f"/api/v1/usage-records/{record.pk}/").status_code == 200
    # A search or filter for another team finds nothing.
    assert as_team_a.get("/api/v1/usage-records/", {"search": "team-b"}).json()["count"] == 0
    csv_text = text_of(as_team_a.get("/api/v1/usage-records/", {"format": "csv"}))
    assert TEAM in csv_text
    assert_no_other_team(csv_text, "usage-records CSV")
    rows = xlsx_values(as_team_a.get("/api/v1/usage-records/", {"format": "xlsx"}).content)
    assert len(rows) == 2 and TEAM in rows[1]
    assert_no_other_team(repr(rows), "usage-records XLSX")
    assert "team-b" in text_of(as_everyone.get("/api/v1/usage-records/", {"format": "csv"}))


def test_utilization_by_team(as_team_a, as_everyone):
    query = {**DAY, "group_by": "team"}
    rows = as_team_a.get("/api/v1/accounting/utilization/", query).json()["rows"]
    assert [row["team"] for row in rows] == [TEAM]
    assert rows[0]["allocated_card_hours"] == pytest.approx(TEAM_A_CARD_HOURS)
    everyone = as_everyone.get("/api/v1/accounting/utilization/", query).json()["rows"]
    assert {row["team"] for row in everyone} == {TEAM, *OTHER_TEAMS}
    # Asking for another team by name answers no rows, not that team's.
    other = as_team_a.get("/api/v1/accounting/utilization/", {**query, "team": "team-b"})
    assert other.status_code == 200 and other.json()["rows"] == []
    csv_text = text_of(
        as_team_a.get("/api/v1/accounting/utilization/rows/", {**query, "format": "csv"})
    )
    assert TEAM in csv_text
    assert_no_other_team(csv_text, "utilization rows CSV")


@pytest.mark.parametrize("idle_rule", ["proportional", "none"])
def test_chargeback_report_and_rows(as_team_a, as_everyone, idle_rule):
    query = {**MONTH, "idle_rule": idle_rule}
    report = as_team_a.get("/api/v1/accounting/chargeback/", query).json()
    assert [row["team"] for row in report["rows"]] == [TEAM]
    full = as_everyone.get("/api/v1/accounting/chargeback/", query).json()
    full_a = [row for row in full["rows"] if row["team"] == TEAM]
    assert report["rows"] == full_a
    # The bucket's charged cost is what the visible rows charge; the pools' total is unchanged.
    assert report["totals"][0]["charged_cost"] == pytest.approx(full_a[0]["chargeback_cost"])
    assert report["totals"][0]["total_cost"] == pytest.approx(full["totals"][0]["total_cost"])
    assert_no_other_team(json.dumps(report), "chargeback JSON")
    for fmt in ("csv", "xlsx"):
        response = as_team_a.get("/api/v1/accounting/chargeback/rows/", {**query, "format": fmt})
        assert response.status_code == 200
        text = text_of(response) if fmt == "csv" else repr(xlsx_values(response.content))
        assert TEAM in text
        assert_no_other_team(text, f"chargeback rows {fmt}")


def test_export_token_and_export_job_run_scoped_as_owner(
    as_team_a, team_a_viewer, client, django_capture_on_commit_callbacks
):
    from exports import services
    from exports.models import ExportJob

    created = as_team_a.post(
        "/api/v1/export-tokens/",
        {"name": "mine", "url": "/api/v1/usage-records/", "format": "csv"},
        format="json",
    )
    assert created.status_code == 201, created.content
    fetched = client.get(f"/api/v1/export/{created.json()['token']}/")
    assert fetched.status_code == 200
    text = text_of(fetched)
    assert TEAM in text
    assert_no_other_team(text, "export link")
    chargeback = services.create_token(
        owner=team_a_viewer,
        name="chargeback",
        url="/api/v1/accounting/chargeback/rows/?start=2024-03-01&end=2024-04-01",
    )[1]
    text = text_of(client.get(f"/api/v1/export/{chargeback}/"))
    assert TEAM in text
    assert_no_other_team(text, "chargeback export link")

    with django_capture_on_commit_callbacks(execute=False):
        job = as_team_a.post(
            "/api/v1/export-jobs/", {"url": "/api/v1/usage-records/"}, format="json"
        )
    assert job.status_code == 202
    built = services.build_xlsx(job.json()["id"])
    assert built.status == "succeeded", built.error
    with ExportJob.objects.get(pk=built.pk).file.open("rb") as handle:
        rows = xlsx_values(handle.read())
    assert len(rows) == 2 and TEAM in rows[1]
    assert_no_other_team(repr(rows), "background XLSX export")


def test_usage_and_costs_pages_and_chart_downloads(as_team_a, as_everyone):
    usage_team = {**DAY, "group_by": "team"}
    costs = {"start": "2024-03-01", "end": "2024-04-01", "granularity": "month"}
    pages = [("/usage/", usage_team), ("/usage/", DAY), ("/costs/", costs)]
    downloads = [
        ("usage-team-heatmap", DAY),
        ("usage-utilization", usage_team),
        ("costs-chargeback", costs),
        ("costs-chargeback", {**costs, "idle_rule": "none"}),
    ]
    # The unscoped viewer first: the shared cache then holds every team's numbers.
    for url, query in pages:
        assert "team-b" in as_everyone.get(url, query).content.decode(), url
    for key, query in downloads:
        assert "team-b" in text_of(as_everyone.get(f"/charts/{key}.csv", query)), key
    for url, query in pages:
        response = as_team_a.get(url, query)
        assert response.status_code == 200
        html = response.content.decode()
        assert TEAM in html, url
        assert_no_other_team(html, f"{url}?{query}")
    for key, query in downloads:
        for fmt in ("csv", "xlsx"):
            response = as_team_a.get(f"/charts/{key}.{fmt}", query)
            assert response.status_code == 200
            if fmt == "csv":
                frame = pd.read_csv(io.StringIO(text_of(response)))
                assert set(frame["team"]) == {TEAM}, key
            else:
                assert_no_other_team(repr(xlsx_values(response.content)), f"{key}.xlsx")


def test_reports_of_other_teams_are_hidden(as_team_a, as_everyone, client_for, team_usage):
    import datetime as dt

    from reports.models import Report, ReportSchedule

    schedules = {
        name: ReportSchedule.objects.create(
            name=f"weekly {name}", scope="team" if name != "fleet" else "fleet", team=team
        )
        for name, team in (("team-a", "team-a"), ("team-b", "team-b"), ("fleet", ""))
    }
    start = dt.datetime(2024, 3, 4, tzinfo=dt.UTC)
    reports = {
        name: Report.objects.create(
            schedule=schedule, period_start=start, period_end=start + dt.timedelta(days=7)
        )
        for name, schedule in schedules.items()
    }
    listed = as_team_a.get("/api/v1/reports/").json()["results"]
    assert [row["id"] for row in listed] == [reports["team-a"].pk]
    assert len(as_everyone.get("/api/v1/reports/").json()["results"]) == 3
    names = [row["name"] for row in as_team_a.get("/api/v1/report-schedules/").json()["results"]]
    assert names == ["weekly team-a"]
    for name in ("team-b", "fleet"):
        assert as_team_a.get(f"/api/v1/reports/{reports[name].pk}/").status_code == 404
        assert as_team_a.get(f"/reports/{reports[name].pk}/").status_code == 404
        assert as_team_a.get(f"/reports/schedules/{schedules[name].pk}/").status_code == 404
        assert as_everyone.get(f"/reports/{reports[name].pk}/").status_code == 200
    assert as_team_a.get(f"/reports/{reports['team-a'].pk}/").status_code == 200
    for url in ("/reports/", "/reports/schedules/"):
        html = as_team_a.get(url).content.decode()
        assert "weekly team-a" in html
        assert_no_other_team(html, url)
        assert "weekly fleet" not in html
    # A team-a planner cannot preview another team's report.
    planner_a = client_for(team_viewer("planner-a", TEAM, role="planner"))
    preview = f"/api/v1/report-schedules/{schedules['team-b'].pk}/preview/"
    assert planner_a.get(preview).status_code == 404
    assert planner_a.get(f"/reports/schedules/{schedules['team-b'].pk}/preview/").status_code == 404

"""Generation: one report per schedule and period, its numbers, and the XLSX with charts."""

from __future__ import annotations

import io

import pytest
from openpyxl import load_workbook

from reports import content, services
from reports.models import Report, ReportStatus
from tests.support.builders import APR, FEB, MAR, MARCH
from tests.support.builders import fleet_monthly_schedule as make_schedule

pytestmark = pytest.mark.django_db


def test_numbers_compare_with_the_previous_period(report_fleet):
    numbers = content.build_numbers(make_schedule(), MARCH)
    assert numbers["period"]["label"] == "2024-03-01 – 2024-03-31"
    assert numbers["previous_period"]["start"] == FEB.isoformat()
    factors = {row["name"]: row for row in numbers["summary"]["factors"]}
    # alpha ran 12 cards × 20 h/day in February and 8 × 16 h in March: utilization fell.
    assert factors["utilization"]["value"] < factors["utilization"]["previous"]
    assert factors["utilization"]["arrow"] == "▼"
    assert factors["utilization"]["better"] is False
    assert set(factors) == {
        "effective_utilization",
        "energy",
        "mfu",
        "scaling",
        "effective_time",
        "utilization",
    }
    alpha = next(r for r in numbers["utilization"]["cluster"] if r["name"] == "alpha")
    assert alpha["allocated_card_hours"] == pytest.approx(8 * 16 * 31 + 2 * 2 * 31)
    assert alpha["available_card_hours"] == pytest.approx(16 * 24 * 31)
    top = numbers["idle"]["top_pools"][0]
    assert (top["cluster"], top["pool"]) == ("alpha", "h100")
    assert numbers["failures"]["clusters"][0]["node_fail_jobs"] == 31
    assert len(numbers["recommendations"]) == 3
    first = numbers["recommendations"][0]
    assert first["text"].startswith(
        "Utilization is the biggest loss in cluster alpha: 66% of the card-hours idle"
    )
    # A month's report gives the month's figure: nothing extrapolated.
    assert "in these 31 days" in first["text"] and "a month" not in first["text"]
    assert "$" in first["text"] and first["lost_cost_per_month"] is None
    teams = {row["team"] for row in numbers["chargeback"]["teams"]}
    assert teams == {"team-a", "team-b", "team-c"}


def test_generate_stores_numbers_and_files_once(report_fleet):
    schedule = make_schedule()
    report, created = services.get_or_create_report(schedule, MARCH)
    again, created_again = services.get_or_create_report(schedule, MARCH)
    assert created and not created_again and again.pk == report.pk
    assert services.generate(report.pk).done
    assert not services.generate(report.pk).done  # already generated: nothing redone
    report.refresh_from_db()
    assert report.status == ReportStatus.GENERATED
    assert report.numbers["schedule"]["id"] == schedule.pk
    assert report.recipients == ["finance@example.com"]
    assert report.available_formats == ["xlsx", "csv", "print_html"]
    assert Report.objects.count() == 1


def test_xlsx_opens_and_holds_native_charts_and_data_sheets(report_fleet):
    numbers = content.build_numbers(make_schedule(), MARCH)
    from reports.render import render_xlsx

    workbook = load_workbook(io.BytesIO(render_xlsx(numbers)))
    assert workbook.sheetnames[:5] == [
        "Summary",
        "Utilization by cluster",
        "Utilization by pool",
        "Utilization by accelerator",
        "Utilization by team",
    ]
    assert {"Chargeback", "Costs by cluster", "Failures", "Top idle pools"} <= set(
        workbook.sheetnames
    )
    # openpyxl keeps the charts it reads back in the private _charts list.
    charts = {name: len(workbook[name]._charts) for name in workbook.sheetnames}
    assert charts["Summary"] == 1
    assert charts["Utilization by cluster"] == 1
    assert charts["Chargeback"] == 1
    summary = workbook["Summary"]
    assert summary["A6"].value == "Effective utilization"
    assert summary["B6"].value == pytest.approx(numbers["summary"]["effective_utilization"])


def test_xlsx_numbers_equal_the_accounting_api_for_the_same_period(
    report_fleet, client_for, viewer
):
    schedule = make_schedule()
    report, _ = services.get_or_create_report(schedule, MARCH)
    services.generate(report.pk)
    report.refresh_from_db()
    with report.xlsx_file.open("rb") as handle:
        workbook = load_workbook(io.BytesIO(handle.read()))
    client = client_for(viewer)
    query = {"start": MAR.isoformat(), "end": APR.isoformat(), "granularity": "total"}
    for group, sheet_name, key in [
        ("cluster", "Utilization by cluster", "cluster"),
        ("pool", "Utilization by pool", "pool"),
        ("accelerator", "Utilization by accelerator", "accelerator"),
    ]:
        api = client.get("/api/v1/accounting/utilization/", {**query, "group_by": group})
        assert api.status_code == 200, api.content
        api_rows = {row[key]: row for row in api.json()["rows"]}
        sheet = workbook[sheet_name]
        header = [cell.value for cell in sheet[1]]
        sheet_rows = {
            row[0]: dict(zip(header, row, strict=True))
            for row in sheet.iter_rows(min_row=2, values_only=True)
        }
        assert set(sheet_rows) == set(api_rows), group
        for name, row in sheet_rows.items():
            for column in (
                "available_card_hours",
                "allocated_card_hours",
                "utilization",
                "effective_time",
                "lost_card_hours",
            ):
                assert row[column] == pytest.approx(api_rows[name][column]), (group, name, column)
    api = client.get("/api/v1/accounting/chargeback/", query).json()
    sheet = workbook["Chargeback"]
    header = [cell.value for cell in sheet[1]]
    charged = {
        row[0]: dict(zip(header, row, strict=True))["chargeback_cost"]
        for row in sheet.iter_rows(min_row=2, values_only=True)
    }
    assert charged == pytest.approx({row["team"]: row["chargeback_cost"] for row in api["rows"]})
    costs = client.get("/api/v1/accounting/costs/", query).json()
    sheet = workbook["Costs by cluster"]
    header = [cell.value for cell in sheet[1]]
    totals = {
        row[0]: dict(zip(header, row, strict=True))["total_cost"]
        for row in sheet.iter_rows(min_row=2, values_only=True)
    }
    assert totals == pytest.approx({row["cluster"]: row["total_cost"] for row in costs["rows"]})


def test_csv_is_long_format_with_full_precision(report_fleet):
    import csv

    from reports.render import render_csv

    numbers = content.build_numbers(make_schedule(), MARCH)
    rows = list(csv.DictReader(io.StringIO(render_csv(numbers).decode())))
    assert list(rows[0]) == ["section", "group", "name", "metric", "value"]
    effective = next(
        r for r in rows if r["name"] == "effective_utilization" and r["metric"] == "value"
    )
    assert float(effective["value"]) == numbers["summary"]["effective_utilization"]


def test_numbers_take_a_constant_number_of_queries(report_fleet, django_assert_max_num_queries):
    schedule = make_schedule()
    with django_assert_max_num_queries(120) as small:
        content.build_numbers(schedule, MARCH)
    # Ten times the usage records: the same queries (nothing per row or per record).
    from accounting.models import UsageRecord

    records = list(UsageRecord.objects.all())
    for copy in range(1, 10):
        for record in records:
            record.pk = None
            record.record_key = f"{record.record_key}-copy{copy}"
            record.cards = 0.1
            record.card_hours = record.cards * record.duration_h
    UsageRecord.objects.bulk_create(records)
    with django_assert_max_num_queries(len(small.captured_queries)):
        content.build_numbers(schedule, MARCH)


def test_a_generation_error_is_recorded_and_run_now_queues_it_again(report_fleet, monkeypatch):
    schedule = make_schedule()
    report, _ = services.get_or_create_report(schedule, MARCH)

    def broken(*args, **kwargs):
        raise ValueError("no inventory in scope")

    monkeypatch.setattr(content, "build_numbers", broken)
    outcome = services.generate(report.pk)
    report.refresh_from_db()
    assert report.status == ReportStatus.FAILED
    assert report.error == "ValueError: no inventory in scope"
    assert outcome.error == report.error
    monkeypatch.undo()
    assert services.generate(report.pk).done

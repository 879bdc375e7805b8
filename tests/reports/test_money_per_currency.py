"""Reports keep currencies apart and say why a figure is missing.

The report fleet with cluster "beta" moved to a site that prices in EUR: "Where the money is
lost" is filled per currency (never summed across), its XLSX sheet has one table and one chart
per currency, and a figure without data reads "—" with its reason (never blank, never 0).
"""

from __future__ import annotations

import io

import pytest
from openpyxl import load_workbook

from reports import content
from reports.render import render_xlsx
from tests.support.builders import APR, MAR, MARCH
from tests.support.builders import fleet_monthly_schedule as make_schedule

pytestmark = pytest.mark.django_db


def _sheet_rows(sheet, header_row: int = 1) -> list[dict]:
    header = [cell.value for cell in sheet[header_row]]
    return [
        dict(zip(header, row, strict=True))
        for row in sheet.iter_rows(min_row=header_row + 1, values_only=True)
    ]


def test_where_the_money_is_lost_is_per_currency_and_equals_the_cost_api(
    two_currencies, client_for, viewer
):
    numbers = content.build_numbers(make_schedule(), MARCH)
    query = {"start": MAR.isoformat(), "end": APR.isoformat(), "granularity": "total"}
    api = client_for(viewer).get("/api/v1/accounting/costs/", query).json()
    by_currency = {row["currency"]: row["lost_cost_by_factor"] for row in api["totals"]}
    assert sorted(by_currency) == ["EUR", "USD"]
    waste = numbers["waste"]
    assert sorted({row["currency"] for row in waste}) == ["EUR", "USD"]
    for row in waste:
        assert row["lost_cost"] == pytest.approx(by_currency[row["currency"]][row["factor"]])
    assert any((row["lost_cost"] or 0) > 0 for row in waste)  # money was lost: not empty
    # No headline money total across EUR and USD; the reason says why.
    total = next(f for f in numbers["summary"]["figures"] if f["name"] == "total_cost")
    assert total["value"] is None and "EUR and USD" in total["no_data_reason"]

    workbook = load_workbook(io.BytesIO(render_xlsx(numbers)))
    sheet = workbook["Waste by factor"]
    assert len(sheet._charts) == 2  # one native chart, own money axis, per currency
    titles = [row[2] for row in sheet.iter_rows(values_only=True) if row[1] == "Currency"]
    assert titles == ["Lost (EUR)", "Lost (USD)"]
    written = {
        (row[1], row[0]): row[2]
        for row in sheet.iter_rows(values_only=True)
        if row[1] in ("EUR", "USD")
    }
    for row in waste:
        assert written[(row["currency"], row["label"])] == pytest.approx(row["lost_cost"])
    charged = workbook["Chargeback"]
    assert len(charged._charts) == 2  # one per currency, never EUR and USD on one axis
    currencies = [row[1] for row in charged.iter_rows(min_row=2, values_only=True)]
    assert currencies == sorted(currencies)  # grouped, so each chart reads its own rows
    summary = workbook["Summary"]
    total_row = next(r for r in summary.iter_rows() if r[0].value == "Total cost")
    assert total_row[1].value == content.NO_DATA
    assert "mixes EUR and USD" in total_row[1].comment.text


def test_an_empty_period_reads_no_data_with_the_reason_in_every_empty_cell(report_fleet):
    """January 2024: the fleet exists, no usage was recorded."""
    import datetime as dt

    from reports import periods

    january = periods.Period(dt.datetime(2024, 1, 1, tzinfo=dt.UTC), MAR.replace(month=2))
    numbers = content.build_numbers(make_schedule(), january)
    workbook = load_workbook(io.BytesIO(render_xlsx(numbers)))
    blank, dashes = [], 0
    for name in ("Summary", "Utilization by cluster", "Costs by cluster", "Failures"):
        sheet = workbook[name]
        header_row = 5 if name == "Summary" else 1
        width = len([c for c in sheet[header_row] if c.value is not None])
        for row in sheet.iter_rows(min_row=header_row + 1, max_row=header_row + 6):
            if row[0].value is None:
                break  # the end of the table
            for cell in row[:width]:
                if cell.value is None:
                    blank.append(cell.coordinate)
                elif cell.value == content.NO_DATA:
                    dashes += 1
                    assert cell.comment is not None and cell.comment.text.strip()
                    assert "n/a" not in str(cell.value)
    assert blank == []
    assert dashes > 0
    summary = workbook["Summary"]
    effective = next(r for r in summary.iter_rows() if r[0].value == "Effective utilization")
    assert effective[1].value == content.NO_DATA  # not 0 %


@pytest.mark.parametrize(
    ("endpoint", "key"),
    [
        ("/api/v1/accounting/costs/", "total_cost"),
        ("/api/v1/accounting/chargeback/", "charged_cost"),
    ],
)
def test_the_api_converts_to_a_reporting_currency_only_with_rates_and_names_them(
    two_currencies, client_for, viewer, endpoint, key
):
    import datetime as dt

    from inventory.currency import ExchangeRate

    client = client_for(viewer)
    query = {"start": MAR.isoformat(), "end": APR.isoformat(), "granularity": "total"}
    plain = client.get(endpoint, query).json()
    assert "converted" not in plain
    per_currency = {row["currency"]: row[key] for row in plain["totals"]}
    assert sorted(per_currency) == ["EUR", "USD"]

    without = client.get(endpoint, {**query, "currency": "usd"}).json()["converted"]
    assert without["figures"] is None and "no exchange rate from EUR to USD" in without["reason"]

    ExchangeRate.objects.create(
        from_currency="EUR", to_currency="USD", rate=1.08, valid_on=dt.date(2024, 3, 15)
    )
    ExchangeRate.objects.create(  # after the period: not used for March
        from_currency="EUR", to_currency="USD", rate=2.0, valid_on=dt.date(2024, 4, 2)
    )
    converted = client.get(endpoint, {**query, "currency": "USD"}).json()["converted"]
    assert converted["currency"] == "USD" and converted["reason"] is None
    expected = per_currency["USD"] + per_currency["EUR"] * 1.08
    assert converted["figures"][key] == pytest.approx(expected, rel=1e-12)
    assert converted["notes"] == ["converted at EUR→USD 1.08 of 2024-03-15"]
    # The per-currency totals are still the answer's totals, unconverted.
    again = client.get(endpoint, {**query, "currency": "USD"}).json()
    assert {row["currency"]: row[key] for row in again["totals"]} == pytest.approx(per_currency)

    bad = client.get(endpoint, {**query, "currency": "XYZ"})
    assert bad.status_code == 400 and "currency" in bad.json()


def test_the_costs_page_states_the_converted_total_and_its_rate(two_currencies, client, viewer):
    import datetime as dt
    import re

    from accounting.rollups import refresh_usage_rollups
    from inventory.currency import ExchangeRate

    refresh_usage_rollups()
    client.force_login(viewer)
    query = {"start": "2024-03-01", "end": "2024-04-01", "granularity": "month"}
    api = client.get("/api/v1/accounting/chargeback/", {**query, "granularity": "total"}).json()
    charged = {row["currency"]: row["charged_cost"] for row in api["totals"]}

    page = client.get("/costs/", {**query, "currency": "USD"}).content.decode()
    row = re.search(r'<tr class="converted".*?</tr>', page, re.S).group(0)
    assert "no exchange rate from EUR to USD" in row  # nothing converted, and why

    ExchangeRate.objects.create(
        from_currency="EUR", to_currency="USD", rate=1.08, valid_on=dt.date(2024, 3, 1)
    )
    page = client.get("/costs/", {**query, "currency": "USD"}).content.decode()
    row = re.search(r'<tr class="converted".*?</tr>', page, re.S).group(0)
    assert "converted at EUR→USD 1.08 of 2024-03-01" in row
    expected = charged["USD"] + charged["EUR"] * 1.08
    assert f"{round(expected):,}" in row
    plain = client.get("/costs/", query).content.decode()
    assert 'class="converted"' not in plain  # no reporting currency asked: per currency only

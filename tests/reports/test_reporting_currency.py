"""A report in a chosen reporting currency (issue #14, "Currencies").

The report fleet with cluster "beta" priced in EUR: with an EUR→USD rate dated on or before the
period's last day the report shows one USD total, equal to the per-currency totals converted by
hand, and every converted figure states its rate; without the rate nothing is converted, the
report stays per currency and names the missing rate (never a partial sum).
"""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.exceptions import ValidationError
from openpyxl import load_workbook

from inventory.currency import ExchangeRate
from reports import content
from reports.forms import ScheduleForm
from reports.render import csv_rows, render_html, render_xlsx
from tests.support.builders import MARCH
from tests.support.builders import fleet_monthly_schedule as make_schedule

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("two_currencies")]
RATE = 1.08
NOTE = "EUR → USD at 1.08 (rate of 2024-03-20)"


def _rates() -> None:
    ExchangeRate.objects.create(
        from_currency="EUR", to_currency="USD", rate=RATE, valid_on=dt.date(2024, 3, 20)
    )
    ExchangeRate.objects.create(  # after the period's last day: never used for March
        from_currency="EUR", to_currency="USD", rate=2.0, valid_on=dt.date(2024, 4, 1)
    )


def _figure(numbers: dict, name: str) -> dict:
    return next(row for row in numbers["summary"]["figures"] if row["name"] == name)


def test_a_rate_gives_one_total_equal_to_the_hand_sum_and_states_the_rate():
    plain = content.build_numbers(make_schedule(), MARCH)
    per_currency = {row["currency"]: row for row in plain["costs"]["totals"]}
    assert sorted(per_currency) == ["EUR", "USD"]
    _rates()
    schedule = make_schedule(name="Fleet monthly in USD", reporting_currency="usd")
    assert schedule.reporting_currency == "USD"
    numbers = content.build_numbers(schedule, MARCH)

    assert numbers["reporting_currency"]["converted"] is True
    assert numbers["summary"]["currency"] == "USD"
    for name in ("total_cost", "idle_cost"):
        expected = per_currency["USD"][name] + per_currency["EUR"][name] * RATE
        figure = _figure(numbers, name)
        assert figure["value"] == pytest.approx(expected, rel=1e-12)
        assert figure["conversion"] == NOTE
        assert figure["no_data_reason"] is None
    total = _figure(numbers, "total_cost")
    assert total["value"] > per_currency["USD"]["total_cost"]
    # February converted with the same rate: a change, never an exchange-rate move.
    assert total["previous"] is not None and total["arrow"] in ("▲", "▼", "→")
    # Beta's EUR cost row is converted and says so; alpha's USD row is left as it was.
    clusters = {row["cluster"]: row for row in numbers["costs"]["clusters"]}
    plain_clusters = {row["cluster"]: row for row in plain["costs"]["clusters"]}
    assert clusters["beta"]["currency"] == "USD" and clusters["beta"]["conversion"] == NOTE
    assert clusters["beta"]["total_cost"] == pytest.approx(
        plain_clusters["beta"]["total_cost"] * RATE
    )
    assert clusters["alpha"]["total_cost"] == pytest.approx(plain_clusters["alpha"]["total_cost"])
    # Where the money is lost: one row per factor, the two currencies' losses added after rates.
    assert {row["currency"] for row in numbers["waste"]} == {"USD"}
    lost = {row["factor"]: row["lost_cost"] for row in numbers["waste"]}
    for row in plain["waste"]:
        if row["currency"] == "EUR" and row["lost_cost"] is not None:
            usd = next(
                r["lost_cost"] or 0.0
                for r in plain["waste"]
                if r["currency"] == "USD" and r["factor"] == row["factor"]
            )
            assert lost[row["factor"]] == pytest.approx(usd + row["lost_cost"] * RATE)
    assert all(row["currency"] == "USD" for row in numbers["chargeback"]["teams"])
    assert not any(w.startswith("The scope mixes") for w in numbers["warnings"])
    assert any(NOTE in warning for warning in numbers["warnings"])

    html = render_html(numbers, mode="print")  # the charts drawn from the converted numbers
    assert NOTE in html
    assert f"${round(_figure(numbers, 'total_cost')['value']):,}" in html
    csv = [row for row in csv_rows(numbers) if row["metric"] == "conversion"]
    assert any(row["value"] == NOTE for row in csv)


def test_without_a_rate_the_report_stays_per_currency_and_names_the_missing_rate():
    ExchangeRate.objects.create(  # only after the period: no rate on or before 2024-03-31
        from_currency="EUR", to_currency="USD", rate=2.0, valid_on=dt.date(2024, 4, 1)
    )
    numbers = content.build_numbers(make_schedule(reporting_currency="USD"), MARCH)
    assert numbers["reporting_currency"]["converted"] is False
    reason = numbers["reporting_currency"]["reason"]
    assert "no exchange rate from EUR to USD on or before 2024-03-31" in reason
    assert reason in numbers["warnings"]
    total = _figure(numbers, "total_cost")
    assert total["value"] is None and "EUR and USD" in total["no_data_reason"]
    assert sorted({row["currency"] for row in numbers["waste"]}) == ["EUR", "USD"]
    assert all("conversion" not in row for row in numbers["costs"]["clusters"])


def test_the_xlsx_carries_the_rate_note():
    _rates()
    numbers = content.build_numbers(make_schedule(reporting_currency="USD"), MARCH)
    workbook = load_workbook(io.BytesIO(render_xlsx(numbers)))
    summary = workbook["Summary"]
    total_row = next(r for r in summary.iter_rows() if r[0].value == "Total cost (USD)")
    assert total_row[1].value == pytest.approx(_figure(numbers, "total_cost")["value"])
    assert total_row[5].value == NOTE
    costs = workbook["Costs by cluster"]
    header = [cell.value for cell in costs[1]]
    rows = [dict(zip(header, row, strict=True)) for row in costs.iter_rows(2, values_only=True)]
    beta = next(row for row in rows if row["name"] == "beta")
    assert beta["currency"] == "USD" and beta["conversion"] == NOTE
    charged = workbook["Chargeback"]
    assert len(charged._charts) == 1  # one currency now: one money axis
    assert NOTE in [cell.value for cell in charged["I"]]  # after the 8 chargeback columns


def test_the_reporting_currency_is_validated_as_iso_4217():
    schedule = make_schedule(reporting_currency="")
    schedule.reporting_currency = "XYZ"
    with pytest.raises(ValidationError) as error:
        schedule.full_clean()
    assert "reporting_currency" in error.value.message_dict
    form = ScheduleForm(data={"reporting_currency": "XYZ"})
    assert not form.is_valid() and "reporting_currency" in form.errors


def test_the_api_takes_and_validates_the_reporting_currency(client_for, fleet_admin):
    from tests.support.builders import SCHEDULES, VALID_SCHEDULE

    client = client_for(fleet_admin)
    created = client.post(SCHEDULES, {**VALID_SCHEDULE, "reporting_currency": "eur"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["reporting_currency"] == "EUR"
    bad = {**VALID_SCHEDULE, "name": "Bad", "reporting_currency": "XYZ"}
    response = client.post(SCHEDULES, bad, format="json")
    assert response.status_code == 400 and "reporting_currency" in response.json()


def test_the_schedule_form_and_page_show_the_reporting_currency(client, fleet_admin):
    client.force_login(fleet_admin)
    form = client.get("/reports/schedules/new/").content.decode()
    assert 'name="reporting_currency"' in form
    schedule = make_schedule(reporting_currency="EUR")
    page = client.get(f"/reports/schedules/{schedule.pk}/").content.decode()
    assert "in EUR, converted with the dated exchange rates" in page
    plain = make_schedule(name="Per currency")
    assert "<dd>per currency</dd>" in client.get(f"/reports/schedules/{plain.pk}/").content.decode()


def test_a_team_on_two_currencies_is_charged_per_currency_or_in_one_converted_sum(request):
    from accounting.models import UsageRecord
    from tests.support.builders import MAR
    from tests.support.builders import usage_rows as _usage_rows

    fleet = request.getfixturevalue("two_currencies")
    beta, pool = fleet["beta"], fleet["pools"]["beta"]
    a100 = pool.node_groups.get().accelerator
    rows = _usage_rows(beta, pool, a100, "team-a", 2, 10, MAR, 31, "a-beta", "completed")
    UsageRecord.objects.bulk_create(rows)
    plain = content.build_numbers(make_schedule(scope="team", team="team-a"), MARCH)
    teams = plain["chargeback"]["teams"]
    assert sorted({row["currency"] for row in teams}) == ["EUR", "USD"]
    charged = _figure(plain, "chargeback_cost")
    assert charged["value"] is None and "EUR and USD" in charged["no_data_reason"]

    _rates()
    schedule = make_schedule(name="In USD", scope="team", team="team-a", reporting_currency="USD")
    numbers = content.build_numbers(schedule, MARCH)
    expected = sum(
        row["chargeback_cost"] * (RATE if row["currency"] == "EUR" else 1.0) for row in teams
    )
    charged = _figure(numbers, "chargeback_cost")
    assert charged["value"] == pytest.approx(expected, rel=1e-12)
    assert charged["conversion"] == NOTE

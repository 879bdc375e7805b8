"""The shipped ECB euro reference rates: one published day, read from the data file, used only
where no rate was entered (by every caller); every figure says where it comes from.

Expected figures are the ECB's table of 25 November 2024 as published (units per euro:
USD 1.0495, GBP 0.83465, JPY 161.64, CHF 0.9324, CNY 7.6018), worked out by hand here.
"""

import datetime as dt
import json

import pytest

from inventory.currency import (
    ENTERED,
    ISO_4217_CODES,
    REFERENCE,
    REFERENCE_RATES_FILE,
    ExchangeRate,
    conversions,
    reference_conversion,
    reference_rates,
)

PUBLISHED = dt.date(2024, 11, 25)
AFTER = dt.date(2026, 11, 27)
SHIPPED = "ECB euro reference rate, shipped with Fleetwise"


def test_the_data_file_states_its_day_and_source_and_holds_the_main_currencies():
    data = json.loads(REFERENCE_RATES_FILE.read_text(encoding="utf-8"))
    assert data["published_on"] == "2024-11-25"
    assert "European Central Bank" in data["source"]
    assert data["url"].startswith("https://www.ecb.europa.eu/")
    units = data["units_per_eur"]
    assert {code: units[code] for code in ("USD", "GBP", "JPY", "CHF", "CNY")} == {
        "USD": 1.0495,
        "GBP": 0.83465,
        "JPY": 161.64,
        "CHF": 0.9324,
        "CNY": 7.6018,
    }
    assert "EUR" not in units and set(units) <= ISO_4217_CODES
    table = reference_rates()
    assert table.published_on == PUBLISHED and table.units_per_eur["USD"] == 1.0495


@pytest.mark.parametrize(
    ("source", "target", "rate", "crossed"),
    [
        ("USD", "EUR", 1 / 1.0495, False),  # 0.952835: the catalog's USD at a EUR site
        ("EUR", "USD", 1.0495, False),
        ("EUR", "JPY", 161.64, False),
        ("CNY", "EUR", 1 / 7.6018, False),
        ("USD", "GBP", 0.83465 / 1.0495, True),  # no euro in the pair: crossed through it
        ("CHF", "CNY", 7.6018 / 0.9324, True),
    ],
)
def test_a_reference_conversion_is_the_ecb_figure_with_its_day_and_source(
    source, target, rate, crossed
):
    conversion = reference_conversion(source, target, AFTER)
    assert conversion.rate == pytest.approx(rate, rel=1e-12)
    assert conversion.valid_on == PUBLISHED and conversion.provenance == REFERENCE
    assert ("crossed via EUR" in conversion.source) is crossed
    assert conversion.label.endswith(f"of 2024-11-25 ({conversion.source})")


def test_usd_to_eur_reads_as_a_person_would_write_it():
    conversion = reference_conversion("USD", "EUR", AFTER)
    assert conversion.label == f"USD→EUR 0.952835 of 2024-11-25 ({SHIPPED})"
    assert conversion.note == f"converted at USD→EUR 0.952835 of 2024-11-25 ({SHIPPED})"


def test_no_reference_rate_before_its_day_or_for_a_currency_the_ecb_does_not_publish():
    assert reference_conversion("USD", "EUR", dt.date(2024, 11, 24)) is None
    assert reference_conversion("USD", "EUR", PUBLISHED) is not None
    assert reference_conversion("AED", "EUR", AFTER) is None  # a valid code, not in the table
    assert reference_conversion("USD", "AED", AFTER) is None


@pytest.mark.django_db
def test_conversions_fall_back_to_the_reference_where_nothing_was_entered():
    plain = conversions(["USD", "GBP"], "EUR", AFTER, reference=False)
    assert plain == {"USD": None, "GBP": None}  # entered rates only: none
    shipped = conversions(["USD", "GBP"], "EUR", AFTER)  # every caller's default
    assert shipped["USD"].rate == pytest.approx(1 / 1.0495, rel=1e-12)
    assert shipped["GBP"].rate == pytest.approx(1 / 0.83465, rel=1e-12)
    assert {c.provenance for c in shipped.values()} == {REFERENCE}


@pytest.mark.django_db
def test_an_entered_rate_replaces_the_reference_whatever_its_day():
    # Entered in 2020, years before the shipped table: the administrator's rate still wins.
    ExchangeRate.objects.create(
        from_currency="USD",
        to_currency="EUR",
        rate=0.92,
        valid_on=dt.date(2020, 1, 1),
        source="finance desk",
    )
    found = conversions(["USD", "GBP"], "EUR", AFTER, reference=True)
    assert found["USD"].rate == 0.92 and found["USD"].provenance == ENTERED
    assert found["USD"].label == "USD→EUR 0.92 of 2020-01-01 (entered: finance desk)"
    assert found["USD"].note == "converted at USD→EUR 0.92 of 2020-01-01"  # as before
    assert found["GBP"].provenance == REFERENCE  # only the entered pair is replaced

"""Currency codes are ISO 4217 everywhere; exchange rates are dated, admin-written, read by all."""

import datetime as dt

import pytest
from django.core.exceptions import ValidationError

from inventory.currency import ExchangeRate, conversions, validate_currency
from inventory.models import AcceleratorModel, Site

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("code", ["USD", "EUR", "CNY", "JPY", "eur"])
def test_iso_codes_pass(code):
    validate_currency(code)


@pytest.mark.parametrize("code", ["", "US", "ABC", "EURO", "XYZ", "$$$", None])
def test_other_codes_are_refused(code):
    with pytest.raises(ValidationError):
        validate_currency(code)


def test_site_and_catalog_refuse_a_made_up_currency():
    site = Site(name="Nowhere", currency="ABC")
    with pytest.raises(ValidationError) as caught:
        site.full_clean()
    assert "currency" in caught.value.message_dict
    card = AcceleratorModel(
        vendor="x", name="x1", dense_bf16_tflops=1, memory_gb=1, memory_bandwidth_tbs=1, tdp_w=1
    )
    card.currency = "QQQ"
    with pytest.raises(ValidationError):
        card.full_clean()


def test_api_refuses_a_made_up_currency(client_for, planner):
    response = client_for(planner).post(
        "/api/v1/sites/", {"name": "Oslo", "currency": "ABC"}, format="json"
    )
    assert response.status_code == 400
    assert "ISO 4217" in str(response.data["currency"])


def test_lower_case_is_stored_upper_case():
    site = Site(name="Paris", currency="eur")
    site.full_clean()
    site.save()
    assert Site.objects.get(pk=site.pk).currency == "EUR"


def test_exchange_rates_admins_write_everyone_reads(client_for, viewer, planner, fleet_admin):
    body = {"from_currency": "EUR", "to_currency": "USD", "rate": 1.08, "valid_on": "2026-11-01"}
    assert (
        client_for(planner).post("/api/v1/exchange-rates/", body, format="json").status_code == 403
    )
    created = client_for(fleet_admin).post("/api/v1/exchange-rates/", body, format="json")
    assert created.status_code == 201, created.content
    listed = client_for(viewer).get("/api/v1/exchange-rates/")
    assert listed.status_code == 200
    assert [row["rate"] for row in listed.data["results"]] == [1.08]
    same = client_for(fleet_admin).post(
        "/api/v1/exchange-rates/", {**body, "to_currency": "EUR"}, format="json"
    )
    assert same.status_code == 400
    bogus = client_for(fleet_admin).post(
        "/api/v1/exchange-rates/", {**body, "from_currency": "ABC"}, format="json"
    )
    assert bogus.status_code == 400


def test_conversion_uses_the_newest_rate_on_or_before_the_day_and_says_so():
    ExchangeRate.objects.create(
        from_currency="EUR", to_currency="USD", rate=1.05, valid_on=dt.date(2026, 10, 1)
    )
    ExchangeRate.objects.create(
        from_currency="EUR", to_currency="USD", rate=1.08, valid_on=dt.date(2026, 11, 1)
    )
    ExchangeRate.objects.create(
        from_currency="EUR", to_currency="USD", rate=1.20, valid_on=dt.date(2026, 12, 1)
    )
    ExchangeRate.objects.create(
        from_currency="USD", to_currency="CNY", rate=8.0, valid_on=dt.date(2026, 1, 1)
    )
    found = conversions(["EUR", "CNY", "JPY", "USD"], "USD", dt.date(2026, 11, 23), reference=False)
    assert found["EUR"].rate == 1.08
    assert found["EUR"].note == "converted at EUR→USD 1.08 of 2026-11-01"
    assert found["CNY"].rate == pytest.approx(0.125)  # entered as USD→CNY 8, used inverted
    assert found["JPY"] is None  # no rate: the figure stays in its own currency
    assert "USD" not in found

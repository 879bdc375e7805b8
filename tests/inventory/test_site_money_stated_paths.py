"""A site's tariff and currency are stated on every path, not only in the form (issue 31): the
REST API, the bulk import and the admin refuse a new site without them (a 400 or a row error
naming the field and the fix) and take an explicit "unknown" tariff, stored as 0 as the form
stores it (so the form then shows "Tariff unknown" ticked)."""

from __future__ import annotations

import pytest

from inventory import imports
from inventory.forms import SiteForm
from inventory.models import Site

pytestmark = pytest.mark.django_db

SITES = "/api/v1/sites/"
ADMIN_ADD = "/admin/inventory/site/add/"


@pytest.fixture
def api(client_for, planner):
    return client_for(planner)


def _shown_unknown(site: Site) -> bool:
    """What the site form shows for the stored tariff: its "Tariff unknown" box."""
    return SiteForm(instance=site)["tariff_unknown"].value() is True


# --- REST API -----------------------------------------------------------------------------------


def test_the_api_refuses_a_new_site_without_tariff_or_currency_and_says_how(api):
    response = api.post(SITES, {"name": "Oslo DC3", "pue": 1.2}, format="json")
    assert response.status_code == 400
    assert set(response.data) == {"tariff_per_kwh", "currency"}
    assert "tariff_unknown" in str(response.data["tariff_per_kwh"])
    assert "ISO 4217" in str(response.data["currency"])
    assert not Site.objects.filter(name="Oslo DC3").exists()


def test_the_api_reports_a_missing_tariff_with_the_models_own_errors(api):
    response = api.post(SITES, {"name": "Hot", "pue": 3.5, "currency": "EUR"}, format="json")
    assert response.status_code == 400
    assert set(response.data) == {"tariff_per_kwh", "pue"}


def test_an_explicit_unknown_tariff_is_stored_as_zero_as_the_form_does(api):
    body = {"name": "Oslo DC3", "tariff_unknown": True, "currency": "nok"}
    response = api.post(SITES, body, format="json")
    assert response.status_code == 201, response.content
    assert "tariff_unknown" not in response.data  # write-only: the stored 0 is the record
    site = Site.objects.get(name="Oslo DC3")
    assert (site.tariff_per_kwh, site.currency) == (0.0, "NOK")
    assert _shown_unknown(site)


def test_a_stated_tariff_is_kept_and_not_shown_as_unknown(api):
    body = {"name": "Oslo DC3", "tariff_per_kwh": 0.07, "currency": "EUR"}
    assert api.post(SITES, body, format="json").status_code == 201
    site = Site.objects.get(name="Oslo DC3")
    assert (site.tariff_per_kwh, site.currency) == (0.07, "EUR")
    assert not _shown_unknown(site)


def test_a_tariff_and_unknown_together_are_refused(api):
    body = {"name": "X", "tariff_per_kwh": 0.1, "tariff_unknown": True, "currency": "EUR"}
    response = api.post(SITES, body, format="json")
    assert response.status_code == 400 and "not both" in str(response.data["tariff_unknown"])


def test_an_edit_leaves_what_it_does_not_send_and_may_state_unknown(api):
    site = Site.objects.create(name="Oslo DC3", tariff_per_kwh=0.07, currency="EUR")
    assert api.patch(f"{SITES}{site.pk}/", {"pue": 1.3}, format="json").status_code == 200
    site.refresh_from_db()
    assert (site.pue, site.tariff_per_kwh, site.currency) == (1.3, 0.07, "EUR")
    assert (
        api.patch(f"{SITES}{site.pk}/", {"tariff_unknown": True}, format="json").status_code == 200
    )
    site.refresh_from_db()
    assert site.tariff_per_kwh == 0.0 and site.currency == "EUR"


# --- Bulk import --------------------------------------------------------------------------------


def _errors(text: str) -> list[str]:
    return [
        str(error) for error in imports.preview_import("sites", imports.parse_text(text)).errors
    ]


def test_a_new_row_without_tariff_or_currency_columns_is_a_row_error_with_the_fix():
    assert _errors("name,pue\nOslo DC3,1.2\n") == [
        "row 2, column tariff_per_kwh: a value is required: give the tariff per kWh in the "
        "site's currency, or write unknown (stored as 0: the site's energy adds no cost).",
        "row 2, column currency: a value is required: give the site's ISO 4217 currency code, "
        "e.g. EUR.",
    ]


def test_blank_tariff_or_currency_cells_are_refused_not_defaulted():
    Site.objects.create(name="Oslo DC3", tariff_per_kwh=0.07, currency="EUR")
    errors = _errors("name,tariff_per_kwh,currency\nOslo DC3,,\n")  # an existing site
    assert [error.split(":")[0] for error in errors] == [
        "row 2, column tariff_per_kwh",
        "row 2, column currency",
    ]


def test_unknown_in_the_tariff_cell_is_stored_as_zero_and_edits_need_no_money_columns():
    text = "name,tariff_per_kwh,currency\nOslo DC3,Unknown,NOK\nBergen DC1,0.06,NOK\n"
    result = imports.commit_import("sites", imports.parse_text(text))
    assert result.created == 2
    oslo, bergen = Site.objects.get(name="Oslo DC3"), Site.objects.get(name="Bergen DC1")
    assert (oslo.tariff_per_kwh, oslo.currency) == (0.0, "NOK") and _shown_unknown(oslo)
    assert bergen.tariff_per_kwh == 0.06 and not _shown_unknown(bergen)
    # A file that only edits existing sites leaves their money as it is.
    imports.commit_import("sites", imports.parse_text("name,pue\nBergen DC1,1.3\n"))
    bergen.refresh_from_db()
    assert (bergen.pue, bergen.tariff_per_kwh, bergen.currency) == (1.3, 0.06, "NOK")


def test_the_column_help_marks_tariff_and_currency_required_with_the_fix():
    help_by_name = {entry.name: entry for entry in imports.column_help("sites")}
    assert help_by_name["tariff_per_kwh"].required and help_by_name["currency"].required
    assert "write unknown" in help_by_name["tariff_per_kwh"].meaning


# --- Admin --------------------------------------------------------------------------------------


@pytest.fixture
def admin_session(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "", "pw"))
    return client


ADMIN_BASE = {"name": "Oslo DC3", "cooling_type": "air", "assumptions": "{}"}


def test_the_admin_refuses_a_site_without_tariff_or_currency(admin_session):
    response = admin_session.post(ADMIN_ADD, ADMIN_BASE)
    html = response.content.decode()
    assert response.status_code == 200 and not Site.objects.filter(name="Oslo DC3").exists()
    assert "tick “Tariff unknown”" in html
    assert "Carbon intensity unknown" in html  # the form's rule, on carbon too


def test_the_admin_stores_an_unknown_tariff_as_zero(admin_session):
    form = ADMIN_BASE | {"tariff_unknown": "on", "currency": "eur", "grid_carbon_g_per_kwh": "300"}
    response = admin_session.post(ADMIN_ADD, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    site = Site.objects.get(name="Oslo DC3")
    assert (site.tariff_per_kwh, site.currency, site.grid_carbon_g_per_kwh) == (0.0, "EUR", 300)

"""The site form's money and carbon figures (issue 31, "Forms"): nothing pre-filled, each
stated or ticked unknown, the currency always stated; its fields in reading (tab) order."""

from __future__ import annotations

import re

import pytest

from inventory.forms import SiteForm
from inventory.models import Site

pytestmark = pytest.mark.django_db

NEW_SITE = "/inventory/sites/new/"
BASE = {"name": "Oslo DC3", "cooling_type": "air", "assumptions": ""}


@pytest.fixture
def planner_client(client, planner):
    client.force_login(planner)
    return client


def field_error(html: str, name: str) -> str:
    match = re.search(rf'<ul class="errorlist" id="id_{name}_error">(.*?)</ul>', html, re.S)
    return match.group(1) if match else ""


def test_a_new_site_form_pre_fills_no_tariff_currency_or_carbon(planner_client):
    form = SiteForm()
    assert [form[name].value() for name in ("tariff_per_kwh", "grid_carbon_g_per_kwh")] == [
        None,
        None,
    ]
    assert form["currency"].value() == "" and form["tariff_unknown"].value() is False
    html = planner_client.get(NEW_SITE).content.decode()
    tariff = re.search(r'<input[^>]*name="tariff_per_kwh"[^>]*>', html).group(0)
    currency = re.search(r'<input[^>]*name="currency"[^>]*>', html).group(0)
    assert "value=" not in tariff and "value=" not in currency
    assert "USD" not in currency and "0.0" not in tariff


def test_a_site_without_tariff_currency_or_carbon_is_refused_and_not_saved(planner_client):
    response = planner_client.post(NEW_SITE, BASE)
    html = response.content.decode()
    assert response.status_code == 200 and not Site.objects.filter(name="Oslo DC3").exists()
    assert "tick “Tariff unknown”" in field_error(html, "tariff_per_kwh")
    assert "required" in field_error(html, "currency")
    assert "Carbon intensity unknown" in field_error(html, "grid_carbon_g_per_kwh")
    assert "Please correct the 3 problems below" in html


def test_stated_figures_are_stored_as_given(planner_client):
    form = BASE | {"tariff_per_kwh": "0.21", "currency": "eur", "grid_carbon_g_per_kwh": "350"}
    assert planner_client.post(NEW_SITE, form).status_code == 302
    site = Site.objects.get(name="Oslo DC3")
    assert (site.tariff_per_kwh, site.currency, site.grid_carbon_g_per_kwh) == (0.21, "EUR", 350)


def test_an_explicit_unknown_is_stored_as_zero_and_shown_as_unknown(planner_client):
    form = BASE | {"tariff_unknown": "on", "currency": "NOK", "grid_carbon_g_per_kwh": "30"}
    assert planner_client.post(NEW_SITE, form).status_code == 302
    site = Site.objects.get(name="Oslo DC3")
    assert (site.tariff_per_kwh, site.currency) == (0.0, "NOK")
    page = planner_client.get(f"/inventory/sites/{site.pk}/").content.decode()
    assert "(unknown or free: energy adds no cost)" in page
    # Editing it again: "unknown" is ticked, no figure is typed in for the user.
    edit = SiteForm(instance=site)
    assert edit["tariff_per_kwh"].value() is None and edit["tariff_unknown"].value() is True
    assert edit["grid_carbon_g_per_kwh"].value() == 30.0
    assert edit["grid_carbon_unknown"].value() is False


def test_a_figure_and_unknown_together_are_refused(planner_client):
    form = BASE | {"tariff_per_kwh": "0.1", "tariff_unknown": "on", "currency": "EUR"}
    form |= {"grid_carbon_unknown": "on"}
    html = planner_client.post(NEW_SITE, form).content.decode()
    assert "not both" in field_error(html, "tariff_unknown")
    assert not Site.objects.filter(name="Oslo DC3").exists()


def test_a_stored_site_edits_without_retyping_its_figures(planner_client):
    site = Site.objects.create(
        name="Lyon", tariff_per_kwh=0.18, currency="EUR", grid_carbon_g_per_kwh=0.0
    )
    form = SiteForm(instance=site)
    data = {name: form[name].value() for name in form.fields}
    data = {k: ("" if v is None else v) for k, v in data.items() if v is not False}
    data["assumptions"] = ""
    bound = SiteForm(data, instance=site)
    assert bound.is_valid(), bound.errors
    saved = bound.save()
    assert (saved.tariff_per_kwh, saved.grid_carbon_g_per_kwh) == (0.18, 0.0)


def test_the_fields_run_down_the_page_from_pue_to_the_tariff(planner_client):
    """Tab order is document order: from PUE to the tariff is two presses (its confirmation
    box between), not the twelve of the old two-column grid with the metered dates."""
    html = planner_client.get(NEW_SITE).content.decode()
    names = re.findall(r'<(?:input|select|textarea)[^>]*name="([a-z_]+)"', html)
    names = [n for n in names if n != "csrfmiddlewaretoken"]
    assert names.index("tariff_per_kwh") - names.index("pue") == 2
    assert names[names.index("pue") + 1] == "pue_confirmed"
    assert names.index("currency") < names.index("metered_facility_energy_kwh")
    legends = re.findall(r"<legend>([^<]+)</legend>", html)
    assert legends[:3] == ["Site", "Cooling", "Energy price and carbon"]

"""Error boundaries: metered energies are checked at entry like `pue`, and one site whose stored
figures are out of range (written before the rule, or around the forms) does not break Costs
for everyone: the costs and chargeback API, the Costs page and analyses name the site and the
field, and the other sites' money is still shown. Requests run under a memory cap."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.support.alpha_usage import SACCT_LINES, sacct_text
from tests.support.memcap import address_space_cap

pytestmark = pytest.mark.django_db
SITES = "/api/v1/sites/"
PERIOD = {"start": "2024-03-01", "end": "2024-03-02"}


@pytest.fixture
def bad_site(alpha, import_text):
    """A second site "Frankfurt" with its own 16-card cluster and usage; its stored metered
    energies are the ones of the report (1e308 kWh facility, 1e-300 kWh IT)."""
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    site = Site.objects.create(name="Frankfurt", tariff_per_kwh=0.3, currency="USD")
    beta = Cluster.objects.create(
        site=site,
        name="beta",
        commissioned_on=dt.date(2024, 1, 1),
        capital_cost_per_card=30_000.0,
        amortization_years=5.0,
    )
    pool = Pool.objects.create(cluster=beta, name="h100-b")
    NodeGroup.objects.create(
        pool=pool,
        name="nodes-b",
        accelerator=AcceleratorModel.objects.get(name="H100 SXM5 80GB"),
        node_count=2,
        cards_per_node=8,
    )
    import_text(alpha, sacct_text())
    import_text(beta, sacct_text([line.replace("|alpha|", "|beta|") for line in SACCT_LINES]))
    Site.objects.filter(pk=site.pk).update(
        metered_facility_energy_kwh=1e308, metered_it_energy_kwh=1e-300
    )
    return site


def get(client, url, query=None):
    with address_space_cap():
        return client.get(url, query or {})


@pytest.mark.parametrize(
    ("facility", "it", "field", "text"),
    [
        (1e308, 1e-300, "metered_facility_energy_kwh", "1e+12 kWh"),
        (1e9, 1e-3, "metered_facility_energy_kwh", "give a PUE of 1e+12"),
        ("NaN", 1.0, "metered_facility_energy_kwh", ""),
        (2e6, "Infinity", "metered_it_energy_kwh", ""),
    ],
)
def test_metered_energies_out_of_range_are_refused_at_entry(
    client_for, planner, facility, it, field, text
):
    payload = {
        "name": "Oslo",
        "metered_facility_energy_kwh": facility,
        "metered_it_energy_kwh": it,
    }
    with address_space_cap():
        response = client_for(planner).post(SITES, payload, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert text in str(response.json()[field])


def test_metered_energies_in_range_are_kept(client_for, planner):
    payload = {"name": "Oslo", "metered_facility_energy_kwh": 1.2e6, "metered_it_energy_kwh": 1e6}
    payload |= {"tariff_per_kwh": 0.1, "currency": "NOK"}
    response = client_for(planner).post(SITES, payload, format="json")
    assert response.status_code == 201, response.content


def test_the_site_form_refuses_a_pue_of_1e308_from_metered_energies(client_for, planner):
    from inventory.forms import SiteForm

    form = SiteForm(
        {
            "name": "Oslo",
            "cooling_type": "air",
            "metered_facility_energy_kwh": "1e11",
            "metered_it_energy_kwh": "1e-3",
            "tariff_per_kwh": "0",
            "currency": "USD",
            "grid_carbon_g_per_kwh": "0",
            "assumptions": "{}",
        }
    )
    assert not form.is_valid()
    assert "give a PUE of 1e+14" in str(form.errors["metered_facility_energy_kwh"])


@pytest.mark.parametrize("path", ["costs/", "chargeback/"])
def test_one_bad_site_does_not_break_the_costs_api(client_for, viewer, bad_site, path):
    response = get(client_for(viewer), f"/api/v1/accounting/{path}", PERIOD)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["rows"], "the good site's money is still reported"
    named = [note for note in body["warnings"] if note.startswith("site Frankfurt:")]
    assert named and "metered_facility_energy_kwh" in named[0], body["warnings"]


def test_the_costs_api_reports_only_the_good_cluster(client_for, viewer, bad_site):
    body = get(client_for(viewer), "/api/v1/accounting/costs/", PERIOD).json()
    assert {row["cluster"] for row in body["rows"]} == {"alpha"}


def test_one_bad_site_does_not_break_the_costs_page(client_for, viewer, bad_site):
    response = get(client_for(viewer), "/costs/", {**PERIOD, "granularity": "week"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "site Frankfurt: metered_facility_energy_kwh" in page
    assert "alpha" in page  # the other cluster is still on the page


def test_an_analysis_of_the_bad_site_fails_naming_it(bad_site):
    from planner.analysis import evaluate_cluster
    from planner.models import Analysis

    analysis = Analysis.objects.create(
        scope="site",
        object_id=bad_site.pk,
        scope_label="Frankfurt",
        period_start=dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
        period_end=dt.datetime(2024, 3, 2, tzinfo=dt.UTC),
    )
    with pytest.raises(ValueError, match="^site Frankfurt: metered_facility_energy_kwh"):
        evaluate_cluster(analysis, bad_site.clusters.get().pk)


def test_out_of_range_dates_on_the_pages_are_form_errors(client_for, viewer, demo_fleet):
    client = client_for(viewer)
    for url in ("/costs/", "/usage/"):
        response = get(client, url, {"start": "1900-01-01", "end": "2024-01-01"})
        assert response.status_code == 400, url
        assert "2000-01-01" in response.content.decode(), url

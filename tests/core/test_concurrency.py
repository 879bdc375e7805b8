"""No lost updates: API updates carry ETag/If-Match (412 when stale), edit pages carry the
version they were opened at and refuse a stale save naming who changed what, both values shown.

Runs on whichever database DATABASE_URL names (CI runs it on PostgreSQL and SQLite).
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from inventory.models import Cluster, NodeGroup, Pool, Site
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def site(planner):
    return Site.objects.create(name="Oslo", location="Fornebu", pue=1.2, tariff_per_kwh=0.05)


def site_form(site: Site, **changes) -> dict:
    values = {
        "name": site.name,
        "location": site.location,
        "cooling_type": site.cooling_type,
        "pue": str(site.pue),
        "tariff_per_kwh": str(site.tariff_per_kwh),
        "currency": site.currency,
        "grid_carbon_g_per_kwh": str(site.grid_carbon_g_per_kwh),
        "assumptions": "{}",
    }
    return values | {key: str(value) for key, value in changes.items()}


def opened_version(html: str) -> str:
    match = re.search(r'name="opened_version" value="(\d+)"', html)
    assert match, "the edit form carries the version it was opened at"
    return match.group(1)


# --- Model --------------------------------------------------------------------------------------


def test_every_save_raises_the_version_even_a_revert_to_an_old_one(site):
    assert site.version == 1
    site.pue = 1.3
    site.save()
    assert site.version == 2
    old = site.history.get(version=1).instance
    old.save()  # a revert writes the old values, never the old version number
    site.refresh_from_db()
    assert (site.pue, site.version) == (1.2, 3)


# --- API ----------------------------------------------------------------------------------------


def test_api_read_and_update_carry_an_etag_and_a_stale_if_match_is_412(client_for, planner, site):
    other = make_user("bob", "planner")
    alice, bob = client_for(planner), client_for(other)
    url = f"/api/v1/sites/{site.pk}/"
    read = alice.get(url)
    etag = read["ETag"]
    assert etag.startswith('"') and alice.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 304

    first = bob.patch(url, {"pue": 1.3}, format="json", HTTP_IF_MATCH=etag)
    assert first.status_code == 200 and first["ETag"] != etag

    stale = alice.put(url, read.json() | {"location": "Oslo S"}, format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412
    assert "changed by bob" in stale.json()["detail"] and stale["ETag"] == first["ETag"]
    site.refresh_from_db()
    assert (site.pue, site.location) == (1.3, "Fornebu")  # bob's change kept, alice's refused

    fresh = alice.patch(url, {"location": "Oslo S"}, format="json", HTTP_IF_MATCH=first["ETag"])
    assert fresh.status_code == 200
    site.refresh_from_db()
    assert (site.pue, site.location) == (1.3, "Oslo S")


def test_if_match_star_weak_and_absent(client_for, planner, site):
    client = client_for(planner)
    url = f"/api/v1/sites/{site.pk}/"
    etag = client.get(url)["ETag"]
    # Weak tags never match If-Match (RFC 9110 strong comparison).
    assert (
        client.patch(url, {"pue": 1.25}, format="json", HTTP_IF_MATCH=f"W/{etag}").status_code
        == 412
    )
    assert client.patch(url, {"pue": 1.25}, format="json", HTTP_IF_MATCH="*").status_code == 200
    # Without If-Match the update is applied (documented: existing clients keep working).
    assert client.patch(url, {"pue": 1.26}, format="json").status_code == 200
    listed = f'"nope", {client.get(url)["ETag"]}'
    assert client.patch(url, {"pue": 1.27}, format="json", HTTP_IF_MATCH=listed).status_code == 200


def test_a_refused_update_writes_nothing_even_when_its_body_is_invalid(client_for, planner, site):
    client = client_for(planner)
    url = f"/api/v1/sites/{site.pk}/"
    response = client.patch(url, {"pue": 0.5}, format="json", HTTP_IF_MATCH='"stale"')
    assert response.status_code == 412
    site.refresh_from_db()
    assert site.version == 1


def test_a_pool_etag_changes_when_its_node_groups_change(client_for, planner, demo_fleet):
    client = client_for(planner)
    pool = Pool.objects.filter(node_groups__isnull=False).first()
    url = f"/api/v1/pools/{pool.pk}/"
    etag = client.get(url)["ETag"]
    group = NodeGroup.objects.filter(pool=pool).first()
    group.node_count += 1
    group.save()
    assert client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 200
    stale = client.patch(url, {"notes": "x"}, format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412


@pytest.mark.parametrize(
    ("prefix", "model", "change"),
    [
        ("clusters", Cluster, {"notes": "edited"}),
        ("pools", Pool, {"notes": "edited"}),
        ("node-groups", NodeGroup, {"node_count": 3}),
        ("accelerator-models", None, {"source": "edited"}),
    ],
)
def test_every_inventory_endpoint_checks_if_match(
    client_for, planner, demo_fleet, prefix, model, change
):
    client = client_for(planner)
    first = client.get(f"/api/v1/{prefix}/").json()["results"][0]
    url = f"/api/v1/{prefix}/{first['id']}/"
    etag = client.get(url)["ETag"]
    assert client.patch(url, change, format="json", HTTP_IF_MATCH=etag).status_code == 200
    assert client.patch(url, change, format="json", HTTP_IF_MATCH=etag).status_code == 412


# --- Edit pages ---------------------------------------------------------------------------------


@pytest.fixture
def two_planners(planner, site):
    """Alice and Bob, both logged in as planners, and the site's edit page."""
    alice, bob = Client(), Client()
    alice.force_login(planner)
    bob.force_login(make_user("bob", "planner"))
    return alice, bob, f"/inventory/sites/{site.pk}/edit/"


def test_second_planner_saving_a_stale_site_form_is_refused_with_both_values(two_planners, site):
    alice, bob, url = two_planners
    alice_version = opened_version(alice.get(url).content.decode())
    bob_version = opened_version(bob.get(url).content.decode())

    saved = bob.post(url, site_form(site, pue="1.35", opened_version=bob_version))
    assert saved.status_code == 302

    refused = alice.post(url, site_form(site, pue="1.15", opened_version=alice_version))
    html = refused.content.decode()
    assert refused.status_code == 200
    assert "was changed by bob at" in html and "since you opened it" in html
    table = re.search(r'<table class="conflict">(.*?)</table>', html, re.S).group(1)
    assert "Measured PUE" in table and "1.35" in table and "1.15" in table
    assert "Location" not in table  # unchanged by bob: not a conflict
    site.refresh_from_db()
    assert site.pue == 1.35  # nothing silently reverted

    # The refused form now holds the current version: saving again is a deliberate choice.
    again = alice.post(url, site_form(site, pue="1.15", opened_version=opened_version(html)))
    assert again.status_code == 302
    site.refresh_from_db()
    assert site.pue == 1.15


def test_an_edit_form_without_a_version_is_saved_as_before(planner, site):
    client = Client()
    client.force_login(planner)
    response = client.post(f"/inventory/sites/{site.pk}/edit/", site_form(site, pue="1.4"))
    assert response.status_code == 302
    site.refresh_from_db()
    assert site.pue == 1.4


def test_stale_cluster_form_names_the_changed_site_by_name(planner, demo_fleet):
    cluster = Cluster.objects.select_related("site").first()
    other_site = Site.objects.exclude(pk=cluster.site_id).first()
    client = Client()
    client.force_login(planner)
    url = f"/inventory/clusters/{cluster.pk}/edit/"
    version = opened_version(client.get(url).content.decode())
    moved = Cluster.objects.get(pk=cluster.pk)
    moved.site = other_site
    moved.save()
    form = {
        "site": cluster.site_id,
        "name": cluster.name,
        "fabric": cluster.fabric,
        "inter_node_bandwidth_gbps_per_card": cluster.inter_node_bandwidth_gbps_per_card,
        "assumptions": "{}",
        "opened_version": version,
    }
    if cluster.capital_cost_per_card is not None:
        form |= {
            "capital_cost_per_card": cluster.capital_cost_per_card,
            "amortization_years": cluster.amortization_years,
        }
    html = client.post(url, form).content.decode()
    table = re.search(r'<table class="conflict">(.*?)</table>', html, re.S).group(1)
    assert other_site.name in table and cluster.site.name in table
    assert Cluster.objects.get(pk=cluster.pk).site_id == other_site.pk


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_claims_of_one_version_let_exactly_one_through():
    """Two transactions claim the same version; the second waits for the first and loses."""
    import threading

    from django.db import close_old_connections, connection, transaction

    from core.concurrency import claim

    site = Site.objects.create(name="Race")
    first_claimed, results = threading.Event(), {}

    def first():
        try:
            with transaction.atomic():
                results["first"] = claim(Site, site.pk, 1)
                Site.objects.filter(pk=site.pk).update(version=2, location="first")
                first_claimed.set()
                threading.Event().wait(0.5)  # hold the lock while the second one tries
        finally:
            connection.close()

    def second():
        first_claimed.wait(10)
        try:
            with transaction.atomic():
                results["second"] = claim(Site, site.pk, 1)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    close_old_connections()
    assert results == {"first": True, "second": False}
    assert Site.objects.get(pk=site.pk).location == "first"


def test_report_schedules_and_gres_aliases_check_if_match_too(client_for, fleet_admin):
    from accounting.models import GresAlias
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel
    from tests.support.builders import SCHEDULES, VALID_SCHEDULE

    client = client_for(fleet_admin)
    created = client.post(SCHEDULES, VALID_SCHEDULE, format="json")
    assert created.status_code == 201
    load_catalog(AcceleratorModel)
    alias = GresAlias.objects.create(
        gres_type="hopper", accelerator=AcceleratorModel.objects.first()
    )
    for url, change in [
        (f"{SCHEDULES}{created.json()['id']}/", {"name": "renamed"}),
        (f"/api/v1/gres-aliases/{alias.pk}/", {"notes": "renamed"}),
    ]:
        etag = client.get(url)["ETag"]
        assert client.patch(url, change, format="json", HTTP_IF_MATCH=etag).status_code == 200
        stale = client.patch(url, change, format="json", HTTP_IF_MATCH=etag)
        assert stale.status_code == 412 and "If-Match" in stale.json()["detail"]


def test_plan_updates_check_if_match(client_for, planner, demo_fleet):
    from tests.support.builders import PLANS, plan_payload

    client = client_for(planner)
    created = client.post(PLANS, plan_payload(), format="json")
    assert created.status_code == 202
    url = f"{PLANS}{created.json()['id']}/"
    etag = client.get(url)["ETag"]
    renamed = client.patch(url, {"name": "renamed"}, format="json", HTTP_IF_MATCH=etag)
    assert renamed.status_code == 200 and renamed["ETag"] != etag
    stale = client.patch(url, {"name": "again"}, format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412
    assert client.get(url).json()["name"] == "renamed"


def test_the_schema_documents_if_match_and_412_on_updates():
    from tests.support.openapi import validated_schema

    paths = validated_schema()["paths"]
    for path in ("/api/v1/sites/{id}/", "/api/v1/plans/{id}/", "/api/v1/report-schedules/{id}/"):
        for method in ("put", "patch"):
            operation = paths[path][method]
            headers = [p["name"] for p in operation["parameters"] if p["in"] == "header"]
            assert "If-Match" in headers and "412" in operation["responses"], (path, method)
    assert "412" not in paths["/api/v1/sites/{id}/"]["get"]["responses"]


def test_a_field_only_they_changed_takes_their_value_so_saving_again_reverts_nothing(
    two_planners, site
):
    alice, bob, url = two_planners
    alice_version = opened_version(alice.get(url).content.decode())
    bob_version = opened_version(bob.get(url).content.decode())
    bob.post(
        url, site_form(site, location="Oslo S", pue_confirmed="on", opened_version=bob_version)
    )

    refused = alice.post(url, site_form(site, pue="1.15", opened_version=alice_version))
    html = refused.content.decode()
    table = re.search(r'<table class="conflict">(.*?)</table>', html, re.S).group(1)
    assert "Oslo S" in table and "not changed by you" in table and "Measured PUE" not in table
    assert 'name="location" value="Oslo S"' in html  # theirs, in the form
    assert re.search(r'<input type="checkbox" name="pue_confirmed"[^>]* checked', html)

    form = site_form(site, pue="1.15", opened_version=opened_version(html))
    form |= {"location": "Oslo S", "pue_confirmed": "on"}  # what the re-rendered form submits
    assert alice.post(url, form).status_code == 302
    site.refresh_from_db()
    assert (site.location, site.pue_confirmed, site.pue) == ("Oslo S", True, 1.15)

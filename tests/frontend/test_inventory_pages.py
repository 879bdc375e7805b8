"""Inventory pages with Django's test client: CRUD, field errors, totals, filters, query counts."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

pytestmark = pytest.mark.django_db


@pytest.fixture
def planner_client(client, planner):
    client.force_login(planner)
    return client


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


def field_error_html(html: str, field: str) -> str:
    """The error list Django renders for `field` (id="id_<field>_error"), or ""."""
    match = re.search(rf'<ul class="errorlist" id="id_{field}_error">(.*?)</ul>', html, re.S)
    return match.group(1) if match else ""


def field_block(html: str, field: str) -> str:
    """The markup of one form field's wrapper: label, widget, errors and help."""
    match = re.search(
        rf'<div class="field[^"]*">\s*(?:(?!<div class="field).)*?id="id_{field}".*?</div>',
        html,
        re.S,
    )
    return match.group(0) if match else ""


# --- Create, edit, delete -----------------------------------------------------------------------


def test_planner_creates_edits_and_deletes_a_site(planner_client):
    response = planner_client.post(
        "/inventory/sites/new/",
        {"name": "Oslo", "cooling_type": "immersion", "pue": "1.04", "tariff_per_kwh": "0.05"}
        | {"currency": "eur", "grid_carbon_g_per_kwh": "20", "assumptions": ""},
    )
    site = Site.objects.get(name="Oslo")
    assert response.status_code == 302 and response["Location"] == f"/inventory/sites/{site.pk}/"
    assert site.currency == "EUR" and site.assumptions == {}
    page = planner_client.get(response["Location"]).content.decode()
    assert "Added site “Oslo”." in page

    edit = planner_client.post(
        f"/inventory/sites/{site.pk}/edit/",
        {"name": "Oslo", "cooling_type": "immersion", "pue": "1.05", "tariff_per_kwh": "0.05"}
        | {"currency": "EUR", "grid_carbon_g_per_kwh": "20", "assumptions": "{}"},
    )
    assert edit.status_code == 302
    site.refresh_from_db()
    assert site.pue == 1.05

    invalid = planner_client.post(f"/inventory/sites/{site.pk}/edit/", {"name": ""})
    assert "<h1>Edit site Oslo</h1>" in invalid.content.decode()

    assert planner_client.get(f"/inventory/sites/{site.pk}/delete/").status_code == 200
    deleted = planner_client.post(f"/inventory/sites/{site.pk}/delete/")
    assert deleted.status_code == 302 and deleted["Location"] == "/inventory/sites/"
    assert not Site.objects.filter(pk=site.pk).exists()


def test_site_form_shows_the_model_errors_next_to_their_fields(planner_client):
    response = planner_client.post(
        "/inventory/sites/new/",
        {"name": "Hot", "cooling_type": "air", "pue": "3.4", "tariff_per_kwh": "-1"}
        | {"currency": "US$", "grid_carbon_g_per_kwh": "0", "metered_facility_energy_kwh": "5"}
        | {"assumptions": '{"no_such_key": 1}'},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "unusually high" in field_error_html(html, "pue")
    assert "greater than or equal to 0" in field_error_html(html, "tariff_per_kwh")
    assert "ISO 4217" in field_error_html(html, "currency")
    assert "given together" in field_error_html(html, "metered_it_energy_kwh")
    assert field_error_html(html, "assumptions")
    # Next to the field: inside the same wrapper as its label and input, which points at it.
    pue = field_block(html, "pue")
    assert '<label for="id_pue">' in pue and 'aria-invalid="true"' in pue
    assert 'aria-describedby="id_pue_helptext id_pue_error"' in pue
    assert "unusually high" in pue
    assert 'role="alert"' in html and 'href="#id_pue"' in html
    assert not Site.objects.filter(name="Hot").exists()


def test_cluster_form_preselects_the_site_and_enforces_amortization(planner_client, demo_fleet):
    site = Site.objects.get(name="Frankfurt DC1 (air)")
    html = planner_client.get(f"/inventory/clusters/new/?site={site.pk}").content.decode()
    assert f'<option value="{site.pk}" selected>' in html
    response = planner_client.post(
        "/inventory/clusters/new/",
        {"site": site.pk, "name": "c2", "fabric": "roce", "capital_cost_per_card": "1000"}
        | {"inter_node_bandwidth_gbps_per_card": "200", "assumptions": ""},
    )
    assert "amortization period" in field_error_html(
        response.content.decode(), "amortization_years"
    )
    duplicate = planner_client.post(
        "/inventory/clusters/new/",
        {"site": site.pk, "name": "inference-eu", "fabric": "roce"}
        | {"inter_node_bandwidth_gbps_per_card": "200", "assumptions": ""},
    )
    assert duplicate.status_code == 200
    assert "already exists" in duplicate.content.decode()
    assert Cluster.objects.filter(site=site).count() == 1


def test_planner_builds_a_heterogeneous_pool_from_its_page(planner_client, demo_fleet):
    cluster = Cluster.objects.get(name="inference-eu")
    created = planner_client.post(
        "/inventory/pools/new/",
        {"cluster": cluster.pk, "name": "mixed", "purpose": "training", "assumptions": ""},
    )
    pool = Pool.objects.get(cluster=cluster, name="mixed")
    assert created["Location"] == f"/inventory/pools/{pool.pk}/"
    add_url = f"/inventory/pools/{pool.pk}/node-groups/new/"
    for name, accelerator, nodes in [("a", "A100 SXM4 80GB", 4), ("h", "H100 SXM5 80GB", 2)]:
        accel = AcceleratorModel.objects.get(name=accelerator)
        response = planner_client.post(
            add_url,
            {"name": name, "accelerator": accel.pk, "node_count": nodes, "cards_per_node": 8},
        )
        assert (
            response.status_code == 302 and response["Location"] == f"/inventory/pools/{pool.pk}/"
        )
    html = planner_client.get(f"/inventory/pools/{pool.pk}/").content.decode()
    assert '<span class="badge badge-large">heterogeneous</span>' in html
    assert "<dd>48</dd>" in html  # cards
    expected_pflops = (32 * 312 + 16 * 989) / 1000
    assert f"<dd>{expected_pflops:.2f}</dd>" in html
    expected_kw = (32 * 400 + 16 * 700) / 1000
    assert f"<dd>{expected_kw:.1f}</dd>" in html
    assert "67 %" in html and "33 %" in html  # card shares


def test_pool_in_the_url_wins_over_a_posted_pool(planner_client, demo_fleet):
    target = Pool.objects.get(name="serving-l40s")
    other = Pool.objects.get(name="ascend-910b")
    l4 = AcceleratorModel.objects.get(name="L4")
    planner_client.post(
        f"/inventory/pools/{target.pk}/node-groups/new/",
        {
            "pool": other.pk,
            "name": "l4",
            "accelerator": l4.pk,
            "node_count": 1,
            "cards_per_node": 4,
        },
    )
    assert NodeGroup.objects.get(name="l4").pool == target


def test_node_group_errors_show_on_the_add_page(planner_client, demo_fleet):
    pool = Pool.objects.get(name="serving-l40s")
    response = planner_client.post(
        f"/inventory/pools/{pool.pk}/node-groups/new/",
        {"name": "l40s-nodes", "accelerator": "", "node_count": "-1", "cards_per_node": "0"}
        | {"mfu": "1.5"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "required" in field_error_html(html, "accelerator")
    assert field_error_html(html, "node_count")
    assert field_error_html(html, "cards_per_node")
    assert "less than or equal to 1" in field_error_html(html, "mfu")


def test_duplicate_node_group_name_in_a_pool_is_a_form_error(planner_client, demo_fleet):
    pool = Pool.objects.get(name="serving-l40s")
    l40s = AcceleratorModel.objects.get(name="L40S")
    response = planner_client.post(
        f"/inventory/pools/{pool.pk}/node-groups/new/",
        {"name": "l40s-nodes", "accelerator": l40s.pk, "node_count": 1, "cards_per_node": 4},
    )
    assert response.status_code == 200
    assert "already exists" in response.content.decode()


def test_planner_edits_and_deletes_a_node_group(planner_client, demo_fleet):
    group = NodeGroup.objects.get(name="l40s-nodes")
    response = planner_client.post(
        f"/inventory/node-groups/{group.pk}/edit/",
        {"pool": group.pool_id, "name": "l40s-nodes", "accelerator": group.accelerator_id}
        | {"node_count": 40, "cards_per_node": 4, "mfu": "0.3"},
    )
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.node_count == 40 and group.mfu == 0.3
    deleted = planner_client.post(f"/inventory/node-groups/{group.pk}/delete/")
    assert deleted["Location"] == f"/inventory/pools/{group.pool_id}/"
    assert not NodeGroup.objects.filter(pk=group.pk).exists()


def test_planner_adds_and_edits_a_catalog_card(planner_client):
    values = {
        "vendor": "Example",
        "name": "XPU-1",
        "dense_bf16_tflops": "800",
        "memory_gb": "96",
        "memory_bandwidth_tbs": "3.2",
        "tdp_w": "700",
        "intra_node_interconnect_gbs": "400",
        "default_training_mfu": "0.4",
        "currency": "USD",
        "confidence": "user",
    }
    assert planner_client.post("/inventory/accelerators/new/", values).status_code == 302
    card = AcceleratorModel.objects.get(name="XPU-1")
    bad = planner_client.post(f"/inventory/accelerators/{card.pk}/edit/", values | {"tdp_w": "0"})
    assert "greater than or equal to 1" in field_error_html(bad.content.decode(), "tdp_w")


def test_deleting_a_cluster_lists_what_goes_with_it(planner_client, demo_fleet):
    cluster = Cluster.objects.get(name="train-hetero")
    html = planner_client.get(f"/inventory/clusters/{cluster.pk}/delete/").content.decode()
    assert "This also deletes 1 pool and 2 node groups." in html
    assert f'<a href="/inventory/clusters/{cluster.pk}/">Cancel</a>' in html
    planner_client.post(f"/inventory/clusters/{cluster.pk}/delete/")
    assert not Pool.objects.filter(name="mixed-a100-h100").exists()


@pytest.mark.parametrize(
    ("model", "lookup", "prefix", "blocker"),
    [
        (Site, {"name": "Frankfurt DC1 (air)"}, "sites", "1 cluster (Frankfurt DC1 (air) / "),
        (AcceleratorModel, {"name": "L40S"}, "accelerators", "1 node group (l40s-nodes)"),
    ],
)
def test_deleting_a_protected_object_explains_instead_of_failing(
    planner_client, demo_fleet, model, lookup, prefix, blocker
):
    obj = model.objects.get(**lookup)
    confirm = planner_client.get(f"/inventory/{prefix}/{obj.pk}/delete/").content.decode()
    assert "cannot be deleted" in confirm and blocker in confirm
    assert 'type="submit" class="button-danger"' not in confirm
    response = planner_client.post(f"/inventory/{prefix}/{obj.pk}/delete/", follow=True)
    assert response.status_code == 200
    html = response.content.decode()
    assert "cannot be deleted" in html and "depend on it" in html and blocker in html
    assert response.redirect_chain[-1][0] == f"/inventory/{prefix}/{obj.pk}/"
    assert model.objects.filter(pk=obj.pk).exists()


# --- Reading: details, filters, query counts ----------------------------------------------------


def test_site_and_cluster_pages_show_derived_totals(viewer_client, demo_fleet):
    site = Site.objects.get(name="Ulanqab DC2 (liquid)")
    html = viewer_client.get(f"/inventory/sites/{site.pk}/").content.decode()
    assert "<dd>2512</dd>" in html and "train-hetero" in html and "train-ascend" in html
    cluster = Cluster.objects.get(name="train-hetero")
    html = viewer_client.get(f"/inventory/clusters/{cluster.pk}/").content.decode()
    assert "1000 × A100 SXM4 80GB + 1000 × H100 SXM5 80GB" in html
    assert "<dd>1301.00</dd>" in html


def test_accelerator_page_lists_where_the_card_is_used(viewer_client, demo_fleet):
    card = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    html = viewer_client.get(f"/inventory/accelerators/{card.pk}/").content.decode()
    assert "1000 cards in 1 node group." in html and "h100-nodes" in html


@pytest.mark.parametrize(
    ("url", "query", "shown", "hidden"),
    [
        ("/inventory/sites/", {"name": "frank"}, "Frankfurt DC1", "Ulanqab DC2"),
        ("/inventory/sites/", {"cooling_type": "direct_liquid"}, "Ulanqab DC2", "Frankfurt DC1"),
        ("/inventory/clusters/", {"fabric": "roce"}, "train-ascend", "train-hetero"),
        ("/inventory/pools/", {"purpose": "inference"}, "serving-l40s", "mixed-a100-h100"),
        ("/inventory/node-groups/", {"name": ""}, "910b-nodes", "no-such-group"),
        ("/inventory/accelerators/", {"vendor": "Huawei"}, "Ascend 910B", "H100 SXM5 80GB"),
        ("/inventory/accelerators/", {"name": "gaudi"}, "Gaudi 3", "Ascend 910B"),
    ],
)
def test_lists_filter(viewer_client, demo_fleet, url, query, shown, hidden):
    html = viewer_client.get(url, query).content.decode()
    tbody = html.split("<tbody>", 1)[-1]
    assert shown in tbody and hidden not in tbody


def test_pool_and_node_group_lists_filter_by_relations(viewer_client, demo_fleet):
    h100 = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    site = Site.objects.get(name="Frankfurt DC1 (air)")
    pools = viewer_client.get("/inventory/pools/", {"accelerator": h100.pk}).content.decode()
    assert "mixed-a100-h100" in pools and "ascend-910b" not in pools
    groups = viewer_client.get("/inventory/node-groups/", {"site": site.pk}).content.decode()
    tbody = groups.split("<tbody>", 1)[-1]
    assert "l40s-nodes" in tbody and "a100-nodes" not in tbody
    assert "1 node group matches the filters" in groups


def add_sites(count: int, offset: int = 0) -> None:
    """Sites with a cluster, a pool and two node groups each (a heterogeneous pool)."""
    a100 = AcceleratorModel.objects.get(name="A100 SXM4 80GB")
    h100 = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    for number in range(offset, offset + count):
        site = Site.objects.create(name=f"site-{number:03d}")
        cluster = Cluster.objects.create(site=site, name=f"cluster-{number}")
        pool = Pool.objects.create(cluster=cluster, name=f"pool-{number}")
        NodeGroup.objects.create(pool=pool, name="a", accelerator=a100, node_count=2)
        NodeGroup.objects.create(pool=pool, name="h", accelerator=h100, node_count=1)


def count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


LIST_URLS = [
    "/",
    "/inventory/",
    "/inventory/sites/",
    "/inventory/clusters/",
    "/inventory/pools/",
    "/inventory/node-groups/",
    "/inventory/accelerators/",
]


@pytest.mark.parametrize("url", LIST_URLS)
def test_list_query_count_does_not_grow_with_rows(planner_client, url):
    add_sites(2)
    few = count_queries(planner_client, url)
    add_sites(20, offset=2)
    many = count_queries(planner_client, url)
    assert many == few, f"{url}: {few} queries with 2 sites, {many} with 22"
    assert many <= 14


def test_detail_query_counts_do_not_grow_with_children(planner_client):
    add_sites(1)
    site, pool = Site.objects.get(), Pool.objects.get()
    a100 = AcceleratorModel.objects.get(name="A100 SXM4 80GB")
    urls = [f"/inventory/sites/{site.pk}/", f"/inventory/pools/{pool.pk}/"]
    urls += [f"/inventory/clusters/{pool.cluster_id}/", f"/inventory/accelerators/{a100.pk}/"]
    before = {url: count_queries(planner_client, url) for url in urls}
    for number in range(10):
        cluster = Cluster.objects.create(site=site, name=f"extra-{number}")
        extra_pool = Pool.objects.create(cluster=cluster, name="p")
        NodeGroup.objects.create(pool=extra_pool, name="g", accelerator=a100, node_count=1)
        NodeGroup.objects.create(pool=pool, name=f"g{number}", accelerator=a100, node_count=1)
    after = {url: count_queries(planner_client, url) for url in urls}
    assert after == before


def test_lists_paginate(viewer_client):
    add_sites(55)
    first = viewer_client.get("/inventory/sites/").content.decode()
    assert "Page 1 of 2" in first and "site-049" in first and "site-050" not in first
    second = viewer_client.get("/inventory/sites/", {"page": 2, "name": "site"}).content.decode()
    assert "site-054" in second and "?page=1&amp;name=site" in second


def test_filter_selects_offer_any_and_every_filter_is_labelled(viewer_client, demo_fleet):
    html = viewer_client.get("/inventory/node-groups/").content.decode()
    form = html.split('role="search"', 1)[1].split("</form>", 1)[0]
    for name in ["site", "cluster", "pool", "accelerator"]:
        assert f'<label for="id_{name}">' in form
    assert form.count('<option value="" selected>Any</option>') == 4
    assert "Ulanqab DC2 (liquid) / train-hetero / mixed-a100-h100" in form

"""Audit history of inventory changes (forms, API with token auth, bulk import) and revert."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from access.tokens import issue_token
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

pytestmark = pytest.mark.django_db

SITE_FORM = {
    "name": "Oslo",
    "cooling_type": "immersion",
    "pue": "1.04",
    "tariff_per_kwh": "0.05",
    "currency": "EUR",
    "grid_carbon_g_per_kwh": "20",
    "assumptions": "",
}


@pytest.fixture
def planner_client(client, planner):
    client.force_login(planner)
    return client


def revert_buttons(html: str) -> list[str]:
    return re.findall(r'<form method="post" action="([^"]+/revert/)">', html)


def test_form_changes_are_recorded_with_user_and_before_after(planner_client, planner):
    planner_client.post("/inventory/sites/new/", SITE_FORM)
    site = Site.objects.get(name="Oslo")
    planner_client.post(f"/inventory/sites/{site.pk}/edit/", SITE_FORM | {"pue": "1.2"})

    records = list(site.history.order_by("history_date"))
    assert [r.history_type for r in records] == ["+", "~"]
    assert all(r.history_user == planner for r in records)
    delta = records[1].diff_against(records[0])
    assert [(c.field, c.old, c.new) for c in delta.changes] == [("pue", 1.04, 1.2)]

    page = planner_client.get(f"/inventory/sites/{site.pk}/history/").content.decode()
    assert "Changed" in page and "by planner" in page
    assert re.search(r"<th scope=\"row\">Measured PUE</th><td>1.04</td><td>1.2</td>", page)


def test_api_changes_with_token_auth_record_the_token_user(planner, demo_fleet):
    _, key = issue_token(planner)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    cluster = Cluster.objects.get(name="train-ascend")
    response = api.patch(f"/api/v1/clusters/{cluster.pk}/", {"yearly_opex": 900000.0})
    assert response.status_code == 200, response.content

    latest = cluster.history.latest()
    assert latest.history_type == "~" and latest.history_user == planner
    assert latest.diff_against(latest.prev_record).changed_fields == ["yearly_opex"]

    response = api.delete(f"/api/v1/node-groups/{NodeGroup.objects.get(name='910b-nodes').pk}/")
    assert response.status_code == 204
    deleted = NodeGroup.history.filter(name="910b-nodes").latest()
    assert deleted.history_type == "-" and deleted.history_user == planner


def test_bulk_import_records_each_saved_row(planner_client, planner, demo_fleet):
    response = planner_client.post(
        "/inventory/import/pools/",
        {
            "pasted_rows": "site,cluster,name,planned_utilization\n"
            "Ulanqab DC2 (liquid),train-ascend,ascend-910b,0.9\n"
            "Ulanqab DC2 (liquid),train-ascend,new-pool,0.5\n"
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    preview = planner_client.get(response["Location"]).content.decode()
    token = re.search(r'name="token" value="([0-9a-f]+)"', preview).group(1)
    assert planner_client.post(response["Location"], {"token": token}).status_code == 302

    updated = Pool.objects.get(name="ascend-910b").history.latest()
    created = Pool.objects.get(name="new-pool").history.latest()
    assert (updated.history_type, created.history_type) == ("~", "+")
    assert updated.history_user == planner == created.history_user
    assert updated.diff_against(updated.prev_record).changed_fields == ["planned_utilization"]


def test_revert_restores_a_version_and_is_itself_recorded(planner_client, planner):
    planner_client.post("/inventory/sites/new/", SITE_FORM)
    site = Site.objects.get(name="Oslo")
    created = site.created
    planner_client.post(
        f"/inventory/sites/{site.pk}/edit/", SITE_FORM | {"pue": "1.3", "location": "Bergen"}
    )
    first = site.history.earliest()

    page = planner_client.get(f"/inventory/sites/{site.pk}/history/").content.decode()
    buttons = revert_buttons(page)
    # The current version has no button; the first one has.
    assert buttons == [f"/inventory/sites/{site.pk}/history/{first.history_id}/revert/"]
    assert 'name="csrfmiddlewaretoken"' in page

    response = planner_client.post(buttons[0])
    assert response.status_code == 302
    site.refresh_from_db()
    assert (site.pue, site.location, site.created) == (1.04, "", created)
    latest = site.history.latest()
    assert latest.history_type == "~" and latest.history_user == planner
    assert latest.history_change_reason.startswith("Reverted to the version of")
    assert sorted(latest.diff_against(latest.prev_record).changed_fields) == ["location", "pue"]
    page = planner_client.get(response["Location"]).content.decode()
    assert "Restored site “Oslo”" in page and "Reverted to the version of" in page


def test_revert_brings_back_a_deleted_object(planner_client, demo_fleet):
    group = NodeGroup.objects.get(name="910b-nodes")
    pk = group.pk
    planner_client.post(f"/inventory/node-groups/{pk}/delete/")
    assert not NodeGroup.objects.filter(pk=pk).exists()

    page = planner_client.get(f"/inventory/node-groups/{pk}/history/")
    assert page.status_code == 200 and "has been deleted" in page.content.decode()
    deleted = NodeGroup.history.filter(id=pk).latest()
    planner_client.post(f"/inventory/node-groups/{pk}/history/{deleted.history_id}/revert/")
    restored = NodeGroup.objects.get(pk=pk)
    assert (restored.name, restored.node_count) == ("910b-nodes", 64)


def test_revert_refused_with_a_reason_when_the_old_values_clash(planner_client):
    planner_client.post("/inventory/sites/new/", SITE_FORM)
    site = Site.objects.get(name="Oslo")
    planner_client.post(f"/inventory/sites/{site.pk}/edit/", SITE_FORM | {"name": "Oslo-2"})
    planner_client.post("/inventory/sites/new/", SITE_FORM)  # another site takes the old name
    first = site.history.earliest()

    response = planner_client.post(
        f"/inventory/sites/{site.pk}/history/{first.history_id}/revert/", follow=True
    )
    site.refresh_from_db()
    assert site.name == "Oslo-2"
    assert "This version cannot be restored: Name: Site with this Name already exists." in (
        response.content.decode()
    )


def test_revert_needs_planner_and_post(client, viewer, planner, demo_fleet):
    accelerator = AcceleratorModel.objects.get(name="L40S")
    accelerator.tdp_w = 999
    accelerator.save()
    version = accelerator.history.order_by("history_date").first()
    url = f"/inventory/accelerators/{accelerator.pk}/history/{version.history_id}/revert/"

    client.force_login(viewer)
    page = client.get(f"/inventory/accelerators/{accelerator.pk}/history/")
    assert page.status_code == 200 and revert_buttons(page.content.decode()) == []
    assert client.post(url).status_code == 403
    client.force_login(planner)
    assert client.get(url).status_code == 405
    accelerator.refresh_from_db()
    assert accelerator.tdp_w == 999


def test_detail_pages_link_their_history(planner_client, demo_fleet):
    for url in [
        f"/inventory/sites/{Site.objects.first().pk}/",
        f"/inventory/clusters/{Cluster.objects.first().pk}/",
        f"/inventory/pools/{Pool.objects.first().pk}/",
        f"/inventory/node-groups/{NodeGroup.objects.first().pk}/",
        f"/inventory/accelerators/{AcceleratorModel.objects.first().pk}/",
    ]:
        html = planner_client.get(url).content.decode()
        assert f'href="{url}history/"' in html
        assert planner_client.get(f"{url}history/").status_code == 200


def test_history_of_an_unknown_object_is_404(planner_client):
    assert planner_client.get("/inventory/sites/987654/history/").status_code == 404

"""Deleting a cluster or pool cannot lose measured data by accident (issue #28, Medium 11).

With usage records it needs an explicit confirmation naming them (count and period) on the
API (``?confirm=delete-usage``) and the form (a required box); confirmed, it is soft-deleted
(inventory.deletion): hidden with its records from pages, API and analyses, nothing cascades.
Reverting to an earlier version in its history restores it, and its records count again;
the retention task purges it for good after ``FLEETWISE_DELETED_RETENTION_DAYS``.

Alpha's day (tests/support/alpha_usage.py): 3 usage records on 2024-03-01 of 48 + 48 + 16 =
112 allocated card-hours, all in pool "h100".
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from accounting.models import UsageRecord
from inventory import deletion
from inventory.models import Cluster, NodeGroup, Pool
from tests.support.alpha_usage import sacct_text

pytestmark = pytest.mark.django_db

PERIOD = {"start": "2024-03-01", "end": "2024-03-02", "granularity": "day"}
ALLOCATED_CARD_HOURS = 48 + 48 + 16


@pytest.fixture
def used_alpha(alpha, import_text):
    import_text(alpha, sacct_text())
    assert UsageRecord.objects.filter(cluster=alpha).count() == 3
    return alpha


def _allocated_card_hours(client) -> float:
    body = client.get("/api/v1/accounting/utilization/", PERIOD).json()
    return sum(row["allocated_card_hours"] or 0 for row in body["rows"])


def _revert_to_before_delete(client, model, obj) -> None:
    """POST the history's "Revert to this version" of the last version before the delete."""
    prefix = {Cluster: "clusters", Pool: "pools"}[model]
    version = model.history.filter(id=obj.pk, deleted_at__isnull=True).latest("history_id")
    url = f"/inventory/{prefix}/{obj.pk}/history/{version.history_id}/revert/"
    assert client.post(url).status_code == 302


def test_a_cluster_with_usage_is_hidden_everywhere_and_restored_whole(
    used_alpha, client_for, planner, viewer
):
    api, reader = client_for(planner), client_for(viewer)
    assert _allocated_card_hours(reader) == pytest.approx(ALLOCATED_CARD_HOURS)
    url = f"/api/v1/clusters/{used_alpha.pk}/"

    refused = api.delete(url)
    assert refused.status_code == 409
    body = refused.json()
    assert "3 usage records (2024-03-01 to 2024-03-01)" in body["detail"]
    assert "?confirm=delete-usage" in body["detail"] and body["confirm"] == "delete-usage"
    assert body["measured"][0] | {"first": None, "last": None} == {
        "what": "usage records",
        "count": 3,
        "first": None,
        "last": None,
    }
    assert body["measured"][0]["first"].startswith("2024-03-01T00:00:00")
    assert api.delete(url + "?confirm=delete-usage").status_code == 204

    # Hidden from the API, the pages and the reports; nothing deleted.
    assert api.get(url).status_code == 404
    assert reader.get("/api/v1/clusters/").json()["count"] == 0
    assert reader.get("/api/v1/pools/").json()["count"] == 0
    assert reader.get("/api/v1/usage-records/").json()["count"] == 0
    assert _allocated_card_hours(reader) == 0
    assert "alpha" not in reader.get("/inventory/clusters/").content.decode()
    assert reader.get(f"/inventory/clusters/{used_alpha.pk}/").status_code == 404
    assert NodeGroup.objects.count() == 0
    assert UsageRecord._base_manager.filter(cluster_id=used_alpha.pk).count() == 3
    history = reader.get(f"/inventory/clusters/{used_alpha.pk}/history/").content.decode()
    assert "has been deleted" in history and "Deleted " in history

    api.force_login(planner)
    _revert_to_before_delete(api, Cluster, used_alpha)
    assert api.get(url).status_code == 200
    assert reader.get("/api/v1/usage-records/").json()["count"] == 3
    assert _allocated_card_hours(reader) == pytest.approx(ALLOCATED_CARD_HOURS)
    assert NodeGroup.objects.filter(pool__cluster=used_alpha).count() == 1
    labels = [
        e["history_change_reason"]
        for e in Cluster.history.filter(id=used_alpha.pk).values("history_change_reason")
    ]
    assert any(label and label.startswith("Reverted to the version of") for label in labels)


def test_an_analysis_leaves_a_deleted_cluster_out(used_alpha, django_capture_on_commit_callbacks):
    from tests.support.inline import finished_analysis

    deletion.delete(used_alpha, confirm=deletion.CONFIRM_USAGE)
    with django_capture_on_commit_callbacks(execute=False):
        analysis = finished_analysis()
    assert analysis.results["pools"] == []


def test_the_delete_form_names_the_records_and_needs_the_box(used_alpha, client, planner):
    pool = Pool.objects.get(cluster=used_alpha)
    client.force_login(planner)
    page = client.get(f"/inventory/pools/{pool.pk}/delete/").content.decode()
    assert "3 usage records (2024-03-01 to 2024-03-01)" in page
    assert 'name="confirm" value="delete-usage" required' in page

    refused = client.post(f"/inventory/pools/{pool.pk}/delete/")
    assert refused.status_code == 400
    assert "Tick the box below to confirm" in refused.content.decode()
    assert Pool.objects.filter(pk=pool.pk).exists()

    done = client.post(f"/inventory/pools/{pool.pk}/delete/", {"confirm": "delete-usage"})
    assert done.status_code == 302
    assert not Pool.objects.filter(pk=pool.pk).exists()
    assert UsageRecord.objects.count() == 0  # the pool's records go (hidden) with it
    assert Cluster.objects.filter(pk=used_alpha.pk).exists()

    _revert_to_before_delete(client, Pool, pool)
    assert UsageRecord.objects.filter(pool=pool).count() == 3


def test_a_cluster_without_usage_needs_no_usage_confirmation(alpha, client_for, planner):
    url = f"/api/v1/clusters/{alpha.pk}/"
    refused = client_for(planner).delete(url)
    assert refused.status_code == 409 and "?cascade=true" in refused.json()["detail"]
    assert client_for(planner).delete(url + "?cascade=true").status_code == 204
    assert not Cluster.all_objects.filter(pk=alpha.pk).exists()  # nothing measured to keep


def test_a_deleted_name_is_free_and_a_clashing_restore_is_refused(used_alpha, client, planner):
    deletion.delete(used_alpha, confirm=deletion.CONFIRM_USAGE)
    again = Cluster.objects.create(site=used_alpha.site, name="alpha")
    with pytest.raises(deletion.RestoreRefused, match="already exists"):
        deletion.restore(Cluster.all_objects.get(pk=used_alpha.pk))
    client.force_login(planner)
    version = Cluster.history.filter(id=used_alpha.pk, deleted_at__isnull=True).latest("history_id")
    page = client.post(
        f"/inventory/clusters/{used_alpha.pk}/history/{version.history_id}/revert/", follow=True
    )
    assert "already exists" in page.content.decode()
    assert Cluster.all_objects.get(pk=used_alpha.pk).deleted_at is not None
    assert Cluster.objects.get(site=used_alpha.site, name="alpha") == again


def test_a_pool_of_a_deleted_cluster_cannot_come_back_alone(used_alpha):
    pool = Pool.objects.get(cluster=used_alpha)
    deletion.delete(pool, confirm=deletion.CONFIRM_USAGE)
    cluster = Cluster.objects.get(pk=used_alpha.pk)
    # Its records are hidden with the pool, yet still named: no outright, unconfirmed delete.
    with pytest.raises(deletion.ConfirmationNeeded, match="3 usage records"):
        deletion.delete(cluster)
    assert deletion.delete(cluster, confirm=deletion.CONFIRM_USAGE) is True
    with pytest.raises(deletion.RestoreRefused, match="restore the cluster first"):
        deletion.restore(Pool.all_objects.get(pk=pool.pk))


def test_reverting_to_the_deleted_version_never_deletes(used_alpha, client, planner):
    deletion.delete(used_alpha, confirm=deletion.CONFIRM_USAGE)
    deletion.restore(Cluster.all_objects.get(pk=used_alpha.pk))
    deleted_version = Cluster.history.filter(id=used_alpha.pk, deleted_at__isnull=False).get()
    client.force_login(planner)
    url = f"/inventory/clusters/{used_alpha.pk}/history/{deleted_version.history_id}/revert/"
    assert client.post(url).status_code == 302
    assert Cluster.objects.filter(pk=used_alpha.pk).exists()
    assert UsageRecord.objects.count() == 3


def test_the_purge_deletes_for_good_only_after_the_retention_period(used_alpha, settings):
    settings.FLEETWISE_DELETED_RETENTION_DAYS = 30
    pool = Pool.objects.get(cluster=used_alpha)
    deletion.delete(pool, confirm=deletion.CONFIRM_USAGE)
    now = timezone.now()
    assert deletion.purge_deleted(now + dt.timedelta(days=29)) == {}
    assert UsageRecord._base_manager.count() == 3

    assert deletion.purge_deleted(now + dt.timedelta(days=31)) == {"pools": 1}
    assert not Pool.all_objects.filter(pk=pool.pk).exists()
    # A purged pool's records go with it (a plain delete would only unmap them).
    assert UsageRecord._base_manager.count() == 0
    assert Cluster.objects.filter(pk=used_alpha.pk).exists()

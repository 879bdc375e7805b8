"""Deleting needs a confirmation when it would take other rows with it, and names them: a
cluster with usage data needs ``?confirm=delete-usage`` (its records, their period and the
rest are named; it is then hidden, restorable: tests/inventory/test_soft_delete.py); an
object nothing depends on is deleted at once; the schema documents both."""

from __future__ import annotations

import pytest

from tests.support.alpha_usage import sacct_text


@pytest.mark.django_db
def test_cluster_delete_names_what_it_would_delete_until_confirmed(
    client_for,
    planner,
    alpha,
    import_text,
):
    from accounting.models import ImportJob, UsageRecord
    from inventory.models import Cluster, Pool

    import_text(alpha, sacct_text())
    records = UsageRecord.objects.filter(cluster=alpha).count()
    assert records > 0
    client = client_for(planner)
    url = f"/api/v1/clusters/{alpha.pk}/"
    refused = client.delete(url)
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert f"{records:,} usage records (2024-" in detail and "1 import job" in detail
    assert "1 pool" in detail and "?confirm=delete-usage" in detail
    assert refused.json()["measured"][0]["count"] == records
    assert refused.json()["would_delete"]["usage records"] == records
    assert Cluster.objects.filter(pk=alpha.pk).exists()
    assert UsageRecord.objects.filter(cluster=alpha).count() == records

    # The old confirmation no longer covers measured data.
    assert client.delete(url + "?cascade=true").status_code == 409
    assert client.delete(url, QUERY_STRING="confirm=yes").status_code == 409
    assert client.delete(url + "?confirm=delete-usage").status_code == 204
    assert not Cluster.objects.filter(pk=alpha.pk).exists()
    assert not UsageRecord.objects.exists() and not Pool.objects.filter(cluster=alpha).exists()
    # Hidden, not gone: restorable until the retention task purges it.
    assert UsageRecord._base_manager.filter(cluster_id=alpha.pk).count() == records
    assert ImportJob.objects.filter(cluster_id=alpha.pk).exists()


@pytest.mark.django_db
def test_deleting_an_object_nothing_depends_on_needs_no_confirmation(client_for, planner):
    from inventory.models import Site

    site = Site.objects.create(name="Empty")
    assert client_for(planner).delete(f"/api/v1/sites/{site.pk}/").status_code == 204


@pytest.mark.django_db
def test_the_schema_documents_the_delete_confirmation():
    from tests.support.openapi import validated_schema

    operation = validated_schema()["paths"]["/api/v1/clusters/{id}/"]["delete"]
    assert {"cascade", "confirm"} <= {p["name"] for p in operation["parameters"]}
    assert "409" in operation["responses"]

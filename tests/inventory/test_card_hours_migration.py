"""The `mtbf_card_h*` assumption keys of stored sites, clusters and pools (and their history)
become `mtbf_card_hours*` (inventory migration 0010), and back."""

import importlib

import pytest
from django.apps import apps

from inventory.models import Cluster, Site

migration = importlib.import_module("inventory.migrations.0010_mtbf_card_hours_key")

pytestmark = pytest.mark.django_db


def test_old_keys_are_renamed_values_and_other_keys_kept(demo_fleet):
    site, cluster = Site.objects.first(), Cluster.objects.first()
    Site.objects.filter(pk=site.pk).update(
        assumptions={"mtbf_card_h": 30000, "mtbf_card_h_hopper": 60000, "restart_h": 0.2}
    )
    Cluster.objects.filter(pk=cluster.pk).update(assumptions={"mtbf_card_h_research": 9000})
    history = apps.get_model("inventory", "HistoricalSite").objects.filter(id=site.pk).first()
    type(history).objects.filter(pk=history.pk).update(assumptions={"mtbf_card_h": 1234})

    migration.forwards(apps, None)

    site.refresh_from_db()
    cluster.refresh_from_db()
    history.refresh_from_db()
    assert site.assumptions == {
        "mtbf_card_hours": 30000,
        "mtbf_card_hours_hopper": 60000,
        "restart_h": 0.2,
    }
    assert cluster.assumptions == {"mtbf_card_hours_research": 9000}
    assert history.assumptions == {"mtbf_card_hours": 1234}

    migration.backwards(apps, None)
    site.refresh_from_db()
    assert site.assumptions == {"mtbf_card_h": 30000, "mtbf_card_h_hopper": 60000, "restart_h": 0.2}

"""`manage.py load_demo_fleet` run again saves no unchanged row: no new `updated` time,
version or history entry (what made Fleet say "Node group l40s-nodes … was edited after this
run" after a restart); a demo value someone changed is still put back."""

import pytest
from django.core.management import call_command

from inventory.models import Cluster, NodeGroup, Pool, Site

pytestmark = pytest.mark.django_db

MODELS = (Site, Cluster, Pool, NodeGroup)


def _state() -> dict:
    """Per model: each row's updated time, version and number of history entries."""
    return {
        model.__name__: {
            row.pk: (row.updated, row.version, row.history.count()) for row in model.objects.all()
        }
        for model in MODELS
    }


def test_running_it_again_touches_no_row():
    call_command("load_demo_fleet", stdout=None)
    before = _state()
    assert sum(len(rows) for rows in before.values()) == 2 + 3 + 3 + 4
    call_command("load_demo_fleet", stdout=None)
    assert _state() == before


def test_a_changed_demo_value_is_put_back_and_only_that_row_is_saved():
    call_command("load_demo_fleet", stdout=None)
    Site.objects.filter(name="Frankfurt DC1 (air)").update(tariff_per_kwh=0.30)
    before = _state()
    call_command("load_demo_fleet", stdout=None)
    after = _state()
    frankfurt = Site.objects.get(name="Frankfurt DC1 (air)")
    assert frankfurt.tariff_per_kwh == 0.18
    assert after["Site"][frankfurt.pk] != before["Site"][frankfurt.pk]
    assert after["Site"][frankfurt.pk][2] == before["Site"][frankfurt.pk][2] + 1  # one edit
    unchanged = {k: v for k, v in after["Site"].items() if k != frankfurt.pk}
    assert unchanged == {k: v for k, v in before["Site"].items() if k != frankfurt.pk}
    for name in ("Cluster", "Pool", "NodeGroup"):
        assert after[name] == before[name]

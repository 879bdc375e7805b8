"""The demo year of usage: through the real importer, idempotent, one cluster partly covered."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import Min

pytestmark = pytest.mark.django_db

END = dt.date(2026, 11, 23)


def test_demo_usage_is_imported_once_through_the_importer(demo_fleet):
    from accounting.demo_usage import PARTIAL_DAYS, load_demo_usage
    from accounting.models import ImportJob, UsageRecord

    first = load_demo_usage(END)
    assert set(first) == {"train-hetero", "train-ascend", "inference-eu"}
    assert all(count > 0 for count in first.values())
    assert UsageRecord.objects.count() == sum(first.values())
    assert set(ImportJob.objects.values_list("status", flat=True)) == {"succeeded"}
    again = load_demo_usage(END)
    assert set(again.values()) == {0}
    assert UsageRecord.objects.count() == sum(first.values())
    starts = dict(
        UsageRecord.objects.values("cluster__name")
        .annotate(first=Min("start"))
        .values_list("cluster__name", "first")
    )
    day_zero = dt.datetime.combine(END, dt.time(), tzinfo=dt.UTC)
    assert starts["inference-eu"] >= day_zero - dt.timedelta(days=PARTIAL_DAYS)
    assert starts["train-hetero"] < day_zero - dt.timedelta(days=300)
    # Every job's cards land on a card the cluster has.
    assert not UsageRecord.objects.filter(accelerator__isnull=True).exists()


def test_the_demo_inference_pool_gets_one_serving_load(demo_fleet):
    from accounting.demo_usage import load_demo_serving_load
    from accounting.models import ServingLoad

    assert load_demo_serving_load(END) == 1
    assert load_demo_serving_load(END) == 0  # idempotent
    load = ServingLoad.objects.get()
    assert load.pool.name == "serving-l40s" and load.pool.purpose == "inference"
    load.full_clean()  # within the documented bounds
    assert load.period_end == dt.datetime.combine(END, dt.time(), tzinfo=dt.UTC)

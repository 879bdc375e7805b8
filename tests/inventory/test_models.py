"""Each inventory validation rule, through full_clean (the path forms, admin and API share)."""

import pytest
from django.core.exceptions import ValidationError

from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

pytestmark = pytest.mark.django_db


def errors_of(obj) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        obj.full_clean()
    return caught.value.message_dict


@pytest.fixture
def site():
    return Site.objects.create(name="Site A", cooling_type="air", tariff_per_kwh=0.1)


@pytest.fixture
def pool(site):
    cluster = Cluster.objects.create(site=site, name="c1")
    return Pool.objects.create(cluster=cluster, name="p1")


@pytest.fixture
def a100():
    return AcceleratorModel.objects.get(name="A100 SXM4 80GB")


def test_pue_below_one_is_rejected():
    assert "pue" in errors_of(Site(name="x", pue=0.95))


def test_pue_of_three_or_more_needs_confirmation():
    messages = errors_of(Site(name="x", pue=3.2))
    assert "confirmed" in messages["pue"][0]
    Site(name="y", pue=3.2, pue_confirmed=True).full_clean()
    Site(name="z", pue=2.99).full_clean()


def test_metered_energy_needs_both_readings_and_facility_at_least_it():
    assert "metered_it_energy_kwh" in errors_of(Site(name="x", metered_facility_energy_kwh=100))
    assert "metered_facility_energy_kwh" in errors_of(
        Site(name="x", metered_facility_energy_kwh=90, metered_it_energy_kwh=100)
    )
    Site(name="x", metered_facility_energy_kwh=120, metered_it_energy_kwh=100).full_clean()


def test_metered_period_must_end_after_start():
    import datetime as dt

    site = Site(
        name="x", metered_period_start=dt.date(2026, 2, 1), metered_period_end=dt.date(2026, 1, 1)
    )
    assert "metered_period_end" in errors_of(site)


def test_negative_tariff_and_carbon_are_rejected():
    messages = errors_of(Site(name="x", tariff_per_kwh=-0.01, grid_carbon_g_per_kwh=-1))
    assert {"tariff_per_kwh", "grid_carbon_g_per_kwh"} <= set(messages)


def test_currency_must_be_an_iso_code():
    assert "currency" in errors_of(Site(name="x", currency="US$"))


def test_site_names_are_unique(site):
    assert "name" in errors_of(Site(name="Site A"))


@pytest.mark.parametrize("mfu", [0.0, -0.1, 1.01])
def test_mfu_outside_zero_one_is_rejected(pool, a100, mfu):
    group = NodeGroup(pool=pool, name="g", accelerator=a100, node_count=1, mfu=mfu)
    assert "mfu" in errors_of(group)
    a100.default_training_mfu = mfu
    assert "default_training_mfu" in errors_of(a100)


def test_mfu_of_exactly_one_is_allowed(pool, a100):
    NodeGroup(pool=pool, name="g", accelerator=a100, node_count=1, mfu=1.0).full_clean()


def test_counts_must_not_be_negative_and_nodes_hold_cards(pool, a100):
    assert "node_count" in errors_of(
        NodeGroup(pool=pool, name="g", accelerator=a100, node_count=-1)
    )
    assert "cards_per_node" in errors_of(
        NodeGroup(pool=pool, name="g", accelerator=a100, node_count=1, cards_per_node=0)
    )
    NodeGroup(pool=pool, name="g", accelerator=a100, node_count=0).full_clean()


def test_planned_utilization_in_zero_one(pool):
    pool.planned_utilization = 1.5
    assert "planned_utilization" in errors_of(pool)


def test_cluster_names_are_unique_per_site_only(site):
    Cluster.objects.create(site=site, name="shared-name")
    assert "name" in errors_of(Cluster(site=site, name="shared-name"))
    other = Site.objects.create(name="Site B")
    Cluster(site=other, name="shared-name").full_clean()


def test_pool_and_node_group_names_are_unique_per_parent(pool, a100):
    assert "name" in errors_of(Pool(cluster=pool.cluster, name="p1"))
    NodeGroup.objects.create(pool=pool, name="g", accelerator=a100, node_count=1)
    assert "__all__" in errors_of(NodeGroup(pool=pool, name="g", accelerator=a100, node_count=2))


def test_capital_cost_needs_amortization(site):
    assert "amortization_years" in errors_of(
        Cluster(site=site, name="c9", capital_cost_per_card=30000)
    )


def test_accelerator_peak_must_be_positive(a100):
    a100.dense_bf16_tflops = 0
    assert "dense_bf16_tflops" in errors_of(a100)

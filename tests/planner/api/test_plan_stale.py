"""Plans are marked stale when an inventory object their options used changes or goes away.

The demo payload (tests/support/builders.py) uses new A100/H100 cards at Frankfurt DC1
and at an explicit "Cloud EU" site, plus the mixed A100/H100 pool of cluster train-hetero
(site Ulanqab DC2). Edits run their on-commit hooks (the signals act after commit).
"""

from __future__ import annotations

import pytest

from tests.support.builders import PLANS, plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db


@pytest.fixture
def computed(client_for, planner, payload):
    """Create and compute a plan through the API; returns a function re-reading it."""
    client = client_for(planner)

    def create(body=payload) -> int:
        response = client.post(PLANS, body, format="json")
        assert response.status_code == 202, response.content
        run_plan_inline(response.json()["id"])
        return response.json()["id"]

    plan_id = create()

    def read(pk: int = plan_id) -> dict:
        return client.get(f"{PLANS}{pk}/").json()

    read.create = create
    read.client = client
    read.id = plan_id
    return read


def _stale(pk: int) -> bool:
    from planner.models import Plan

    return Plan.objects.get(pk=pk).stale


def test_a_computed_plan_is_fresh_and_the_api_says_so(computed):
    body = computed()
    assert body["status"] == "succeeded"
    assert body["stale"] is False and body["inventory_changed_at"] is None
    listed = computed.client.get(PLANS).json()["results"][0]
    assert listed["stale"] is False


@pytest.mark.parametrize(
    "edit",
    [
        "site_of_new_cards",
        "site_of_the_pool",
        "cluster_of_the_pool",
        "pool",
        "node_group_of_the_pool",
        "card_model",
    ],
)
def test_an_edit_of_anything_the_plan_used_makes_it_stale(
    computed, edit, django_capture_on_commit_callbacks
):
    from inventory.models import AcceleratorModel, NodeGroup, Pool, Site

    pool = Pool.objects.select_related("cluster__site").get(name="mixed-a100-h100")
    with django_capture_on_commit_callbacks(execute=True):
        if edit == "site_of_new_cards":
            site = Site.objects.get(name="Frankfurt DC1 (air)")
            site.pue = 1.45
            site.save()
        elif edit == "site_of_the_pool":
            pool.cluster.site.tariff_per_kwh = 0.07
            pool.cluster.site.save()
        elif edit == "cluster_of_the_pool":
            pool.cluster.yearly_opex = 3e6
            pool.cluster.save()
        elif edit == "pool":
            pool.planned_utilization = 0.8
            pool.save()
        elif edit == "node_group_of_the_pool":
            group = NodeGroup.objects.filter(pool=pool).first()
            group.node_count = 100
            group.save()
        else:
            card = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
            card.rental_price_per_card_hour = 3.5
            card.save()
    body = computed()
    assert body["stale"] is True and body["inventory_changed_at"] is not None
    assert [p["id"] for p in computed.client.get(PLANS, {"stale": "true"}).json()["results"]] == [
        computed.id
    ]


def test_edits_of_what_the_plan_did_not_use_leave_it_fresh(
    computed, django_capture_on_commit_callbacks
):
    from inventory.models import AcceleratorModel, NodeGroup, Pool

    with django_capture_on_commit_callbacks(execute=True):
        card = AcceleratorModel.objects.get(name="L40S")
        card.tdp_w = 360
        card.save()
        ascend = Pool.objects.get(name="ascend-910b")  # another cluster, same site as the pool
        ascend.planned_utilization = 0.65
        ascend.save()
        group = NodeGroup.objects.get(pool=ascend)
        group.node_count = 60
        group.save()
    assert computed()["stale"] is False


def test_a_node_group_elsewhere_in_the_pools_cluster_makes_it_stale(
    computed, django_capture_on_commit_callbacks
):
    """The cluster's opex is spread over all its cards, so a sibling pool's cards count."""
    from inventory.models import AcceleratorModel, NodeGroup, Pool

    pool = Pool.objects.get(name="mixed-a100-h100")
    sibling = Pool.objects.create(cluster=pool.cluster, name="sibling")
    with django_capture_on_commit_callbacks(execute=True):
        NodeGroup.objects.create(
            pool=sibling,
            name="extra",
            accelerator=AcceleratorModel.objects.get(name="L40S"),
            node_count=4,
        )
    assert computed()["stale"] is True


def test_deleting_a_pool_the_plan_used_makes_it_stale(
    computed, demo_fleet, django_capture_on_commit_callbacks
):
    from inventory.models import Pool

    serving = Pool.objects.get(name="serving-l40s")
    other = computed.create(plan_payload(accelerators=None, cards=None, pools=[serving.pk]))
    assert _stale(other) is False
    with django_capture_on_commit_callbacks(execute=True):
        serving.delete()
    assert _stale(other) is True
    assert _stale(computed.id) is False  # the first plan never used that pool


def test_a_successful_recompute_clears_it_and_a_clone_inherits_it(
    computed, django_capture_on_commit_callbacks
):
    from inventory.models import Site

    with django_capture_on_commit_callbacks(execute=True):
        Site.objects.filter(name="Frankfurt DC1 (air)").first().save()
    assert computed()["stale"] is True
    clone = computed.client.post(f"{PLANS}{computed.id}/clone/").json()
    assert clone["stale"] is True  # it shows the source's (stale) result until it runs
    assert computed.client.post(f"{PLANS}{computed.id}/recompute/").status_code == 202
    assert computed()["stale"] is True  # still showing the old result
    run_plan_inline(computed.id)
    body = computed()
    assert body["status"] == "succeeded" and body["stale"] is False


def test_an_edit_during_a_run_keeps_the_plan_stale(computed, django_capture_on_commit_callbacks):
    """The run may have read the inventory before the edit: its result is not trusted fresh."""
    from inventory.models import Site
    from planner import plans
    from planner.models import Plan

    plan = plans.recompute_plan(Plan.objects.get(pk=computed.id))
    run_id = str(plan.run_id)
    assert plans.mark_running(plan.pk, run_id)
    results, summary, snapshot = plans.compute(Plan.objects.get(pk=plan.pk))
    with django_capture_on_commit_callbacks(execute=True):
        site = Site.objects.get(name="Frankfurt DC1 (air)")
        site.pue = 1.4
        site.save()
    assert plans.finish(plan.pk, run_id, results=results, summary=summary, snapshot=snapshot)
    assert _stale(plan.pk) is True


def test_references_come_from_the_options_and_the_stored_snapshot(computed):
    from inventory.models import AcceleratorModel, Pool, Site
    from planner.models import Plan

    plan = Plan.objects.get(pk=computed.id)
    pool = Pool.objects.get(name="mixed-a100-h100")
    cards = AcceleratorModel.objects.filter(name__in=["A100 SXM4 80GB", "H100 SXM5 80GB"])
    assert plan.inventory_refs == {
        "site": sorted([Site.objects.get(name="Frankfurt DC1 (air)").pk, pool.cluster.site_id]),
        "cluster": [pool.cluster_id],
        "pool": [pool.pk],
        "accelerator": sorted(cards.values_list("pk", flat=True)),
    }

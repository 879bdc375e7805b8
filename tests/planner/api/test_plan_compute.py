"""Plans computed by the real Celery worker: results, recompute, failures, clones."""

from __future__ import annotations

import pytest

from tests.support.builders import PLANS, plan_payload, usd_to_eur_rate
from tests.support.polling import wait_for_plan

pytestmark = pytest.mark.worker


def test_plan_is_queued_computed_ranked_and_pareto_marked(celery_worker, client_for, planner):
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    usd_to_eur_rate()  # prices the catalog's USD cards at the EUR site
    client = client_for(planner)
    accepted = client.post(PLANS, plan_payload(), format="json")
    assert accepted.status_code == 202, accepted.content
    assert accepted.json()["status"] == "queued" and accepted.json()["results"] is None
    body = wait_for_plan(client, accepted.json()["id"])
    assert body["status"] == "succeeded", body["error"]
    assert body["progress"] == 100
    seen = body["seen_progress"]
    assert all(b >= a for a, b in zip(seen, seen[1:], strict=False))

    results = body["results"]
    rows = results["options"]
    # 2 card models x 3 sizes x 2 sites, plus the mixed pool's A100 and H100 groups.
    assert len(rows) == 2 * 3 * 2 + 2
    assert [row["option_id"] for row in rows] == list(range(len(rows)))
    assert set(results["columns"]) == set(rows[0])
    feasible = [row for row in rows if row["feasible"]]
    assert feasible and body["summary"]["feasible"] == len(feasible)

    # Frankfurt prices in EUR, the typed site and the pool in USD: no option is cheapest overall.
    currencies = sorted({row["currency"] for row in feasible})
    assert currencies == ["EUR", "USD"]
    assert body["summary"]["cheapest"] is None and body["summary"]["fastest"] is None

    # Ranking: by cost and by days over feasible options, 1 = best, within each currency;
    # the stored lists run currency by currency.
    by_cost = results["ranking"]["by_cost"]
    assert sorted(by_cost) == sorted(row["option_id"] for row in feasible)
    assert [rows[i]["currency"] for i in by_cost] == sorted(rows[i]["currency"] for i in by_cost)
    headlines = {group["currency"]: group for group in body["summary"]["by_currency"]}
    assert sorted(headlines) == currencies
    for currency in currencies:
        mine = [i for i in by_cost if rows[i]["currency"] == currency]
        costs = [rows[i]["total_cost"] for i in mine]
        assert costs == sorted(costs) and rows[mine[0]]["rank_by_cost"] == 1
        assert headlines[currency]["cheapest"]["option_id"] == mine[0]
        by_days = [i for i in results["ranking"]["by_days"] if rows[i]["currency"] == currency]
        days = [rows[i]["days"] for i in by_days]
        assert days == sorted(days)
        assert headlines[currency]["fastest"]["option_id"] == by_days[0]

    # Pareto flags: exactly the options no other feasible option of the same currency dominates.
    def dominated(row):
        return any(
            o["currency"] == row["currency"]
            and o["days"] <= row["days"]
            and o["total_cost"] <= row["total_cost"]
            and (o["days"] < row["days"] or o["total_cost"] < row["total_cost"])
            for o in feasible
        )

    front = {row["option_id"] for row in feasible if not dominated(row)}
    assert {row["option_id"] for row in rows if row["on_pareto_front"]} == front
    assert set(results["pareto_front"]) == front

    # The existing pool: its own size, the liquid site's PUE, the cluster's ownership terms.
    pool_rows = [row for row in rows if row["source"] == "pool"]
    assert {row["accelerator"] for row in pool_rows} == {"A100 SXM4 80GB", "H100 SXM5 80GB"}
    for row in pool_rows:
        assert row["cards"] == 1000 and row["pue"] == pytest.approx(1.1)
        assert row["cost_basis"] == "ownership"
        assert row["utilization"] == pytest.approx(0.7)
        assert row["utilization_provenance"] == "modeled"
    air = next(row for row in rows if row["site"] == "Frankfurt DC1 (air)")
    assert air["pue"] == pytest.approx(1.5) and air["energy_provenance"] == "entered"
    assert air["cost_basis"] == "rental"

    # Sensitivity (tornado) and lever ROI for the shortlisted options.
    shortlisted = set(results["sensitivity_option_ids"])
    assert front <= shortlisted
    factors = {row["factor"] for row in results["sensitivity"]}
    assert factors == {"energy", "mfu", "scaling", "effective_time", "utilization", "combined"}
    assert {row["lever"] for row in results["levers"]} == {"liquid_cooling", "colocation"}
    assert {row["option_id"] for row in results["levers"]} == shortlisted


def test_recompute_failure_keeps_results_then_edit_recomputes(celery_worker, client_for, planner):
    from inventory.models import Site
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    client = client_for(planner)
    created = client.post(PLANS, plan_payload(pools=None), format="json").json()
    good = wait_for_plan(client, created["id"])
    assert good["status"] == "succeeded", good["error"]

    # Bypass model validation to plant a PUE the engine must refuse.
    Site.objects.filter(name="Frankfurt DC1 (air)").update(pue=0.5)
    assert client.post(f"{PLANS}{created['id']}/recompute/").status_code == 202
    failed = wait_for_plan(client, created["id"])
    assert failed["status"] == "failed"
    assert "pue" in failed["error"]
    assert failed["results"] == good["results"]
    Site.objects.filter(name="Frankfurt DC1 (air)").update(pue=1.5)

    # Changing the workload queues a new run; a smaller model trains faster.
    smaller = {"model_params": 13e9, "tokens": 300e9, "flops_per_param_token": 8}
    edited = client.patch(f"{PLANS}{created['id']}/", {"workload": smaller}, format="json")
    assert edited.status_code == 200, edited.content
    assert edited.json()["status"] == "queued"
    redone = wait_for_plan(client, created["id"])
    assert redone["status"] == "succeeded", redone["error"]
    for before, after in zip(
        good["summary"]["by_currency"], redone["summary"]["by_currency"], strict=True
    ):
        assert after["currency"] == before["currency"]
        assert after["fastest"]["days"] < before["fastest"]["days"]


def test_clone_is_owned_by_the_cloner_and_recomputed(
    celery_worker, client_for, planner, django_user_model
):
    from inventory.services import load_demo_fleet
    from tests.support.builders import make_user

    load_demo_fleet()
    source = client_for(planner).post(PLANS, plan_payload(pools=None), format="json").json()
    wait_for_plan(client_for(planner), source["id"])
    other = client_for(make_user("other-planner", "planner"))
    cloned = other.post(f"{PLANS}{source['id']}/clone/", {"name": "My copy"}, format="json")
    assert cloned.status_code == 201, cloned.content
    copy = cloned.json()
    assert copy["name"] == "My copy" and copy["owner_name"] == "other-planner"
    assert copy["cloned_from"] == source["id"] and copy["can_edit"] is True
    assert copy["workload"] == source["workload"]
    done = wait_for_plan(other, copy["id"])
    assert done["status"] == "succeeded", done["error"]
    source_done = other.get(f"{PLANS}{source['id']}/").json()
    assert done["summary"] == source_done["summary"]

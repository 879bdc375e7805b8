"""Existing-pool options use accounting's measured factors when the pool has usage history.

The demo's train-ascend cluster gets two jobs (CSV usage records) on its 512 Ascend 910B
cards, times relative to now so they fall in the plan's history window:

    job  cards  start      end          state      mfu
    j-1  256    now − 60d  now − 2d     completed  40 %
    j-2  128    now − 60d  now − 50d    node_fail  —

The window is the last `history_days` before the plan is computed, trimmed to the span the
records cover: [now − 60 d, now − 2 d], H = 58 × 24 hours. The mixed A100/H100 pool has no
records and stays modeled.
"""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db

HOURS = 58 * 24  # the trimmed window
FAILED_HOURS = 10 * 24


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def history(demo_fleet):
    from accounting import services
    from inventory.models import Cluster

    cluster = Cluster.objects.get(name="train-ascend")
    start = (timezone.now() - dt.timedelta(days=60)).replace(minute=0, second=0, microsecond=0)
    text = "\n".join(
        [
            "cluster,job_id,cards,start,end,state,accelerator_model,team,user,mfu",
            f"train-ascend,j-1,256,{_iso(start)},{_iso(start + dt.timedelta(hours=HOURS))},"
            "completed,Ascend 910B,team-a,ann,40%",
            f"train-ascend,j-2,128,{_iso(start)},"
            f"{_iso(start + dt.timedelta(hours=FAILED_HOURS))},node_fail,Ascend 910B,team-b,bob,",
        ]
    )
    job = services.create_import_job(
        kind="csv", cluster=cluster, source_name="history.csv", queue=False
    )
    services.import_file(job, io.BytesIO(text.encode()))
    return start


def _plan(**spec):
    from inventory.models import Pool
    from planner.models import Plan

    pools = [Pool.objects.get(name="ascend-910b").pk, Pool.objects.get(name="mixed-a100-h100").pk]
    overrides = spec.pop("overrides", {})
    return Plan(
        name="history",
        workload={"model_params": 7e9, "tokens": 100e9},
        options_spec={"pools": pools, **spec},
        overrides=overrides,
    )


def _by_pool(results) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for row in results["options"]:
        rows.setdefault(row["pool"], []).append(row)
    return rows


def test_a_pool_with_history_gets_measured_factors_one_without_stays_modeled(history):
    from planner import plans

    results, _, snapshot = plans.compute(_plan())
    rows = _by_pool(results)
    (ascend,) = rows["ascend-910b"]
    allocated = 256 * HOURS + 128 * FAILED_HOURS  # card-hours held by jobs in the window
    assert ascend["utilization"] == pytest.approx(allocated / (512 * HOURS))
    assert ascend["utilization_provenance"] == "measured"
    assert ascend["mfu"] == pytest.approx(0.40)
    assert ascend["mfu_provenance"] == "measured"
    # The node_fail job's card-hours are lost work: productive ÷ wall from the job logs.
    assert ascend["effective_time"] == pytest.approx(256 * HOURS / allocated)
    assert ascend["effective_time_provenance"] == "measured"
    assert ascend["scaling_provenance"] == "modeled"
    # Days follow from the measured factors (docs/capacity-planning.md), computed independently.
    flops = 6 * 7e9 * 100e9
    product = ascend["mfu"] * ascend["scaling"] * ascend["effective_time"]
    running_s = flops / (512 * ascend["peak_tflops_per_card"] * 1e12 * product)
    assert ascend["days"] == pytest.approx(running_s / ascend["utilization"] / 86_400, rel=1e-6)

    for row in rows["mixed-a100-h100"]:
        assert row["utilization"] == pytest.approx(0.7)  # the pool's planned utilization
        assert row["utilization_provenance"] == "modeled"
        assert row["mfu_provenance"] == "modeled"  # the per-card model (engine.steptime)
        assert row["effective_time_provenance"] == "modeled"

    (window,) = results["measured_history"]
    assert window["pool"] == "ascend-910b" and window["option_id"] == ascend["option_id"]
    assert dt.datetime.fromisoformat(window["measured_from"]) == history
    assert dt.datetime.fromisoformat(window["measured_to"]) == history + dt.timedelta(hours=HOURS)
    assert set(window["measured_factors"]) == {"mfu", "effective_time", "utilization"}
    assert results["history_days"] == 90
    in_snapshot = next(o for o in snapshot["options"] if o["pool"] == "ascend-910b")
    assert in_snapshot["utilization"] == pytest.approx(ascend["utilization"])


def test_a_shorter_history_window_leaves_the_older_failed_job_out(history):
    from planner import plans

    results, _, _ = plans.compute(_plan(history_days=30))
    (ascend,) = _by_pool(results)["ascend-910b"]
    # Only j-1 overlaps the last 30 days: 256 of 512 cards, no lost work.
    assert ascend["utilization"] == pytest.approx(0.5)
    assert ascend["effective_time"] == pytest.approx(1.0)


def test_history_days_zero_keeps_pools_modeled(history):
    from planner import plans

    results, _, _ = plans.compute(_plan(history_days=0))
    (ascend,) = _by_pool(results)["ascend-910b"]
    assert ascend["utilization"] == pytest.approx(0.6)
    assert ascend["utilization_provenance"] == "modeled"
    assert ascend["mfu_provenance"] == "modeled"
    assert results["measured_history"] == []


def test_explicit_overrides_win_over_measured_values(history):
    from planner import plans

    results, _, _ = plans.compute(_plan(overrides={"utilization": 0.95, "mfu": 0.5, "pue": 1.2}))
    for row in results["options"]:
        assert row["utilization"] == 0.95 and row["utilization_provenance"] == "override"
        assert row["mfu"] == 0.5 and row["mfu_provenance"] == "override"
        assert row["pue"] == 1.2 and row["energy_provenance"] == "override"
    (ascend,) = _by_pool(results)["ascend-910b"]
    assert ascend["effective_time_provenance"] == "measured"  # not overridden: still measured


def test_history_days_is_validated_by_the_api(client_for, planner, demo_fleet):
    from inventory.models import Pool

    pool = Pool.objects.get(name="ascend-910b")
    response = client_for(planner).post(
        "/api/v1/plans/",
        {
            "name": "bad",
            "workload": {"model_params": 7e9, "tokens": 1e11},
            "options_spec": {"pools": [pool.pk], "history_days": -1},
        },
        format="json",
    )
    assert response.status_code == 400
    assert "history_days" in response.json()["options_spec"]

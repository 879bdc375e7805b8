"""Existing-pool options take their per-card MTBF from the node failures in their usage records.

The demo's train-ascend cluster (512 Ascend 910B cards in pool ascend-910b) gets CSV usage
records with states as sacct prints them; a requeued run is its own record. Per-card MTBF =
the pool's jobs' card-hours ÷ the jobs that ended NODE_FAIL, used from 10,000 card-hours.
"""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db

HEADER = "cluster,job_id,cards,start,end,state,accelerator_model,team,user"


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _import(jobs: list[tuple[str, int, float, float, str]]) -> None:
    """Jobs as (job id, cards, start hour, end hour, sacct state) from 60 days ago."""
    from accounting import services
    from inventory.models import Cluster

    cluster = Cluster.objects.get(name="train-ascend")
    origin = (timezone.now() - dt.timedelta(days=60)).replace(minute=0, second=0, microsecond=0)
    lines = [
        f"train-ascend,{job},{cards},{_iso(origin + dt.timedelta(hours=start))},"
        f"{_iso(origin + dt.timedelta(hours=end))},{state},Ascend 910B,team-a,ann"
        for job, cards, start, end, state in jobs
    ]
    job = services.create_import_job(
        kind="csv", cluster=cluster, source_name="failures.csv", queue=False
    )
    services.import_file(job, io.BytesIO("\n".join([HEADER, *lines]).encode()))


def _ascend_option(overrides: dict | None = None) -> dict:
    from inventory.models import Pool
    from planner import plans
    from planner.models import Plan

    plan = Plan(
        name="failures",
        workload={"model_params": 7e9, "tokens": 100e9},
        options_spec={"pools": [Pool.objects.get(name="ascend-910b").pk]},
        overrides=overrides or {},
    )
    results, _, _ = plans.compute(plan)
    (row,) = results["options"]
    return row


def _general_default() -> float:
    from engine.reliability import cooling_adjusted_mtbf_card_hours
    from inventory.models import Site

    cooling = Site.objects.get(clusters__name="train-ascend").cooling_type
    return float(cooling_adjusted_mtbf_card_hours(38_700.0, cooling))


def test_node_failures_over_enough_card_hours_give_a_measured_mtbf(demo_fleet):
    _import(
        [
            ("j-1", 256, 0, 1000, "COMPLETED"),
            ("j-2", 128, 0, 240, "NODE_FAIL"),
            # Requeued runs are records of their own (the CSV keys records by job id).
            ("j-2-r1", 128, 241, 480, "NODE_FAIL"),
            ("j-2-r2", 128, 481, 1000, "COMPLETED"),
            ("j-3", 64, 0, 100, "FAILED"),  # a failed program is not a node failure
        ]
    )
    row = _ascend_option()
    card_hours = 256 * 1000 + 128 * (240 + 239 + 519) + 64 * 100
    assert row["mtbf_card_hours"] == pytest.approx(card_hours / 2)
    assert row["mtbf_provenance"] == "measured"
    assert row["mtbf_basis"] == f"measured: 2 node failures in {card_hours:,.0f} card-hours"


def test_too_few_card_hours_keep_the_default_and_say_why(demo_fleet):
    _import([("j-1", 8, 0, 48, "COMPLETED"), ("j-2", 8, 0, 24, "NODE_FAIL")])
    row = _ascend_option()
    assert row["mtbf_provenance"] == "default"
    # No published 910B figure: the general default for the site's cooling.
    assert row["mtbf_card_hours"] == pytest.approx(_general_default())
    assert "Ascend 910B" in row["mtbf_basis"]
    assert row["mtbf_basis"].endswith(
        "1 node failure in 576 card-hours of jobs: fewer than 10,000 card-hours, not used"
    )


def test_no_failures_is_a_bound_not_infinity_and_keeps_the_default(demo_fleet):
    _import([("j-1", 256, 0, 1000, "COMPLETED")])
    row = _ascend_option()
    assert row["mtbf_provenance"] == "default"
    assert row["mtbf_card_hours"] == pytest.approx(_general_default())
    assert "no node failures in 256,000 card-hours of jobs" in row["mtbf_basis"]
    assert "at least 256,000 h, a bound, not used" in row["mtbf_basis"]


def test_a_plan_override_beats_the_measured_mtbf(demo_fleet):
    _import([("j-1", 256, 0, 1000, "COMPLETED"), ("j-2", 128, 0, 240, "NODE_FAIL")])
    row = _ascend_option({"mtbf_card_hours": 30_000})
    assert row["mtbf_card_hours"] == pytest.approx(30_000)
    assert row["mtbf_provenance"] == "override"

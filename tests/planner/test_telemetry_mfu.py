"""Analyses take a pool's MFU and IT energy from DCGM telemetry when its rollups cover enough
of the period.

GPU-day and job-day rollups are written through the telemetry models (the fetch that fills
them from a real Prometheus is tested in tests/telemetry); the analysis reads them through
the provider the telemetry app registers with the planner at start-up.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from planner import analysis as engine_bridge
from planner.models import Analysis

pytestmark = pytest.mark.django_db

START = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
END = dt.datetime(2026, 3, 4, tzinfo=dt.UTC)  # two whole days
DAYS = (dt.date(2026, 3, 2), dt.date(2026, 3, 3))
CARDS = 4  # pool train: 2 nodes × 2 H100
TENSOR_ALL_TIME = 0.3  # mean tensor activity over every covered hour
CLOCK_MHZ, MAX_CLOCK_MHZ = 1500.0, 1980.0
ALLOCATED_CARD_HOURS_PER_DAY = 64.0  # of 96: the rest of the day the cards were not allocated
# All the tensor work was done while allocated: 0.3 × 96 card-h ÷ 64 card-h = 0.45.
TENSOR_ALLOCATED = TENSOR_ALL_TIME * CARDS * 24 / ALLOCATED_CARD_HOURS_PER_DAY
PROXY = TENSOR_ALLOCATED * CLOCK_MHZ / MAX_CLOCK_MHZ


@pytest.fixture
def cluster(db):
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(name="T DC", cooling_type="air", pue=1.25, tariff_per_kwh=0.2)
    cluster = Cluster.objects.create(
        site=site, name="c1", commissioned_on=dt.date(2026, 1, 1),
        capital_cost_per_card=30_000.0, amortization_years=5.0,
    )  # fmt: skip
    card = AcceleratorModel.objects.get
    for name, accelerator in (("train", "H100 SXM5 80GB"), ("serve", "L40S")):
        pool = Pool.objects.create(cluster=cluster, name=name, planned_utilization=0.6)
        NodeGroup.objects.create(
            pool=pool, name=name, accelerator=card(name=accelerator), node_count=2,
            cards_per_node=2,
        )  # fmt: skip
    return cluster


def write_rollups(cluster, days=DAYS, jobs=True) -> None:
    """One GpuDay per train GPU and day (24 h covered), one JobDay per day."""
    from inventory.models import NodeGroup
    from telemetry.models import GpuDay, JobDay

    group = NodeGroup.objects.get(pool__cluster=cluster, name="train")
    for day in days:
        for host in ("gpu-h01", "gpu-h02"):
            for gpu in ("0", "1"):
                GpuDay.objects.create(
                    day=day, cluster=cluster, node_group=group, pool=group.pool,
                    accelerator=group.accelerator, hostname=host, gpu=gpu, covered_h=24.0,
                    tensor_active=TENSOR_ALL_TIME, gr_engine_active=0.5, power_w=400.0,
                    sm_clock_mhz=CLOCK_MHZ, max_sm_clock_mhz=MAX_CLOCK_MHZ, energy_kwh=9.6,
                    idle_h=8.0,
                )  # fmt: skip
        if jobs:
            JobDay.objects.create(
                day=day, cluster=cluster, pool=group.pool, account="nlp", job_id="101",
                allocated_card_hours=ALLOCATED_CARD_HOURS_PER_DAY, active_card_hours=48.0,
                tensor_card_hours=TENSOR_ALL_TIME * CARDS * 24, idle_card_hours=0.0,
                energy_kwh=30.0,
            )  # fmt: skip


def analyse(cluster) -> dict[str, dict]:
    analysis = Analysis.objects.create(
        scope="cluster", object_id=cluster.pk, period_start=START, period_end=END
    )
    rows, inputs = engine_bridge.evaluate_cluster(analysis, cluster.pk)
    part = SimpleNamespace(cluster_id=cluster.pk, pool_rows=rows, inputs=inputs)
    results, _ = engine_bridge.summarise(analysis, [part])
    return {row["pool"]: row for row in results["pools"]}


def test_telemetry_covering_the_period_gives_the_measured_mfu_proxy(cluster):
    before = analyse(cluster)
    write_rollups(cluster)
    pools = analyse(cluster)
    train = pools["train"]
    assert train["mfu"] == pytest.approx(PROXY)
    assert train["mfu_provenance"] == "measured"
    assert train["mfu_basis"] == "telemetry_proxy"
    assert train["telemetry_coverage_share"] == pytest.approx(1.0)
    assert "covers 100% of the pool's card-hours: MFU proxy 0.341" in train["mfu_telemetry_reason"]
    assert before["train"]["mfu_basis"] == "card_default"
    assert train["mfu"] != pytest.approx(before["train"]["mfu"])
    # The pool without telemetry is computed as before, with nothing to say about it.
    assert pools["serve"]["mfu"] == pytest.approx(before["serve"]["mfu"])
    assert pools["serve"]["mfu_basis"] == "card_default"
    assert pools["serve"]["mfu_telemetry_reason"] is None


def test_measured_it_energy_prices_the_energy_instead_of_nameplate_power(cluster):
    from telemetry.models import PrometheusSource

    PrometheusSource.objects.create(cluster=cluster, url="http://127.0.0.1:9", node_overhead=0.5)
    before = analyse(cluster)
    write_rollups(cluster)
    pools = analyse(cluster)
    train = pools["train"]
    it_kwh = 8 * 9.6 * 1.5  # 8 GPU-days of 9.6 kWh each, × (1 + node overhead)
    assert train["it_energy_mwh"] == pytest.approx(it_kwh / 1000)
    assert train["it_energy_provenance"] == "measured"
    assert train["facility_energy_mwh"] == pytest.approx(it_kwh * 1.25 / 1000)
    assert train["energy_cost"] == pytest.approx(it_kwh * 1.25 * 0.2)
    assert before["train"]["it_energy_provenance"] == "modeled"
    assert before["train"]["energy_cost"] != pytest.approx(train["energy_cost"])
    assert train["it_energy_reason"].startswith("measured: DCGM energy counters")
    assert pools["serve"]["it_energy_provenance"] == "modeled"
    assert pools["serve"]["energy_cost"] == pytest.approx(before["serve"]["energy_cost"])
    assert pools["serve"]["it_energy_reason"] is None


def test_telemetry_below_the_coverage_rule_keeps_the_modeled_mfu_and_says_why(cluster):
    write_rollups(cluster, days=DAYS[:1])
    with_half = analyse(cluster)["train"]
    assert with_half["mfu_basis"] == "telemetry_proxy"  # 50 % meets the rule
    from telemetry.models import GpuDay

    GpuDay.objects.update(covered_h=23.0)  # 92 of 192 card-hours: 47.9 %
    train = analyse(cluster)["train"]
    assert train["mfu_basis"] == "card_default" and train["mfu_provenance"] == "default"
    assert train["telemetry_coverage_share"] == pytest.approx(92 / 192)
    assert train["mfu_telemetry_reason"] == (
        "DCGM telemetry covers 48% of the pool's card-hours, below the 50% rule: "
        "the MFU proxy is not used"
    )
    assert train["it_energy_provenance"] == "modeled"
    assert "below the 50% rule: nameplate power is used" in train["it_energy_reason"]


def test_without_jobs_joined_the_all_time_proxy_is_not_taken_for_mfu(cluster):
    # Tensor activity over all hours counts unallocated time, which utilization already counts.
    write_rollups(cluster, jobs=False)
    train = analyse(cluster)["train"]
    assert train["mfu_basis"] == "card_default"
    assert "no Slurm job joined with telemetry" in train["mfu_telemetry_reason"]


def test_a_card_model_mfu_wins_over_the_telemetry_proxy(cluster):
    from inventory.models import NodeGroup

    NodeGroup.objects.filter(name="train").update(mfu=0.5)
    write_rollups(cluster)
    train = analyse(cluster)["train"]
    assert train["mfu"] == pytest.approx(0.5)
    assert train["mfu_basis"] == "group_entered"


def test_the_analysis_page_shows_why_telemetry_was_used_or_not(client, viewer, cluster):
    from django.utils import timezone

    from inventory.models import Pool

    write_rollups(cluster)
    analysis = Analysis.objects.create(scope="fleet", period_start=START, period_end=END)
    rows, inputs = engine_bridge.evaluate_cluster(analysis, cluster.pk)
    part = SimpleNamespace(cluster_id=cluster.pk, pool_rows=rows, inputs=inputs)
    analysis.results, _ = engine_bridge.summarise(analysis, [part])
    analysis.status, analysis.succeeded_at = "succeeded", timezone.now()
    analysis.save()
    client.force_login(viewer)
    train = Pool.objects.get(cluster=cluster, name="train")
    pool_page = client.get(f"/analyses/{analysis.pk}/", {"scope": f"pool-{train.pk}"})
    html = pool_page.content.decode()
    assert "<strong>GPU telemetry:</strong> MFU: DCGM telemetry covers 100%" in html
    summary = client.get(f"/analyses/{analysis.pk}/").content.decode()
    assert "<strong>GPU telemetry, pool train:</strong> MFU: DCGM telemetry covers 100%" in summary
    assert "GPU telemetry, pool serve" not in summary  # nothing to say about it
    # The waterfall marks where telemetry replaced the modeled MFU (one of the two pools).
    assert "MFU from GPU telemetry in 1 of 2 pools" in summary
    assert "MFU from GPU telemetry</span>" in html  # the pool scope: its only pool
    fleet = client.get("/").content.decode()
    assert "MFU from GPU telemetry in 1 of 2 pools" in fleet
    assert "<strong>GPU telemetry, pool train:</strong> MFU: DCGM telemetry covers 100%" in fleet

"""Kubernetes allocation (telemetry/kubernetes/) read from a real Prometheus whose TSDB
promtool built from a kube-state-metrics history (tests/support/kube_state_metrics.py).

The expected card-hours are each pod's requested GPUs × the hours it was Running, written out
by hand below from the pods' own timelines (2026-03-02, hours from 00:00 UTC):

    pod        namespace  node     request                   Running       card-hours  pool
    train-0    ml-train   gpu-h01  3 + 1 nvidia.com/gpu      01-05         4 × 4 = 16  train
    serve-0    serving    gpu-l01  2 nvidia.com/gpu          02-10         2 × 8 = 16  serve
    mig-0      serving    gpu-h01  3 × mig-1g.10gb (1/7)     03-10         3/7 × 7 = 3 train
    pending-0  ml-train   gpu-h01  8 nvidia.com/gpu          (Pending)     0
    evict-0    ml-train   gpu-h01  2 nvidia.com/gpu          01-03, then   2 × 2 = 4   train
                                                             Failed/Evicted
    move-0     ml-train   gpu-m01  8 nvidia.com/gpu          04-10         8 × 2 = 16  train
                          (label nodepool=train until 06, serve after)   8 × 4 = 32  serve
    amd-0      other      gpu-x01  1 amd.com/gpu             01-03         1 × 2 = 2   (none)
    cpu-0      ml-train   gpu-h01  4 cpu only                01-10         0

Teams: ml-* → research (namespace rule); label team=search → search-team (label rule);
serving without a label and other are mapped by no rule: the namespace is the team, listed.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

from tests.support import kube_state_metrics as ksm
from tests.support.prometheus import PROMETHEUS, PROMTOOL, PrometheusServer

PODS = [
    ksm.Pod("ml-train", "train-0", "gpu-h01",
            {"main": {"nvidia_com_gpu": 3, "cpu": 8}, "sidecar": {"nvidia_com_gpu": 1}},
            [("Pending", 0.5, 1), ("Running", 1, 5), ("Succeeded", 5, 5.5)]),
    ksm.Pod("serving", "serve-0", "gpu-l01", {"server": {"nvidia_com_gpu": 2}},
            [("Running", 2, 10)], labels={"team": "search"}),
    ksm.Pod("serving", "mig-0", "gpu-h01", {"server": {"nvidia_com_mig_1g_10gb": 3}},
            [("Running", 3, 10)]),
    ksm.Pod("ml-train", "pending-0", "gpu-h01", {"main": {"nvidia_com_gpu": 8}},
            [("Pending", 1, 12)]),
    ksm.Pod("ml-train", "evict-0", "gpu-h01", {"main": {"nvidia_com_gpu": 2}},
            [("Running", 1, 3), ("Failed", 3, 8)], reason="Evicted"),
    ksm.Pod("ml-train", "move-0", "gpu-m01", {"main": {"nvidia_com_gpu": 8}},
            [("Running", 4, 10)]),
    ksm.Pod("other", "amd-0", "gpu-x01", {"main": {"amd_com_gpu": 1}}, [("Running", 1, 3)]),
    ksm.Pod("ml-train", "cpu-0", "gpu-h01", {"main": {"cpu": 4}}, [("Running", 1, 10)]),
]  # fmt: skip
NODE_LABELS = [
    ksm.NodeLabel("gpu-m01", "train", 0, 6),
    ksm.NodeLabel("gpu-m01", "serve", 6, 12),
    ksm.NodeLabel("gpu-h01", "train", 0, 12),
]
EXPECTED_POOL = {"train": 16 + 3 + 4 + 16, "serve": 16 + 32, "unmapped": 2}
EXPECTED_TEAM = {"research": 16 + 4 + 16 + 32, "search-team": 16, "serving": 3, "other": 2}
EXPECTED_CARD = {"H100 SXM5 80GB": 39 + 32, "L40S": 16, "unmapped": 2}


@pytest.fixture(scope="module")
def ksm_prometheus(tmp_path_factory):
    if PROMTOOL is None or PROMETHEUS is None:
        pytest.skip("Debian's prometheus package is not installed")
    folder: Path = tmp_path_factory.mktemp("ksm")
    text = folder / "ksm.om"
    text.write_text(ksm.openmetrics(PODS, NODE_LABELS))
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(text), str(folder / "tsdb")],
        check=True, capture_output=True,
    )  # fmt: skip
    server = PrometheusServer(folder / "tsdb", folder)
    yield server
    server.stop()


@pytest.fixture
def k8s_cluster(db):
    """Cluster k1: pool train (H100 node group h100), pool serve (L40S, and H100 for nodes
    labelled serve); no Slurm usage."""
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(
        name="K DC", cooling_type="air", pue=1.25, tariff_per_kwh=0.20,
        grid_carbon_g_per_kwh=400.0, currency="USD",
    )  # fmt: skip
    cluster = Cluster.objects.create(
        site=site, name="k1", commissioned_on=dt.date(2026, 1, 1),
        capital_cost_per_card=30_000.0, amortization_years=5.0,
    )  # fmt: skip
    train = Pool.objects.create(cluster=cluster, name="train", planned_utilization=0.7)
    serve = Pool.objects.create(cluster=cluster, name="serve", planned_utilization=0.5)
    card = AcceleratorModel.objects.get
    h100 = card(name="H100 SXM5 80GB")
    groups = {
        "h100": NodeGroup.objects.create(
            pool=train, name="h100", accelerator=h100, node_count=2, cards_per_node=8
        ),
        "h100-serve": NodeGroup.objects.create(
            pool=serve, name="h100-serve", accelerator=h100, node_count=1, cards_per_node=8
        ),
        "l40s": NodeGroup.objects.create(
            pool=serve, name="l40s", accelerator=card(name="L40S"), node_count=1,
            cards_per_node=2,
        ),
    }  # fmt: skip
    return cluster, groups


def _source(cluster, groups, url):
    from telemetry.kubernetes.models import (
        KubernetesNodeRule,
        KubernetesSource,
        KubernetesTeamRule,
    )

    source = KubernetesSource.objects.create(
        cluster=cluster, url=url, node_label="label_nodepool", team_label="label_team",
        scrape_interval_s=60, step_s=300, overlap_s=3600,
        cursor=ksm.START + dt.timedelta(hours=2),
    )  # fmt: skip
    rule = KubernetesNodeRule.objects.create
    rule(source=source, match="name", pattern="gpu-h*", node_group=groups["h100"], priority=1)
    rule(source=source, match="name", pattern="gpu-l*", node_group=groups["l40s"], priority=1)
    rule(source=source, match="label", pattern="train", node_group=groups["h100"], priority=5)
    rule(source=source, match="label", pattern="serve", node_group=groups["h100-serve"])
    team = KubernetesTeamRule.objects.create
    team(source=source, match="label", pattern="search", team="search-team", priority=1)
    team(source=source, match="namespace", pattern="ml-*", team="research", priority=2)
    return source


def _fetch(source, now: dt.datetime | None = None) -> dict:
    from accounting.live_source_runs import queue_run
    from telemetry.kubernetes import services

    assert queue_run(source)
    source.refresh_from_db()
    return services.run_fetch(source.pk, str(source.run_id), now)


def _sums(records, field_name: str, names: dict) -> dict[str, float]:
    sums: dict[str, float] = {}
    for key, card_hours in records.values_list(field_name, "card_hours"):
        name = names.get(key, "unmapped") if names else key
        sums[name] = sums.get(name, 0.0) + card_hours
    return sums


def test_card_hours_per_pool_team_and_card_are_requested_gpus_times_running_hours(
    ksm_prometheus, k8s_cluster
):
    from accounting.models import UsageDailyRollup, UsageRecord
    from accounting.rollups import refresh_cluster
    from inventory.models import AcceleratorModel, Pool

    cluster, groups = k8s_cluster
    source = _source(cluster, groups, ksm_prometheus.url)
    outcome = _fetch(source)
    assert "failed" not in outcome, outcome
    records = UsageRecord.objects.filter(cluster=cluster)
    pools = dict(Pool.objects.values_list("pk", "name"))
    cards = dict(AcceleratorModel.objects.values_list("pk", "name"))
    assert _sums(records, "pool_id", pools) == pytest.approx(EXPECTED_POOL)
    assert _sums(records, "account", {}) == pytest.approx(EXPECTED_TEAM)
    assert _sums(records, "accelerator_id", cards) == pytest.approx(EXPECTED_CARD)
    # MIG: 3 slices of 1g are 3/7 of a card for 7 hours.
    mig = records.get(job_label="mig-0")
    assert (mig.cards, mig.mig_profile, mig.card_hours) == pytest.approx((3 / 7, "1g.10gb", 3.0))
    # Pending, evicted-after-failure and CPU-only pods add nothing beyond their Running time.
    assert not records.filter(job_label__in=["pending-0", "cpu-0"]).exists()
    assert records.get(job_label="evict-0").card_hours == pytest.approx(4.0)
    # The node that moved pools: one segment in each, each for its own time.
    moved = {
        (pools[r.pool_id], r.start.hour, r.end.hour, r.card_hours)
        for r in records.filter(job_label="move-0")
    }
    assert moved == {("train", 4, 6, 16.0), ("serve", 6, 10, 32.0)}
    assert {r.scheduler_state for r in records} == {"Running (Kubernetes)"}
    source.refresh_from_db()
    assert (source.status, source.consecutive_failures) == ("succeeded", 0)
    assert source.unmapped_nodes == ["gpu-x01"]
    assert source.unmapped_namespaces == ["other", "serving"]
    assert source.card_hours == pytest.approx(sum(EXPECTED_POOL.values()))
    mapped = {(m["pool"], m["team"], m["card_model"]): m["card_hours"] for m in source.mapped}
    assert mapped[("serve", "research", "H100 SXM5 80GB")] == pytest.approx(32)
    assert mapped[("unmapped", "other", "unmapped")] == pytest.approx(2)
    # The same rows feed accounting's daily rollups (utilization, chargeback, Costs).
    refresh_cluster(cluster.pk, tz="UTC")
    rolled = _sums(
        UsageDailyRollup.objects.filter(cluster=cluster).annotate(card_hours=_allocated()),
        "pool_id", pools,
    )  # fmt: skip
    assert rolled == pytest.approx(EXPECTED_POOL)


def _allocated():
    from django.db.models import F

    return F("allocated_card_hours")


def test_a_second_fetch_of_the_same_window_writes_the_same_rows(ksm_prometheus, k8s_cluster):
    from accounting.models import UsageRecord
    from telemetry.kubernetes.models import KubernetesSource

    cluster, groups = k8s_cluster
    source = _source(cluster, groups, ksm_prometheus.url)
    _fetch(source)
    first = sorted(
        UsageRecord.objects.filter(cluster=cluster).values_list("record_key", "card_hours")
    )
    KubernetesSource.objects.filter(pk=source.pk).update(cursor=ksm.START + dt.timedelta(hours=3))
    source.refresh_from_db()
    _fetch(source)
    again = sorted(
        UsageRecord.objects.filter(cluster=cluster).values_list("record_key", "card_hours")
    )
    assert again == first and len(first) == 7


def test_a_pod_running_at_a_fetch_s_end_is_open_and_the_next_fetch_extends_the_same_record(
    ksm_prometheus, k8s_cluster
):
    from accounting.models import UsageRecord
    from telemetry.kubernetes.models import KubernetesSource

    cluster, groups = k8s_cluster
    source = _source(cluster, groups, ksm_prometheus.url)
    first_now = ksm.START + dt.timedelta(hours=7, minutes=2)  # window (00:00, 07:00]
    _fetch(source, first_now)
    serve = UsageRecord.objects.get(cluster=cluster, job_label="serve-0")
    # Running 02:00 to the window's end: open, 2 cards × 5 h so far.
    assert (serve.state, serve.end, serve.card_hours) == ("running", None, pytest.approx(10.0))
    source.refresh_from_db()
    assert source.cursor == ksm.START + dt.timedelta(hours=7)
    assert source.window_start == ksm.START
    _fetch(source, ksm.START + dt.timedelta(hours=12))  # re-reads from 00:00 (the overlap)
    again = UsageRecord.objects.get(cluster=cluster, job_label="serve-0")
    assert again.record_key == serve.record_key and again.state == "completed"
    assert again.card_hours == pytest.approx(16.0)
    assert again.end == ksm.START + dt.timedelta(hours=10)
    records = UsageRecord.objects.filter(cluster=cluster)
    assert sum(r.card_hours for r in records) == pytest.approx(sum(EXPECTED_POOL.values()))
    assert KubernetesSource.objects.get(pk=source.pk).consecutive_failures == 0


def test_a_cluster_takes_allocation_from_one_source_kind(ksm_prometheus, k8s_cluster):
    """Slurm usage into a Kubernetes cluster fails and stores nothing; a Kubernetes fetch into a
    cluster holding Slurm usage fails, says why, and writes nothing."""
    import io

    from accounting import services as accounting
    from accounting.models import ImportJob, UsageRecord
    from telemetry.kubernetes.models import KubernetesSource
    from tests.support import dcgm

    cluster, groups = k8s_cluster
    source = _source(cluster, groups, ksm_prometheus.url)
    _fetch(source)
    before = UsageRecord.objects.filter(cluster=cluster).count()
    text = dcgm.sacct_text().replace("|c1|", "|k1|")
    # An upload is refused at once (test_pages.py); a job queued before the source still fails.
    job = ImportJob.objects.create(kind="sacct", cluster=cluster, source_name="j")
    with pytest.raises(Exception, match="takes its GPU allocation from Kubernetes"):
        accounting.import_file(job, io.BytesIO(text.encode()))
    assert UsageRecord.objects.filter(cluster=cluster).count() == before
    assert not UsageRecord.objects.filter(cluster=cluster, partition="train").exists()
    # The other way: Slurm records already there (the source was added behind the rule's back).
    KubernetesSource.objects.filter(pk=source.pk).delete()
    UsageRecord.objects.filter(cluster=cluster).delete()
    accounting.import_file(job, io.BytesIO(text.encode()))
    slurm_hours = sorted(UsageRecord.objects.filter(cluster=cluster).values_list("card_hours"))
    source = _source(cluster, groups, ksm_prometheus.url)
    outcome = _fetch(source)
    assert "Slurm usage imports" in outcome["failed"]
    source.refresh_from_db()
    assert source.status == "failed" and "one source kind" in source.last_error
    assert sorted(UsageRecord.objects.filter(cluster=cluster).values_list("card_hours")) == (
        slurm_hours
    )


def test_an_unreachable_prometheus_fails_says_why_backs_off_and_keeps_the_records(
    ksm_prometheus, k8s_cluster
):
    from accounting.live_source_runs import queue_due
    from accounting.models import UsageRecord
    from telemetry.kubernetes.models import KubernetesSource
    from tests.support.net import free_port

    cluster, groups = k8s_cluster
    source = _source(cluster, groups, ksm_prometheus.url)
    _fetch(source)
    kept = UsageRecord.objects.filter(cluster=cluster).count()
    gone = f"http://127.0.0.1:{free_port()}"
    KubernetesSource.objects.filter(pk=source.pk).update(url=gone, interval_s=600)
    for failures, wait_s in ((1, 600), (2, 1200)):
        source.refresh_from_db()
        outcome = _fetch(source)
        assert "unreachable" in outcome["failed"] or "connect" in outcome["failed"], outcome
        source.refresh_from_db()
        assert (source.status, source.consecutive_failures) == ("failed", failures)
        assert (source.next_attempt_at - source.last_failure_at).total_seconds() == wait_s
        assert queue_due(KubernetesSource, source.last_failure_at) == 0  # backing off
    assert source.last_success_at is not None and source.cursor is not None
    assert UsageRecord.objects.filter(cluster=cluster).count() == kept


def test_the_beat_entry_queues_due_fetches_every_minute(settings):
    from config.celery_app import app

    entry = settings.CELERY_BEAT_SCHEDULE["kubernetes-fetches"]
    assert (entry["task"], entry["schedule"]) == ("telemetry.fetch_due_kubernetes", 60.0)
    assert settings.TASK_KINDS["telemetry.fetch_kubernetes"] == "import"
    app.loader.import_default_modules()
    assert {"telemetry.fetch_due_kubernetes", "telemetry.fetch_kubernetes"} <= set(app.tasks)


def test_the_pools_show_measured_utilization_chargeback_and_costs(
    ksm_prometheus, k8s_cluster, client_for, viewer
):
    """Accounting reads the records as it reads Slurm's. The unmapped node's 2 card-hours have
    no pool in their record; accounting's reports place a record without a pool in the
    cluster's largest pool holding its card, else the largest (train: 16 cards against 10),
    as they do a Slurm record of an unmapped partition (assign_accounting_pools)."""
    cluster, groups = k8s_cluster
    _fetch(_source(cluster, groups, ksm_prometheus.url))
    client = client_for(viewer)
    period = {"start": "2026-03-02", "end": "2026-03-03", "cluster": "k1"}
    body = client.get("/api/v1/accounting/utilization/", {**period, "group_by": "pool"}).json()
    rows = {row["pool"]: row for row in body["rows"]}
    # train: 2 nodes × 8 cards × 24 h = 384 available; serve: (8 + 2) × 24 = 240.
    assert rows["train"]["allocated_card_hours"] == pytest.approx(EXPECTED_POOL["train"] + 2)
    assert rows["train"]["utilization"] == pytest.approx(41 / 384)
    assert rows["serve"]["allocated_card_hours"] == pytest.approx(EXPECTED_POOL["serve"])
    assert rows["serve"]["utilization"] == pytest.approx(48 / 240)
    assert {row["provenance"] for row in body["rows"]} == {"measured"}
    charge = client.get("/api/v1/accounting/chargeback/", period).json()
    used = {row["team"]: row["used_card_hours"] for row in charge["rows"]}
    assert used == pytest.approx(EXPECTED_TEAM)
    charged = sum(row["chargeback_cost"] for row in charge["rows"])
    assert charged == pytest.approx(charge["totals"][0]["total_cost"])
    costs = client.get("/api/v1/accounting/costs/", {**period, "group_by": "pool"}).json()
    for row in costs["rows"]:
        assert row["factor_provenance"]["utilization"] == "measured"
        assert row["lost_cost_by_factor"]["utilization"] > 0

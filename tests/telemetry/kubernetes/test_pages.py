"""A Kubernetes inference pool on the pages: its analysis, Usage and Costs read what a fetch
from a real Prometheus (a promtool TSDB of kube-state-metrics series) wrote, and a Slurm upload
into its cluster is a 400 at once.

Cluster kinf, pool serve (purpose inference): one node gpu-s01 of 4 L40S, rented at
4.00 USD per card-hour, energy at tariff 0 (so money is rent only). On 2026-03-02 (UTC):

    pod        namespace  request             Running   card-hours  team
    search-0   search     2 nvidia.com/gpu    00-12     2 × 12 = 24 search-team (namespace rule)
    chat-0     chat       1 nvidia.com/gpu    02-08     1 × 6 = 6   chat (no rule: itself)
    wait-0     chat       1 nvidia.com/gpu    (Pending) 0

Period 2026-03-02 to 2026-03-03: available = 4 cards × 24 h = 96 card-hours; allocated 30;
utilization 30 / 96 = 0.3125. Money (docs/efficiency-model.md, engine/cost.py): total =
4.00 × 96 = 384; used cost = 4.00 × used card-hours (search-team 96, chat 24); idle
384 − 120 = 264 shared in proportion to use (proportional rule): search-team 264 × 24/30 =
211.2, chat 52.8; charged 307.2 and 76.8, summing to 384.
"""

from __future__ import annotations

import datetime as dt
import math
import subprocess
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.support import kube_state_metrics as ksm
from tests.support.prometheus import PROMETHEUS, PROMTOOL, PrometheusServer

PODS = [
    ksm.Pod("search", "search-0", "gpu-s01", {"server": {"nvidia_com_gpu": 2}},
            [("Running", 0, 12)]),
    ksm.Pod("chat", "chat-0", "gpu-s01", {"server": {"nvidia_com_gpu": 1}},
            [("Pending", 1, 2), ("Running", 2, 8)]),
    ksm.Pod("chat", "wait-0", "gpu-s01", {"server": {"nvidia_com_gpu": 1}},
            [("Pending", 1, 12)]),
]  # fmt: skip
RENT_PER_CARD_HOUR = 4.0
CARDS = 4
AVAILABLE_CARD_HOURS = CARDS * 24.0
USED = {"search-team": 2 * 12.0, "chat": 1 * 6.0}
ALLOCATED = sum(USED.values())
UTILIZATION = ALLOCATED / AVAILABLE_CARD_HOURS
TOTAL_COST = RENT_PER_CARD_HOUR * AVAILABLE_CARD_HOURS
IDLE_COST = TOTAL_COST - RENT_PER_CARD_HOUR * ALLOCATED
CHARGED = {
    team: RENT_PER_CARD_HOUR * hours + IDLE_COST * hours / ALLOCATED for team, hours in USED.items()
}
PERIOD_START = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
PERIOD_END = dt.datetime(2026, 3, 3, tzinfo=dt.UTC)
PERIOD = {"start": "2026-03-02", "end": "2026-03-03", "cluster": "kinf"}


@pytest.fixture(scope="module")
def serving_prometheus(tmp_path_factory):
    if PROMTOOL is None or PROMETHEUS is None:
        pytest.skip("Debian's prometheus package is not installed")
    folder: Path = tmp_path_factory.mktemp("ksm-serving")
    text = folder / "ksm.om"
    text.write_text(ksm.openmetrics(PODS, []))
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(text), str(folder / "tsdb")],
        check=True, capture_output=True,
    )  # fmt: skip
    server = PrometheusServer(folder / "tsdb", folder)
    yield server
    server.stop()


@pytest.fixture
def inference_cluster(db):
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(
        name="Serving DC", cooling_type="air", pue=1.25, tariff_per_kwh=0.0,
        grid_carbon_g_per_kwh=400.0, currency="USD",
    )  # fmt: skip
    cluster = Cluster.objects.create(
        site=site, name="kinf", commissioned_on=dt.date(2026, 1, 1),
        rental_price_per_card_hour=RENT_PER_CARD_HOUR,
    )  # fmt: skip
    pool = Pool.objects.create(
        cluster=cluster, name="serve", purpose="inference", planned_utilization=0.6
    )
    group = NodeGroup.objects.create(
        pool=pool, name="l40s", accelerator=AcceleratorModel.objects.get(name="L40S"),
        node_count=1, cards_per_node=CARDS,
    )  # fmt: skip
    return cluster, pool, group


def _source(cluster, group, url: str):
    from telemetry.kubernetes.models import (
        KubernetesNodeRule,
        KubernetesSource,
        KubernetesTeamRule,
    )

    source = KubernetesSource.objects.create(
        cluster=cluster, url=url, scrape_interval_s=60, step_s=300, overlap_s=3600,
        cursor=ksm.START + dt.timedelta(hours=2),
    )  # fmt: skip
    KubernetesNodeRule.objects.create(
        source=source, match="name", pattern="gpu-s*", node_group=group
    )
    KubernetesTeamRule.objects.create(
        source=source, match="namespace", pattern="search", team="search-team"
    )
    return source


def _fetched(cluster, group, url: str) -> None:
    from django.conf import settings

    from accounting.live_source_runs import queue_run
    from accounting.rollups import refresh_cluster
    from telemetry.kubernetes import services

    source = _source(cluster, group, url)
    assert queue_run(source)
    source.refresh_from_db()
    outcome = services.run_fetch(source.pk, str(source.run_id), PERIOD_END)
    assert "failed" not in outcome, outcome
    refresh_cluster(cluster.pk, tz=settings.TIME_ZONE)  # the pages read the daily rollups


def test_the_inference_pool_s_analysis_measures_utilization_from_kubernetes(
    serving_prometheus, inference_cluster, client_for, viewer, django_capture_on_commit_callbacks
):
    from planner import services
    from tests.support.inline import run_analysis_inline

    cluster, pool, group = inference_cluster
    _fetched(cluster, group, serving_prometheus.url)
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(
            scope="cluster", object_id=cluster.pk, period_start=PERIOD_START, period_end=PERIOD_END
        )
    analysis = run_analysis_inline(analysis)
    row = next(row for row in analysis.results["pools"] if row["pool_id"] == pool.pk)
    assert row["factor_definitions"] == "serving"  # an inference pool, serving definitions
    assert row["utilization_provenance"] == "measured"
    assert row["utilization_basis"] == "measured_share"  # from the usage records
    assert row["utilization"] == pytest.approx(UTILIZATION)
    assert row["utilization_reason"].startswith("measured (Kubernetes) over the covered days")
    # Money lost to utilization: the −ln split of (1 − product) over the row's own factors.
    factors = [row[name] for name in ("mfu", "scaling", "effective_time", "utilization", "energy")]
    product = math.prod(factors)
    share = (1 - product) * math.log(UTILIZATION) / math.log(product)
    assert row["lost_utilization_money"] == pytest.approx(share * TOTAL_COST, rel=1e-6)
    page = client_for(viewer).get(f"/analyses/{analysis.pk}/", {"scope": f"pool-{pool.pk}"})
    assert page.status_code == 200
    assert "Utilization: measured (Kubernetes) over the covered days" in page.content.decode()


def test_usage_and_costs_show_the_pool_s_chargeback_per_team_and_money_lost(
    serving_prometheus, inference_cluster, client_for, viewer
):
    cluster, pool, group = inference_cluster
    _fetched(cluster, group, serving_prometheus.url)
    client = client_for(viewer)
    usage = client.get("/api/v1/accounting/utilization/", {**PERIOD, "group_by": "pool"}).json()
    (serve,) = usage["rows"]
    assert serve["pool"] == "serve" and serve["provenance"] == "measured"
    assert serve["allocated_card_hours"] == pytest.approx(ALLOCATED)
    assert serve["utilization"] == pytest.approx(UTILIZATION)
    assert [row["provenance"] for row in usage["coverage"]] == ["measured (Kubernetes)"]
    page = client.get("/usage/", {**PERIOD, "cluster": cluster.pk})
    assert page.status_code == 200, page.context["form"].errors
    (breakdown,) = page.context["breakdown"]
    assert breakdown["allocated_card_hours"] == pytest.approx(ALLOCATED)
    # Costs: the chargeback table per team, and the money utilization lost.
    query = {**PERIOD, "cluster": cluster.pk, "idle_rule": "proportional"}
    costs_page = client.get("/costs/", query)
    assert costs_page.status_code == 200, costs_page.context["form"].errors
    charged = {row["team"]: row for row in costs_page.context["chargeback_rows"]}
    assert set(charged) == set(USED)
    for team, hours in USED.items():
        assert charged[team]["used_card_hours"] == pytest.approx(hours)
        assert charged[team]["used_cost"] == pytest.approx(RENT_PER_CARD_HOUR * hours)
        assert charged[team]["chargeback_cost"] == pytest.approx(CHARGED[team])
    html = costs_page.content.decode()
    for team, money in CHARGED.items():  # the rendered table, in whole units
        start = html.index(f'<th scope="row">{team}</th>')
        assert f'<td class="num">{money:.0f}</td>' in html[start : html.index("</tr>", start)]
    costs = client.get("/api/v1/accounting/costs/", {**PERIOD, "group_by": "pool"}).json()
    (row,) = costs["rows"]
    assert row["total_cost"] == pytest.approx(TOTAL_COST)
    assert row["factor_provenance"]["utilization"] == "measured"
    assert row["factors"]["utilization"] == pytest.approx(UTILIZATION)
    product = math.prod(row["factors"].values())
    expected = TOTAL_COST * (1 - product) * math.log(UTILIZATION) / math.log(product)
    assert row["lost_cost_by_factor"]["utilization"] == pytest.approx(expected, rel=1e-6)


SACCT = (
    "JobID|JobName|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|AllocTRES|NodeList\n"
    "10|train|ana|research|gpu|COMPLETED|2026-03-02T00:00:00|2026-03-02T00:00:00|"
    "2026-03-02T02:00:00|7200|billing=8,cpu=8,gres/gpu=1,node=1|gpu-s01\n"
)


def test_a_slurm_upload_into_a_kubernetes_cluster_is_a_400_naming_cluster_and_rule(
    inference_cluster, client_for, planner
):
    from accounting.models import ImportJob
    from telemetry.kubernetes.models import KubernetesSource

    cluster, _pool, _group = inference_cluster
    KubernetesSource.objects.create(cluster=cluster, url="http://127.0.0.1:9090")
    client = client_for(planner)
    upload = SimpleUploadedFile("sacct.txt", SACCT.encode(), content_type="text/plain")
    body = {"cluster": cluster.pk, "kind": "sacct", "timezone": "UTC", "file": upload}
    answer = client.post("/api/v1/usage-records/import/", body, format="multipart")
    assert answer.status_code == 400, answer.content
    reason = answer.json()["cluster"]
    assert reason.startswith("Cluster kinf takes its GPU allocation from Kubernetes")
    assert "one source kind" in reason
    form = {"cluster": cluster.pk, "kind": "sacct", "timezone": "UTC", "pasted_text": SACCT}
    page = client.post("/usage/import/", form, format="multipart")
    assert page.status_code == 400
    assert list(page.context["form"].errors) == ["cluster"], page.context["form"].errors
    assert "Cluster kinf takes its GPU allocation from Kubernetes" in page.content.decode()
    assert not ImportJob.objects.filter(cluster=cluster).exists()


def test_admins_find_the_kubernetes_sources_from_the_usage_imports_page(
    db, client_for, planner, fleet_admin
):
    link = 'href="/usage/kubernetes-sources/"'
    assert link in client_for(fleet_admin).get("/usage/imports/").content.decode()
    assert link not in client_for(planner).get("/usage/imports/").content.decode()


def test_a_live_slurm_source_on_a_kubernetes_cluster_is_a_400_naming_the_rule(
    inference_cluster, client_for, fleet_admin, settings
):
    from accounting.slurmrestd_source import SlurmrestdSource
    from telemetry.kubernetes.models import KubernetesSource

    settings.FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = True
    cluster, _pool, _group = inference_cluster
    KubernetesSource.objects.create(cluster=cluster, url="http://127.0.0.1:9090")
    body = {"cluster": cluster.pk, "url": "http://127.0.0.1:6820", "user_name": "root"}
    answer = client_for(fleet_admin).post("/api/v1/slurmrestd-sources/", body, format="json")
    assert answer.status_code == 400, answer.content
    assert "one source kind" in " ".join(answer.json()["cluster"])
    assert not SlurmrestdSource.objects.exists()

"""GET /api/v1/telemetry/…: login, roles, team scoping, hand-computed rollups, chargeback by
activity, CSV export, and the bounds of a fetch request. Data: the scenario of
tests/support/dcgm.py fetched from the real Prometheus."""

from __future__ import annotations

import pytest

from tests.support import dcgm
from tests.support.builders import make_user
from tests.support.dcgm import fetch_from
from tests.support.prometheus import needs_prometheus

pytestmark = [needs_prometheus, pytest.mark.django_db]
PERIOD = {"start": "2026-03-02", "end": "2026-03-03"}


@pytest.fixture
def fetched(gpu_cluster, prometheus):
    fetch, _ = fetch_from(gpu_cluster, prometheus.url)
    assert fetch.status == "succeeded", fetch.error
    return gpu_cluster


def test_telemetry_endpoints_need_login(client_for, fetched):
    anonymous = client_for(None)
    for url in ("gpus/", "teams/", "wasted-allocation/", "fetches/", "sources/"):
        assert anonymous.get(f"/api/v1/telemetry/{url}").status_code in (401, 403), url


def test_pool_rollup_gives_the_mfu_proxy_and_measured_energy(client_for, viewer, fetched):
    response = client_for(viewer).get("/api/v1/telemetry/gpus/", {**PERIOD, "group_by": "pool"})
    assert response.status_code == 200, response.content
    rows = {row["pool"]: row for row in response.json()}
    train, serve = rows["train"], rows["serve"]
    assert (train["gpus"], serve["gpus"]) == (6, 2)
    # Per GPU-day tensor × clock share: H100 day 1 0.25 × 0.9 (4 GPU-days with day 2 at 0),
    # A100 day 1 0.15 × 0.8: (2 × 0.225 × 2 + 2 × 0.12) / 12 GPU-days = 0.095.
    assert train["mfu_proxy"] == pytest.approx(0.095)
    assert serve["mfu_proxy"] == pytest.approx(0.1 * 0.5 / 2)
    assert train["energy_kwh"] == pytest.approx(4 * (7.2 + 2.4) + 2 * (6.0 + 2.4), rel=1e-3)
    assert train["provenance"] == "telemetry"
    assert train["sm_active"] is None and "sm_active" in train["reasons"]


def test_teams_and_wasted_allocation_are_scoped_to_the_users_teams(client_for, fetched):
    nlp_viewer = make_user("nlp-viewer", "viewer", all_teams=False)
    nlp_viewer.team_memberships.create(team="nlp")
    client = client_for(nlp_viewer)
    teams = client.get("/api/v1/telemetry/teams/", PERIOD).json()
    assert [row["account"] for row in teams] == ["nlp"]
    assert teams[0]["allocated_card_hours"] == pytest.approx(72.0)
    assert teams[0]["idle_card_hours"] == pytest.approx(48.0)
    assert teams[0]["activity"] == pytest.approx(14.4 / 72.0)
    wasted = client.get("/api/v1/telemetry/wasted-allocation/", PERIOD).json()
    assert [(row["job_id"], row["idle_card_hours"]) for row in wasted] == [("102", 48.0)]
    nobody = make_user("no-team", "viewer", all_teams=False)
    assert client_for(nobody).get("/api/v1/telemetry/teams/", PERIOD).json() == []


def test_wasted_allocation_exports_csv(client_for, viewer, fetched):
    response = client_for(viewer).get(
        "/api/v1/telemetry/wasted-allocation/", {**PERIOD, "format": "csv"}
    )
    assert response.status_code == 200
    text = b"".join(response.streaming_content if response.streaming else [response.content])
    lines = text.decode().splitlines()
    assert "idle_card_hours" in lines[0] and lines[1].split(",")[lines[0].split(",").index(
        "job_id")] == "102"  # fmt: skip


def test_chargeback_by_activity_weights_allocated_card_hours(client_for, viewer, fetched):
    query = {"start": "2026-03-02", "end": "2026-03-04", "granularity": "day"}
    client = client_for(viewer)
    by_allocation = client.get("/api/v1/accounting/chargeback/rows/", query).json()
    by_activity = client.get("/api/v1/telemetry/chargeback/rows/", query).json()
    used = {(r["team"], r["bucket_start"][:10]): r["used_card_hours"] for r in by_activity}
    # Allocated card-hours × measured engine activity (see tests/support/dcgm.py):
    # day 1 vision 48 × 0.8; nlp (24 idle + 24 at 0.6); day 2 nlp 24 × 0, vision 48 × 0.4.
    assert used[("vision", "2026-03-02")] == pytest.approx(38.4)
    assert used[("nlp", "2026-03-02")] == pytest.approx(14.4)
    assert used[("nlp", "2026-03-03")] == pytest.approx(0.0)
    assert used[("vision", "2026-03-03")] == pytest.approx(19.2)

    def totals(rows):
        out = {}
        for row in rows:
            out[row["bucket_start"]] = out.get(row["bucket_start"], 0.0) + row["chargeback_cost"]
        return out

    # Both rules bill the whole cost of each day; the idle job's team pays less by activity.
    assert totals(by_activity) == pytest.approx(totals(by_allocation))
    nlp = [r for r in by_activity if r["team"] == "nlp"]
    nlp_allocation = [r for r in by_allocation if r["team"] == "nlp"]
    assert sum(r["used_cost"] for r in nlp) < sum(r["used_cost"] for r in nlp_allocation)


def test_fetch_requests_are_bounded_and_need_a_source(client_for, planner, gpu_cluster):
    client = client_for(planner)
    too_long = client.post(
        "/api/v1/telemetry/fetches/",
        {"cluster": gpu_cluster.pk, "start": "2026-01-01", "end": "2026-12-31"},
        format="json",
    )
    assert too_long.status_code == 400 and "end" in too_long.json()
    no_source = client.post(
        "/api/v1/telemetry/fetches/",
        {"cluster": gpu_cluster.pk, "start": "2026-03-02", "end": "2026-03-03"},
        format="json",
    )
    assert no_source.status_code == 400 and "cluster" in no_source.json()


def test_sources_are_for_admins_and_never_show_the_token(client_for, viewer, fleet_admin,
                                                         gpu_cluster):  # fmt: skip
    assert client_for(viewer).get("/api/v1/telemetry/sources/").status_code == 403
    admin = client_for(fleet_admin)
    created = admin.post(
        "/api/v1/telemetry/sources/",
        {"cluster": gpu_cluster.pk, "url": "http://127.0.0.1:9090", "token": "tok", "step_s": 60},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["has_token"] is True and "token" not in created.json()
    bad = admin.post(
        "/api/v1/telemetry/sources/",
        {"cluster": gpu_cluster.pk, "url": "http://127.0.0.1:9091", "step_s": 1,
         "label_selector": 'x="a"}) or vector(1'},
        format="json",
    )  # fmt: skip
    assert bad.status_code == 400
    assert {"step_s", "label_selector"} <= set(bad.json())
    assert dcgm.DAY1.isoformat() == PERIOD["start"]


def test_measured_factors_per_pool_for_the_analysis_inputs(fetched):
    from inventory.models import Pool
    from telemetry.models import PrometheusSource
    from telemetry.selectors import measured_factors

    pools = dict(Pool.objects.filter(cluster=fetched).values_list("name", "pk"))
    PrometheusSource.objects.filter(cluster=fetched).update(node_overhead=0.5)
    factors = measured_factors(pools.values(), dcgm.DAY1, dcgm.DAY2)
    train = factors[pools["train"]]
    assert train["mfu"] == pytest.approx(0.095) and train["provenance"] == "telemetry"
    gpu_kwh = 4 * (7.2 + 2.4) + 2 * (6.0 + 2.4)
    assert train["gpu_energy_kwh"] == pytest.approx(gpu_kwh, rel=1e-3)
    assert train["it_energy_kwh"] == pytest.approx(gpu_kwh * 1.5, rel=1e-3)


def test_an_analysis_of_the_fetched_period_takes_mfu_and_energy_from_telemetry(fetched):
    import datetime as dt

    from planner import analysis as engine_bridge
    from planner.models import Analysis
    from telemetry.models import PrometheusSource

    PrometheusSource.objects.filter(cluster=fetched).update(node_overhead=0.5)
    analysis = Analysis.objects.create(
        scope="cluster", object_id=fetched.pk,
        period_start=dt.datetime(2026, 3, 2, tzinfo=dt.UTC),
        period_end=dt.datetime(2026, 3, 4, tzinfo=dt.UTC),
    )  # fmt: skip
    rows, _ = engine_bridge.evaluate_cluster(analysis, fetched.pk)
    train = {row["pool"]: row for row in rows}["train"]
    # Over the jobs' card-hours: (101: 48 × 0.5 + 102: 48 × 0 + 103: 24 × 0.3) ÷ 120 = 0.26,
    # × the clock share weighted by tensor work: (1.0 × 0.9 + 0.3 × 0.8) ÷ 1.3.
    assert train["mfu"] == pytest.approx(0.26 * 1.14 / 1.3, rel=1e-2)
    assert (train["mfu_basis"], train["mfu_provenance"]) == ("telemetry_proxy", "measured")
    gpu_kwh = 4 * (7.2 + 2.4) + 2 * (6.0 + 2.4)  # 6 GPUs cover the pool's 288 card-hours
    assert train["it_energy_mwh"] == pytest.approx(gpu_kwh * 1.5 / 1000, rel=1e-2)
    assert train["it_energy_provenance"] == "measured"


def test_a_fetch_makes_the_cluster_analyses_stale_and_says_why(gpu_cluster, prometheus):
    import datetime as dt

    from planner.models import Analysis

    analysis = Analysis.objects.create(
        scope="cluster", object_id=gpu_cluster.pk,
        period_start=dt.datetime(2026, 3, 2, tzinfo=dt.UTC),
        period_end=dt.datetime(2026, 3, 4, tzinfo=dt.UTC),
    )  # fmt: skip
    Analysis.objects.filter(pk=analysis.pk).update(stale=False, stale_reason="")
    fetch, _ = fetch_from(gpu_cluster, prometheus.url)
    assert fetch.status == "succeeded", fetch.error
    analysis.refresh_from_db()
    assert analysis.stale is True
    assert analysis.stale_reason == "telemetry fetched for cluster c1, 2026-03-02 to 2026-03-03."


def test_usage_page_shows_allocated_vs_active_lines(client, viewer, fetched):
    client.force_login(viewer)
    page = client.get("/usage/", {"start": "2026-03-02", "end": "2026-03-04"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Allocated vs. active card-hours (telemetry)" in html
    assert "train active" in html and "serve allocated" in html
    empty = client.get("/usage/", {"start": "2025-03-02", "end": "2025-03-04"}).content.decode()
    assert "Allocated vs. active card-hours" not in empty  # no telemetry: no empty panel

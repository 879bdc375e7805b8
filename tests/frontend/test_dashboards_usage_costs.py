"""Usage and Costs dashboards: access, filters, numbers against the API, query counts, and the
daily rollups they read against the raw usage records (data: tests/support/usage_data.py)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse
from django.utils import timezone

from tests.support import usage_data
from tests.support.usage_data import PERIOD_END, PERIOD_START, aware

pytestmark = pytest.mark.django_db

QUERY = {"start": PERIOD_START.isoformat(), "end": PERIOD_END.isoformat()}
REL = 1e-9


def scope(granularity="week", group_by=("cluster",), **extra):
    from accounting.selectors import AccountingScope

    return AccountingScope(
        period_start=aware(PERIOD_START),
        period_end=aware(PERIOD_END),
        granularity=granularity,
        group_by=group_by,
        **extra,
    )


def cluster_id(name: str) -> int:
    from inventory.models import Cluster

    return Cluster.objects.get(name=name).pk


def csv_frame(client, key: str, params: dict) -> pd.DataFrame:
    response = client.get(reverse("frontend:chart-data", args=[key, "csv"]), params)
    assert response.status_code == 200, response.content[:500]
    return pd.read_csv(io.StringIO(response.content.decode()))


def api(client, report: str, params: dict) -> dict:
    response = client.get(f"/api/v1/accounting/{report}/", params)
    assert response.status_code == 200, response.content[:500]
    return response.json()


def figure_traces(response, key: str) -> list[dict]:
    """The Plotly traces the page embedded for one chart (what the browser plots)."""
    html = response.content.decode()
    match = re.search(
        r'Plotly\.newPlot\(\s*"chart-' + re.escape(key) + r'",\s*(\[.*?\]),\s*\{', html, re.S
    )
    assert match, f"chart {key} is not on the page"
    return json.loads(match.group(1))


def trace_values(trace: dict, axis: str) -> np.ndarray:
    """Plotly may ship numbers as typed arrays ({"dtype", "bdata"}); decode either form."""
    values = trace[axis]
    if isinstance(values, dict) and "bdata" in values:
        import base64

        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
    return np.asarray(values)


# -- rollups ---------------------------------------------------------------------------------


def test_rollup_splits_jobs_over_days_and_keeps_every_card_hour(usage):
    from accounting.models import UsageDailyRollup, UsageRecord

    rows = UsageDailyRollup.objects.filter(cluster_id=cluster_id("train-hetero"), account="team-a")
    k1_days = {
        row.day: row.allocated_card_hours
        for row in rows.filter(day__in=[dt.date(2024, 7, 1), dt.date(2024, 7, 2)])
    }
    # k-1: 16 cards × 48 h from 07-01 00:00, nothing else of team-a in that week.
    assert k1_days == {dt.date(2024, 7, 1): 384.0, dt.date(2024, 7, 2): 384.0}
    # k-3 ended node_fail: all its 640 card-hours are lost work.
    ascend = UsageDailyRollup.objects.get(
        cluster_id=cluster_id("train-ascend"), day=dt.date(2024, 7, 4)
    )
    assert (ascend.allocated_card_hours, ascend.lost_card_hours) == (640.0, 640.0)
    # k-1's gpuutil 80 % and MFU 40 %: weighted by its card-hours.
    k1 = rows.get(day=dt.date(2024, 7, 1), accelerator__name="H100 SXM5 80GB")
    assert k1.gpu_busy_card_hours == pytest.approx(0.8 * 384)
    assert (k1.mfu_card_hours, k1.mfu_weighted_card_hours) == pytest.approx((768.0, 0.4 * 768))
    total_records = sum(UsageRecord.objects.values_list("card_hours", flat=True))
    total_rollup = sum(UsageDailyRollup.objects.values_list("allocated_card_hours", flat=True))
    assert total_rollup == pytest.approx(total_records, rel=REL)


@pytest.mark.parametrize(
    ("granularity", "group"),
    [
        ("day", "cluster"),
        ("week", "pool"),
        ("month", "accelerator"),
        ("week", "team"),
        ("month", "site"),
        ("total", "cluster"),
    ],
)
def test_utilization_from_rollups_equals_utilization_from_records(usage, granularity, group):
    from accounting.rollups import rollup_usage_frame
    from accounting.selectors import GROUP_COLUMNS, measured_utilization

    query = scope(granularity, (group,))
    by = [GROUP_COLUMNS[group]]
    raw = measured_utilization(query, by)
    keys = [group] if group in ("pool", "accelerator", "team") else []
    assert len(raw) > 0
    for edges in (None, query.edges()):  # one pseudo job per day, or per bucket
        usage = rollup_usage_frame(
            None, query.period_start, query.period_end, keys=keys, edges=edges
        )
        rolled = measured_utilization(query, by, usage=usage)
        pd.testing.assert_frame_equal(rolled, raw, rtol=REL, check_dtype=False)


def test_costs_and_chargeback_from_rollups_equal_the_reports_from_records(usage):
    from accounting.rollups import rollup_usage_frame
    from accounting.selectors import chargeback_report, cost_report

    for granularity, rule in (("month", "proportional"), ("week", "even"), ("month", "none")):
        query = scope(granularity, ("site", "cluster", "pool"), idle_rule=rule)
        rolled_usage = rollup_usage_frame(
            None, query.period_start, query.period_end, keys=["pool", "team"]
        )
        raw, rolled = cost_report(query), cost_report(query, usage=rolled_usage)
        compare = ["total_cost", "compute_cost", "energy_cost", "effective_pflop_days"]
        raw_rows = pd.DataFrame(raw["rows"])
        assert len(raw_rows) > 0
        pd.testing.assert_frame_equal(
            pd.DataFrame(rolled["rows"])[compare], raw_rows[compare], rtol=1e-7
        )
        raw, rolled = chargeback_report(query), chargeback_report(query, usage=rolled_usage)
        columns = ["team", "bucket_start", "used_card_hours", "chargeback_cost"]
        pd.testing.assert_frame_equal(
            pd.DataFrame(rolled["rows"])[columns].sort_values(columns[:2], ignore_index=True),
            pd.DataFrame(raw["rows"])[columns].sort_values(columns[:2], ignore_index=True),
            rtol=1e-7,
        )


def test_refresh_replaces_a_clusters_rows_and_follows_a_new_import(usage):
    from accounting import services
    from accounting.models import UsageDailyRollup
    from accounting.rollups import refresh_usage_rollups
    from inventory.models import Cluster

    hetero = Cluster.objects.get(name="train-hetero")
    day = dt.date(2024, 7, 3)
    before = UsageDailyRollup.objects.filter(cluster=hetero, day=day, account="team-z")
    assert not before.exists()
    text = (
        usage_data.CSV_HEADER
        + "\ntrain-hetero,z-1,8,2024-07-03T06:00:00Z,2024-07-03T09:00:00Z,completed,"
        "H100 SXM5 80GB,team-z,zed,,\n"
    )
    job = services.create_import_job(kind="csv", cluster=hetero, source_name="z.csv", queue=False)
    services.import_file(job, io.BytesIO(text.encode()))
    refresh_usage_rollups([hetero.pk])
    assert before.get().allocated_card_hours == 24.0
    # A second refresh rebuilds, it does not add.
    total = UsageDailyRollup.objects.filter(cluster=hetero).count()
    refresh_usage_rollups([hetero.pk])
    assert UsageDailyRollup.objects.filter(cluster=hetero).count() == total


def test_a_refresh_leaves_postgresql_statistics_of_the_rows_it_wrote(demo_fleet):
    """The dashboards' sums are planned from the rollup table's statistics: a refresh gathers
    them (ANALYZE), so a year of rows is not planned as the empty table it replaced."""
    from django.db import connection

    from accounting.models import UsageDailyRollup
    from accounting.rollups import refresh_usage_rollups

    if connection.vendor != "postgresql":
        pytest.skip("statistics of the PostgreSQL planner")

    def planner_rows() -> float:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE relname = %s",
                [UsageDailyRollup._meta.db_table],
            )
            return cursor.fetchone()[0]

    usage_data.load_usage()
    refresh_usage_rollups()
    assert planner_rows() == UsageDailyRollup.objects.count() > 100


def test_an_import_queues_the_rollup_refresh_through_the_dispatcher(
    demo_fleet, monkeypatch, django_capture_on_commit_callbacks
):
    from accounting import services
    from accounting.models import RollupRefresh
    from core.jobs import dispatch
    from inventory.models import Cluster

    sent = []
    monkeypatch.setattr(dispatch, "send_task", lambda *args: sent.append(args))
    cluster = Cluster.objects.get(name="inference-eu")
    job = services.create_import_job(kind="csv", cluster=cluster, source_name="x", queue=False)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.import_file(job, io.BytesIO(usage_data.usage_csv("inference-eu", 3, 5).encode()))
    refresh = RollupRefresh.objects.get()
    assert (refresh.cluster_ids, refresh.status, sent) == ([cluster.pk], "queued", [])
    for callback in callbacks:  # the commit
        callback()
    task = dispatch.DEFERRABLE["accounting.RollupRefresh"]
    assert [(a[0], a[1], str(a[2])) for a in sent if a[0] == task] == [
        (task, refresh.pk, str(refresh.run_id))
    ]


def test_a_bulk_loader_that_refreshes_itself_queues_no_refresh(demo_fleet):
    from accounting import services
    from accounting.models import RollupRefresh, UsageRecord
    from inventory.models import Cluster

    cluster = Cluster.objects.get(name="inference-eu")
    job = services.create_import_job(kind="csv", cluster=cluster, source_name="x", queue=False)
    text = usage_data.usage_csv("inference-eu", 3, 5)
    services.import_file(job, io.BytesIO(text.encode()), queue_rollup_refresh=False)
    assert UsageRecord.objects.filter(cluster=cluster).exists()
    assert not RollupRefresh.objects.exists()


def test_a_broker_outage_defers_the_refresh_and_the_dispatcher_sends_it_later(
    demo_fleet, monkeypatch, django_capture_on_commit_callbacks, dashboard_warmup
):
    from celery import current_app
    from kombu.exceptions import OperationalError

    from accounting import services, tasks  # noqa: F401 - registers the worker tasks
    from accounting.models import RollupRefresh, UsageDailyRollup
    from core.jobs import dispatch
    from frontend.dashboards import dashboard_query, usage_selectors
    from inventory.models import Cluster

    def broker_down(*args):
        raise OperationalError("connection refused")

    monkeypatch.setattr(dispatch, "send_task", broker_down)
    cluster = Cluster.objects.get(name="train-hetero")
    job = services.create_import_job(kind="csv", cluster=cluster, source_name="x", queue=False)
    text = usage_data.usage_csv("train-hetero", 3, 20)
    with django_capture_on_commit_callbacks(execute=True):
        imported = services.import_file(job, io.BytesIO(text.encode())).records_created
    refresh = RollupRefresh.objects.get()
    assert (refresh.status, refresh.error) == ("queued", dispatch.WORKERS_UNAVAILABLE)
    assert not UsageDailyRollup.objects.exists()
    assert dispatch.dispatch_pending() == {"sent": 0, "waiting": 1}

    # The broker is back: the dispatcher sends it, a worker (here: in process) runs it.
    def run_on_worker(task, pk, run_id):
        current_app.tasks[task].apply((pk, run_id)).get()

    monkeypatch.setattr(dispatch, "send_task", run_on_worker)
    assert dispatch.dispatch_pending() == {"sent": 1, "waiting": 0}
    refresh.refresh_from_db()
    assert (refresh.status, refresh.error, refresh.records) == ("succeeded", "", imported)
    assert UsageDailyRollup.objects.filter(cluster=cluster).exists()
    # ... and precomputed the default views: the first visit computes nothing.
    dashboard_query.computations.clear()
    fleet_view = dashboard_query.DashboardQuery.of_params({})
    usage_selectors.usage_page(fleet_view)
    usage_selectors.costs_page(fleet_view)
    assert dashboard_query.computations == {}
    # A redelivered message of a finished refresh does nothing.
    assert run_rollup_refresh_again(refresh) == {"skipped": refresh.pk}


def run_rollup_refresh_again(refresh):
    from accounting.tasks import run_rollup_refresh

    return run_rollup_refresh.apply((refresh.pk, str(refresh.run_id))).get()


def test_the_refresh_task_and_command_build_the_rows(demo_fleet):
    from django.core.management import call_command

    from accounting.models import UsageDailyRollup
    from accounting.tasks import refresh_usage_rollups

    usage_data.load_usage(count=20)
    assert refresh_usage_rollups.apply(args=[None]).get()["records"] > 0
    rows = UsageDailyRollup.objects.count()
    UsageDailyRollup.objects.all().delete()
    out = io.StringIO()
    call_command("refresh_usage_rollups", "--no-progress", "--cluster", "train-hetero", stdout=out)
    assert "daily rows" in out.getvalue()
    assert 0 < UsageDailyRollup.objects.count() < rows
    assert set(UsageDailyRollup.objects.values_list("cluster__name", flat=True)) == {"train-hetero"}


def test_rollup_status_flags_an_import_after_the_refresh(usage):
    from accounting.models import ImportJob
    from accounting.rollups import rollup_status

    assert rollup_status()["stale_cluster_ids"] == []
    ImportJob.objects.filter(kind="csv").update(
        finished_at=timezone.now() + dt.timedelta(minutes=5), status="succeeded", records_created=1
    )
    assert len(rollup_status()["stale_cluster_ids"]) == 3


# -- access and filters ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["frontend:usage", "frontend:costs"])
def test_pages_need_login_and_a_role(client, no_role_user, viewer, demo_fleet, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302 and "login" in response["Location"]
    client.force_login(no_role_user)
    assert client.get(url).status_code == 403
    client.force_login(viewer)
    assert client.get(url).status_code == 200


@pytest.mark.parametrize(
    ("name", "params", "field", "label"),
    [
        ("frontend:usage", {"granularity": "hour"}, "granularity", "Granularity"),
        ("frontend:usage", {"group_by": "planet"}, "group_by", "Group by"),
        ("frontend:usage", {"start": "2024-05-01", "end": "2024-04-01"}, "end", "Period to"),
        ("frontend:usage", {"start": "yesterday"}, "start", "Period from"),
        ("frontend:usage", {"cluster": "999999"}, "cluster", "Cluster"),
        ("frontend:costs", {"idle_rule": "random"}, "idle_rule", "Idle cost rule"),
        ("frontend:costs", {"granularity": "day"}, "granularity", "Granularity"),
    ],
)
def test_bad_filters_are_errors_naming_the_field(
    client, viewer, demo_fleet, name, params, field, label
):
    client.force_login(viewer)
    response = client.get(reverse(name), params)
    assert response.status_code == 400
    html = response.content.decode()
    assert html.count("errorlist") == 1
    after_label = html.split(f'<label for="id_{field}">{label}')[1]
    assert "errorlist" in after_label.split('<div class="field')[0]
    key = "usage-utilization" if name == "frontend:usage" else "costs-breakdown"
    download = client.get(reverse("frontend:chart-data", args=[key, "csv"]), params)
    assert download.status_code == 400
    assert download.content.decode().startswith(f"{label}:")


# -- numbers ---------------------------------------------------------------------------------


def test_hand_checked_week_utilization(client, viewer, usage):
    """train-hetero week of 2024-07-01: 768 + 48 card-hours of 2,000 cards × 168 h."""
    client.force_login(viewer)
    frame = csv_frame(client, "usage-utilization", {**QUERY, "granularity": "week"})
    row = frame[(frame["cluster"] == "train-hetero") & (frame["bucket_start"] == "2024-07-01")]
    assert row["allocated_card_hours"].item() == pytest.approx(816.0)
    assert row["utilization_pct"].item() == pytest.approx(816 / (2000 * 168) * 100)
    ascend = frame[(frame["cluster"] == "train-ascend") & (frame["bucket_start"] == "2024-07-01")]
    assert ascend["effective_time_pct"].item() == pytest.approx(0.0)  # all of it node_fail


@pytest.mark.parametrize(
    ("group", "granularity"), [("cluster", "week"), ("pool", "month"), ("team", "day")]
)
def test_usage_chart_equals_its_csv_and_the_api(client, viewer, usage, group, granularity):
    from inventory.models import Pool

    client.force_login(viewer)
    params = {**QUERY, "group_by": group, "granularity": granularity}
    frame = csv_frame(client, "usage-utilization", params)
    report = api(client, "utilization", params)
    expected = pd.DataFrame(report["rows"])
    label = expected[group]
    if group == "pool":  # the page names a pool cluster/pool
        pools = dict(Pool.objects.values_list("pk", "cluster__name"))
        label = expected["pool_id"].map(pools) + "/" + expected["pool"]
    expected = expected.assign(group=label, day=expected["bucket_start"].str[:10])
    merged = frame.merge(
        expected, left_on=[group, "bucket_start"], right_on=["group", "day"], how="outer"
    )
    assert len(merged) == len(frame) == len(expected) > 0
    np.testing.assert_allclose(
        merged["utilization_pct"], merged["utilization"].astype(float) * 100, rtol=REL
    )
    np.testing.assert_allclose(
        merged["allocated_card_hours_x"], merged["allocated_card_hours_y"], rtol=REL
    )
    page = client.get(reverse("frontend:usage"), params)
    traces = figure_traces(page, "usage-utilization")
    for trace in traces:
        rows = frame[frame[group].astype(str) == trace["name"]]
        np.testing.assert_allclose(trace_values(trace, "y"), rows["utilization_pct"], rtol=REL)
        assert list(trace["x"]) == list(rows["bucket_start"])


def test_heatmap_and_breakdown_equal_their_csv_and_the_api(client, viewer, usage):
    client.force_login(viewer)
    heat = csv_frame(client, "usage-team-heatmap", QUERY)
    report = api(client, "utilization", {**QUERY, "group_by": "team", "granularity": "week"})
    expected = pd.DataFrame(report["rows"])
    assert set(heat["team"]) == set(expected["team"]) >= {"team-a", "(no account)"}
    np.testing.assert_allclose(
        heat.sort_values(["team", "week_start"])["utilization_pct"],
        expected.sort_values(["team", "bucket_start"])["utilization"].astype(float) * 100,
        rtol=REL,
    )
    breakdown = csv_frame(client, "usage-breakdown", QUERY)
    total = pd.DataFrame(
        api(client, "utilization", {**QUERY, "granularity": "total"})["rows"]
    ).sort_values("cluster")
    for column in ("allocated_card_hours", "down_card_hours", "planned_down_card_hours"):
        np.testing.assert_allclose(breakdown[column], total[column].astype(float), rtol=REL)
    hetero = breakdown.set_index("cluster").loc["train-hetero"]
    # The August sreport: its Down and planned down fall inside the period in full.
    assert (hetero["down_card_hours"], hetero["planned_down_card_hours"]) == pytest.approx(
        (2400.0, 4800.0)
    )
    parts = hetero[
        ["allocated_card_hours", "idle_card_hours", "down_card_hours", "planned_down_card_hours"]
    ].sum()
    assert parts == pytest.approx(hetero["in_service_card_hours"])  # 2,000 cards × 92 days
    assert hetero["in_service_card_hours"] == pytest.approx(2000 * 24 * 92)
    page = client.get(reverse("frontend:usage"), QUERY)
    bars = {
        trace["name"]: trace_values(trace, "y") for trace in figure_traces(page, "usage-breakdown")
    }
    np.testing.assert_allclose(bars["Allocated"], breakdown["allocated_card_hours"], rtol=REL)
    np.testing.assert_allclose(bars["Idle"], breakdown["idle_card_hours"], rtol=REL)


def test_cost_charts_equal_their_csv_and_the_api(client, viewer, usage):
    client.force_login(viewer)
    params = {**QUERY, "granularity": "month", "group_by": "site"}
    breakdown = csv_frame(client, "costs-breakdown", params)
    report = api(client, "costs", {**params, "group_by": "site"})
    by_site = (
        pd.DataFrame(report["rows"])
        .groupby("site")[["compute_cost", "energy_cost", "energy_overhead_cost", "total_cost"]]
        .sum()
    )
    merged = breakdown.set_index("site").merge(
        by_site, left_index=True, right_index=True, suffixes=("", "_api")
    )
    assert len(merged) == 2
    np.testing.assert_allclose(merged["ownership_cost"], merged["compute_cost"], rtol=1e-7)
    np.testing.assert_allclose(
        merged["it_energy_cost"] + merged["pue_overhead_cost"], merged["energy_cost"], rtol=1e-7
    )
    np.testing.assert_allclose(
        merged["ownership_cost"] + merged["it_energy_cost"] + merged["pue_overhead_cost"],
        merged["total_cost_api"],
        rtol=1e-7,
    )
    # The liquid site's PUE 1.1: the overhead is 0.1 / 1.1 of its energy cost.
    liquid = merged.loc["Ulanqab DC2 (liquid)"]
    assert liquid["pue_overhead_cost"] == pytest.approx(liquid["energy_cost"] * 0.1 / 1.1)

    per_day = csv_frame(client, "costs-pflop-day", params)
    clusters = pd.DataFrame(api(client, "costs", {**params, "group_by": "cluster"})["rows"])
    clusters["bucket_start"] = clusters["bucket_start"].str[:10]
    merged = per_day.merge(clusters, on=["cluster", "bucket_start"], suffixes=("", "_api"))
    assert len(merged) == len(clusters) > 0
    np.testing.assert_allclose(
        merged["cost_per_effective_pflop_day"],
        merged["cost_per_effective_pflop_day_api"].astype(float),
        rtol=1e-7,
    )
    # The fleet line is drawn once per currency (EUR and USD are never added).
    fleet = per_day[per_day["cluster"] == "All clusters"].set_index(["currency", "bucket_start"])
    sums = clusters.groupby(["currency", "bucket_start"])[
        ["total_cost", "uncovered_cost", "effective_pflop_days"]
    ].sum()
    assert set(fleet.index.get_level_values("currency")) == {"EUR", "USD"}
    # Over the hours usage records cover: the cost of the others delivers no known compute.
    np.testing.assert_allclose(
        fleet["cost_per_effective_pflop_day"],
        (sums["total_cost"] - sums["uncovered_cost"]) / sums["effective_pflop_days"],
        rtol=1e-7,
    )
    page = client.get(reverse("frontend:costs"), params)
    # One panel per currency: the ownership bars of both panels, in the CSV's order.
    ownership = [
        t for t in figure_traces(page, "costs-breakdown") if t["name"] == "Ownership or rental"
    ]
    assert [t["customdata"][0][0] for t in ownership] == sorted(breakdown["currency"].unique())
    np.testing.assert_allclose(
        np.concatenate([trace_values(t, "y") for t in ownership]),
        breakdown.sort_values("currency")["ownership_cost"],
        rtol=REL,
    )


@pytest.mark.parametrize("rule", ["proportional", "even", "none"])
def test_chargeback_table_equals_the_api_and_adds_up(client, viewer, usage, rule):
    client.force_login(viewer)
    params = {**QUERY, "granularity": "month", "idle_rule": rule}
    frame = csv_frame(client, "costs-chargeback", params)
    report = api(client, "chargeback", params)
    keys = ["team", "currency"]
    expected = pd.DataFrame(report["rows"]).groupby(keys)["chargeback_cost"].sum()
    np.testing.assert_allclose(
        frame.set_index(keys)["chargeback_cost"].sort_index(), expected.sort_index(), rtol=1e-7
    )
    # Each currency adds up on its own: a team's EUR and USD charges are never summed.
    totals = pd.DataFrame(report["totals"]).groupby("currency")["total_cost"].sum()
    by_currency = frame.groupby("currency")
    np.testing.assert_allclose(by_currency["chargeback_cost"].sum(), totals, rtol=1e-9)
    np.testing.assert_allclose(by_currency["share_of_total_pct"].sum(), 100.0)
    if rule == "none":
        assert "(idle, not charged)" in set(frame["team"])
    page = client.get(reverse("frontend:costs"), {**params, "sort": "team"})
    html = page.content.decode()
    assert f"Idle cost rule ({rule})" in html
    body = html.split('class="dashboard-table sortable"')[1]
    teams = re.findall(r'<tr><th scope="row">([^<]+)</th>', body.split("<tfoot>")[0])
    assert teams == sorted(frame["team"])
    footer = body.split("<tfoot>")[1]
    for currency, total_cost in totals.items():
        assert f'{round(total_cost):,}</td><td class="num">100.0</td><td>{currency}' in footer


# -- budget ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "first_view_max", "cached_max"),
    # First views include the two coverage queries (spans of records and of sreports) and one
    # label → id query per chart with drill-down links; cached views still read the rollup
    # status (two queries). None grows with the data.
    [
        ("frontend:usage", QUERY, 52, 12),
        ("frontend:usage", {**QUERY, "group_by": "pool", "granularity": "day"}, 52, 12),
        ("frontend:costs", QUERY, 51, 10),
        ("frontend:costs", {**QUERY, "group_by": "site", "idle_rule": "even"}, 51, 10),
        # Weekly charts: a second pool-cost run (the chargeback stays monthly).
        ("frontend:costs", {**QUERY, "granularity": "week"}, 65, 10),
    ],
)
def test_pages_run_a_fixed_number_of_queries(
    client,
    viewer,
    usage,
    django_assert_max_num_queries,
    name,
    params,
    first_view_max,
    cached_max,
):
    from frontend.dashboards.dashboard_query import shared_cache

    client.force_login(viewer)
    client.get(reverse(name), params)  # warm the session and the content-type caches
    shared_cache().clear()
    # First view of a query nothing precomputed: every report computed, and stored.
    with django_assert_max_num_queries(first_view_max):
        response = client.get(reverse(name), params)
    assert response.status_code == 200
    with django_assert_max_num_queries(cached_max):
        assert client.get(reverse(name), params).status_code == 200


@pytest.mark.parametrize(("name", "max_queries"), [("frontend:usage", 14), ("frontend:costs", 12)])
def test_the_first_view_after_a_refresh_reads_the_precomputed_default_view(
    client, viewer, usage, django_assert_max_num_queries, name, max_queries, dashboard_warmup
):
    from accounting.tasks import refresh_usage_rollups
    from frontend.dashboards import dashboard_query

    client.force_login(viewer)
    client.get(reverse("frontend:home"))  # warm the session and the content-type caches
    key = "usage-utilization" if name == "frontend:usage" else "costs-breakdown"
    dashboard_query.shared_cache().clear()
    computed = figure_traces(client.get(reverse(name)), key)  # on demand
    dashboard_query.shared_cache().clear()
    # The worker's refresh task: rollups rebuilt, then the default views precomputed.
    refresh_usage_rollups.apply(args=[None]).get()
    dashboard_query.computations.clear()
    with django_assert_max_num_queries(max_queries):
        response = client.get(reverse(name))
    assert response.status_code == 200
    assert dashboard_query.computations == {}  # no report ran for this request
    assert figure_traces(response, key) == computed
    # Another option of the default period: its reports were precomputed too, only the page
    # (charts) is drawn; another period computes its reports on demand.
    page_kind = name.split(":")[1] + "-page"
    assert client.get(reverse(name), {"group_by": "site"}).status_code == 200
    assert dashboard_query.computations == {page_kind: 1}
    # (The default period spans the usage, i.e. QUERY; July alone is another period.)
    july = {"start": "2024-07-01", "end": "2024-08-01"}
    assert client.get(reverse(name), july).status_code == 200
    reports = set(dashboard_query.computations) - {page_kind}
    expected = (
        {"utilization"} if name == "frontend:usage" else {"pool-costs", "costs", "chargeback"}
    )
    assert reports == expected


def test_a_page_stores_its_reports_not_the_cost_runs_behind_them(client, viewer, usage):
    """Pages keep their reports in the shared cache, not the pool cost runs (a write each,
    for results the reports hold): other options of the period reuse the reports, and the
    warnings come with the cost report."""
    from frontend.dashboards import dashboard_query

    client.force_login(viewer)
    july = {"start": "2024-07-01", "end": "2024-08-01", "granularity": "week"}
    dashboard_query.shared_cache().clear()
    dashboard_query.computations.clear()
    first = client.get(reverse("frontend:costs"), july)
    assert dashboard_query.computations == {
        "costs-page": 1,
        "costs": 1,
        "chargeback": 1,
        "pool-costs": 2,  # weekly for the charts, money-only monthly for the bills
    }
    assert first.context["warnings"]  # e.g. hours of the period without usage records
    dashboard_query.computations.clear()
    regrouped = client.get(reverse("frontend:costs"), {**july, "group_by": "pool"})
    assert dashboard_query.computations == {"costs-page": 1}  # no cost run for the warnings
    assert regrouped.context["warnings"] == first.context["warnings"]
    dashboard_query.computations.clear()
    client.get(reverse("frontend:costs"), {**july, "idle_rule": "none"})
    # Another rule bills again from a money-only run (the page's runs were not stored).
    assert dashboard_query.computations == {"costs-page": 1, "chargeback": 1, "pool-costs": 1}


def test_csv_download_matches_what_the_table_lists(client, viewer, usage):
    client.force_login(viewer)
    response = client.get(reverse("frontend:chart-data", args=["usage-breakdown", "csv"]), QUERY)
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    page = client.get(reverse("frontend:usage"), QUERY).content.decode()
    for row in rows:
        allocated = f"{float(row['allocated_card_hours']):,.0f}"
        # The cluster cell links to its page (drill-down); the number follows it.
        cell = rf'<th scope="row"><a href="[^"]+">{re.escape(row["cluster"])}</a></th>'
        assert re.search(cell + rf'<td class="num">{re.escape(allocated)}</td>', page)


def test_cached_results_follow_new_usage_and_inventory_edits(client, viewer, usage):
    from accounting import services
    from accounting.rollups import refresh_usage_rollups
    from inventory.models import Cluster, Site

    client.force_login(viewer)
    params = {**QUERY, "granularity": "month"}
    before = csv_frame(client, "usage-breakdown", params).set_index("cluster")
    hetero = Cluster.objects.get(name="train-hetero")
    text = (
        usage_data.CSV_HEADER
        + "\ntrain-hetero,n-1,100,2024-08-10T00:00:00Z,2024-08-10T10:00:00Z,completed,"
        "H100 SXM5 80GB,team-n,nia,,\n"
    )
    job = services.create_import_job(kind="csv", cluster=hetero, source_name="n.csv", queue=False)
    services.import_file(job, io.BytesIO(text.encode()))
    refresh_usage_rollups([hetero.pk])
    after = csv_frame(client, "usage-breakdown", params).set_index("cluster")
    added = after["allocated_card_hours"] - before["allocated_card_hours"]
    # SQL sums in any order (PostgreSQL): other clusters move by float noise only.
    assert added.to_dict() == pytest.approx(
        {"inference-eu": 0.0, "train-ascend": 0.0, "train-hetero": 1000.0}, abs=1e-6
    )
    costs = csv_frame(client, "costs-breakdown", params).set_index("cluster")
    site = Site.objects.get(name="Ulanqab DC2 (liquid)")
    site.tariff_per_kwh *= 2
    site.save()
    doubled = csv_frame(client, "costs-breakdown", params).set_index("cluster")
    assert doubled.loc["train-ascend", "it_energy_cost"] == pytest.approx(
        2 * costs.loc["train-ascend", "it_energy_cost"]
    )
    # A re-imported sreport that changes its Down hours (same rows, updated in place).
    down_before = csv_frame(client, "usage-breakdown", params).set_index("cluster")
    assert down_before.loc["train-hetero", "down_card_hours"] == pytest.approx(2400.0)
    job = services.create_import_job(
        kind="sreport", cluster=hetero, source_name="aug-v2.sreport", queue=False
    )
    corrected = usage_data.SREPORT.replace("|2400|4800|580800|", "|4800|4800|578400|")
    assert services.import_file(job, io.BytesIO(corrected.encode())).records_updated == 1
    down_after = csv_frame(client, "usage-breakdown", params).set_index("cluster")
    assert down_after.loc["train-hetero", "down_card_hours"] == pytest.approx(4800.0)

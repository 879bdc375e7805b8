"""Server time of every main page on the demo fleet plus a year of usage records.

Builds (or reuses) a database with the demo fleet (`manage.py load_demo_fleet`: 3 clusters,
2,640 cards) and a year (2024) of usage records generated vectorised with numpy and imported
through the real usage import (`accounting.services.import_file`: CSV parser, pool and card
mapping, bulk upsert), refreshes the daily usage rollups, then times each page with the Django
test client (logged in as a viewer): one warm-up, then the median of ``--repeats`` runs, with
the number of database queries of one run. Cold runs clear Django's caches (the default
and the shared ``dashboards`` cache) first; "first view after refresh" runs the worker's
precompute hook (untimed) first, as after a rollup refresh: the default views are stored
whole, other options of the default period have their reports stored and only draw charts.

    .venv/bin/python benchmarks/pages.py                                  # SQLite file in var/
    .venv/bin/python benchmarks/pages.py --database-url postgres://postgres@127.0.0.1:5432/h6b
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from benchmarks.common import ensure_postgres_database, setup_django  # noqa: E402

DEFAULT_DATABASE_URL = f"sqlite:///{REPO_ROOT / 'var' / 'bench-pages.sqlite3'}"
BUDGET_MS = 300
YEAR_START = np.datetime64("2024-01-01T00:00", "m")
YEAR_END = np.datetime64("2025-01-01T00:00", "m")
TARGET_ALLOCATED_SHARE = 0.65
# Demo cluster -> (card models, cards, commissioned, jobs in 2024).
CLUSTERS = {
    "train-hetero": (("A100 SXM4 80GB", "H100 SXM5 80GB"), 2000, "2024-01-01", 200_000),
    "train-ascend": (("Ascend 910B",), 512, "2024-03-01", 60_000),
    "inference-eu": (("L40S",), 128, "2024-06-01", 40_000),
}
TEAMS = np.array([f"team-{name}" for name in "abcdefghijklmnop"])
STATES = np.array(["completed", "failed", "cancelled", "timeout", "node_fail", "preempted"])
STATE_WEIGHTS = np.array([0.75, 0.06, 0.09, 0.05, 0.02, 0.03])
SIZES = np.array([1, 2, 4, 8, 16, 32, 64])
SIZE_WEIGHTS = np.array([0.30, 0.12, 0.13, 0.30, 0.08, 0.05, 0.02])
PAGES = [
    ("fleet", "/"),
    ("inventory", "/inventory/"),
    ("inventory: clusters", "/inventory/clusters/"),
    ("inventory: pools", "/inventory/pools/"),
    ("inventory: node groups", "/inventory/node-groups/"),
    ("analyses", "/analyses/"),
    ("planner", "/planner/"),
    ("usage (default: last year, weekly, per cluster)", "/usage/"),
    ("usage, daily per pool", "/usage/?group_by=pool&granularity=day"),
    ("usage, monthly per team", "/usage/?group_by=team&granularity=month"),
    ("costs (default: last year, monthly, per cluster)", "/costs/"),
    (
        "costs, weekly per site, even idle rule",
        "/costs/?granularity=week&group_by=site&idle_rule=even",
    ),
    # Never precomputed: a period or a cluster the manager picks.
    ("usage, custom period", "/usage/?start=2024-04-01&end=2024-10-01"),
    ("usage, one cluster", "/usage/?cluster={train-hetero}"),
    ("costs, custom period", "/costs/?start=2024-04-01&end=2024-10-01"),
    (
        "costs, one cluster, weekly per pool",
        "/costs/?cluster={train-hetero}&granularity=week&group_by=pool",
    ),
]
# After each rollup refresh the worker precomputes these pages' default views and the reports
# behind their other options (default period).
PRECOMPUTED_PAGES = ("/usage/", "/costs/")


def usage_csv(cluster: str, seed: int) -> str:
    """A year of one cluster's jobs as the documented usage CSV (numpy, no per-job loop)."""
    models, cards_total, commissioned, jobs = CLUSTERS[cluster]
    rng = np.random.default_rng(seed)
    first = np.datetime64(f"{commissioned}T00:00", "m")
    span_min = int((YEAR_END - first).astype(int))
    start = first + np.sort(rng.integers(0, span_min, jobs)).astype("timedelta64[m]")
    cards = rng.choice(SIZES, jobs, p=SIZE_WEIGHTS)
    raw_h = rng.lognormal(1.6, 1.1, jobs)
    # Scale run times so the cluster is about TARGET_ALLOCATED_SHARE allocated.
    capacity = cards_total * span_min / 60.0
    hours = raw_h * (TARGET_ALLOCATED_SHARE * capacity / float((cards * raw_h).sum()))
    minutes = np.maximum(np.round(hours * 60), 1).astype("timedelta64[m]")
    end = np.minimum(start + minutes, YEAR_END)
    state = rng.choice(STATES, jobs, p=STATE_WEIGHTS)
    team = rng.choice(TEAMS, jobs)
    model = rng.choice(np.array(models), jobs)
    util = np.where(rng.random(jobs) < 0.6, np.round(rng.uniform(0.2, 1.0, jobs), 3), np.nan)
    util_text = np.where(np.isnan(util), "", util.astype(str))
    ids = np.char.add(f"{cluster}-", np.arange(jobs).astype(str))
    columns = [
        np.full(jobs, cluster),
        ids,
        cards.astype(str),
        np.char.add(np.datetime_as_string(start, unit="m"), "Z"),
        np.char.add(np.datetime_as_string(end, unit="m"), "Z"),
        state,
        model,
        team,
        util_text,
    ]
    lines = columns[0]
    for column in columns[1:]:
        lines = np.char.add(np.char.add(lines, ","), column)
    header = "cluster,job_id,cards,start,end,state,accelerator_model,team,gpu_utilization"
    return header + "\n" + "\n".join(lines.tolist()) + "\n"


def build(seed: int) -> dict[str, float]:
    """Migrate, load the demo fleet and a year of usage (skipped when already there)."""
    from django.core.management import call_command

    from accounting import services
    from accounting.models import UsageDailyRollup, UsageRecord
    from accounting.rollups import refresh_usage_rollups
    from inventory.models import Cluster
    from inventory.services import load_demo_fleet

    call_command("migrate", verbosity=0)
    load_demo_fleet()
    timings: dict[str, float] = {}
    expected = sum(spec[3] for spec in CLUSTERS.values())
    if UsageRecord.objects.count() < expected:
        began = time.perf_counter()
        for index, name in enumerate(CLUSTERS):
            cluster = Cluster.objects.get(name=name)
            text = usage_csv(name, seed + index)
            job = services.create_import_job(
                kind="csv", cluster=cluster, source_name=f"{name}-2024.csv", queue=False
            )
            services.import_file(job, io.BytesIO(text.encode()))
        timings["import (s)"] = time.perf_counter() - began
    if not UsageDailyRollup.objects.exists() or "import (s)" in timings:
        began = time.perf_counter()
        refresh_usage_rollups()
        timings["rollup refresh (s)"] = time.perf_counter() - began
    return timings


def _median_ms(client, url: str, repeats: int, before=None) -> tuple[float, float, int]:
    times = []
    for _ in range(repeats):
        if before is not None:
            before()
        began = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), min(times), response.status_code


def _queries(client, url: str, before) -> int:
    from django.db import connection

    before()
    executed: list[str] = []

    def count(execute, sql, params, many, context):
        executed.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        client.get(url)
    return len(executed)


def time_pages(repeats: int) -> list[tuple]:
    """Per page: status, cold median/best (caches cleared before each run), first view after a
    refresh (defaults precomputed by the worker's hook, not timed), warm median, queries."""
    from django.contrib.auth.models import Group, User
    from django.core.cache import caches
    from django.test import Client

    from access.models import FleetWideAccess
    from frontend.dashboards.usage_selectors import precompute_default_views

    user, _ = User.objects.get_or_create(username="bench-viewer")
    user.groups.add(Group.objects.get(name="viewer"))
    FleetWideAccess.objects.get_or_create(user=user)  # every team, as an unscoped viewer
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)

    def clear() -> None:
        for alias in ("default", "dashboards"):
            caches[alias].clear()

    def refreshed() -> None:
        clear()
        precompute_default_views()  # what the refresh task runs after the rollups

    from inventory.models import Cluster

    cluster_ids = {f"{{{name}}}": str(pk) for name, pk in Cluster.objects.values_list("name", "pk")}
    results = []
    for name, url in PAGES:
        for placeholder, pk in cluster_ids.items():
            url = url.replace(placeholder, pk)
        client.get(url)  # warm-up: imports, template loading
        cold, best, status = _median_ms(client, url, repeats, before=clear)
        cold_queries = _queries(client, url, clear)
        first = first_queries = None
        if url.startswith(PRECOMPUTED_PAGES):
            first, _, _ = _median_ms(client, url, repeats, before=refreshed)
            first_queries = _queries(client, url, refreshed)
        warm, _, _ = _median_ms(client, url, repeats)
        results.append((name, url, status, cold, best, first, warm, cold_queries, first_queries))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.database_url.startswith("postgres"):
        ensure_postgres_database(args.database_url)
    setup_django(args.database_url)
    from django.db import connection

    from accounting.models import UsageDailyRollup, UsageRecord

    timings = build(args.seed)
    # What the web server does at startup (config/wsgi.py): every view loaded and the objects
    # that built kept out of the garbage collector's scans.
    import config.wsgi  # noqa: F401

    records = UsageRecord.objects.count()
    rows = UsageDailyRollup.objects.count()
    print(f"database: {connection.vendor}; {records:,} usage records, {rows:,} rollup rows")
    for label, seconds in timings.items():
        print(f"{label}: {seconds:.1f}")
    print()
    print(
        "| page | status | cold median ms | cold best ms | first view after refresh ms "
        "| warm median ms | queries cold / after refresh |"
    )
    print("|---|---|---|---|---|---|---|")
    slow = []
    for name, url, status, cold, best, first, warm, queries, first_queries in time_pages(
        args.repeats
    ):
        after = "–" if first is None else f"{first:.0f}"
        after_queries = "" if first_queries is None else f" / {first_queries}"
        print(
            f"| {name} `{url}` | {status} | {cold:.0f} | {best:.0f} | {after} | {warm:.0f} "
            f"| {queries}{after_queries} |"
        )
        if cold > BUDGET_MS:
            slow.append(name)
    print()
    print(
        f"median of {args.repeats}; cold = caches cleared before each request (the reports "
        "computed from the rollups); first view after refresh = the worker's precompute ran"
    )
    print(f"cold over {BUDGET_MS} ms: {', '.join(slow) if slow else 'none'}")


if __name__ == "__main__":
    main()

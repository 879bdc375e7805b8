"""Fleet analysis fan-out: wall-clock time with 1, then 2 Celery worker processes.

A fleet analysis runs one `analysis_part` per cluster (a Celery group) and a `finalize`; the
parts are independent, so more worker processes on the same Redis and PostgreSQL should
finish a run sooner. This builds a fleet of ``--clusters`` clusters (copies of the three demo
clusters' pools and node groups, so mixed A100/H100, Ascend and L40S pools) with
``--jobs`` usage records per cluster in 2024 (imported through the real CSV import, so
each part also reads and applies measured usage), then for each worker count starts that many
real ``celery worker --concurrency 1`` processes on a private queue, runs one untimed warm-up
analysis of the year and ``--repeats`` timed runs (``recompute`` of the same analysis), and
prints the median wall-clock time (request to "succeeded" seen in the database) and the
speed-up.

    .venv/bin/python benchmarks/scaling.py                     # 24 clusters, 1 and 2 workers
    .venv/bin/python benchmarks/scaling.py --clusters 32 --workers 1 2 --repeats 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
VENV_BIN = Path(sys.executable).parent
QUEUE = f"scaling-{os.getpid()}"
PERIOD_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
PERIOD_END = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)

from benchmarks import common  # noqa: E402  (after sys.path)
from benchmarks.common import ensure_postgres_database  # noqa: E402


def setup_django(database_url: str, redis_url: str) -> None:
    common.setup_django(database_url, CELERY_BROKER_URL=redis_url, FLEETWISE_CELERY_QUEUE=QUEUE)


def usage_csv(cluster: str, models: list[str], cards_total: int, jobs: int, seed: int) -> bytes:
    """A year (2024) of one cluster's jobs as the documented usage CSV (vectorised)."""
    rng = np.random.default_rng(seed)
    first = np.datetime64("2024-01-01T00:00", "m")
    span_min = 366 * 24 * 60
    start = first + np.sort(rng.integers(0, span_min, jobs)).astype("timedelta64[m]")
    cards = rng.choice(np.array([1, 2, 4, 8, 16, 32]), jobs)
    raw_h = rng.lognormal(1.4, 1.0, jobs)
    hours = raw_h * (0.6 * cards_total * span_min / 60.0 / float((cards * raw_h).sum()))
    end = start + np.maximum(np.round(hours * 60), 1).astype("timedelta64[m]")
    columns = [
        np.full(jobs, cluster),
        np.char.add(f"{cluster}-", np.arange(jobs).astype(str)),
        cards.astype(str),
        np.char.add(np.datetime_as_string(start, unit="m"), "Z"),
        np.char.add(np.datetime_as_string(end, unit="m"), "Z"),
        rng.choice(np.array(["completed", "failed", "cancelled"]), jobs, p=[0.85, 0.1, 0.05]),
        rng.choice(np.array(models), jobs),
        rng.choice(np.array([f"team-{c}" for c in "abcdefgh"]), jobs),
        np.round(rng.uniform(0.2, 1.0, jobs), 3).astype(str),
    ]
    lines = columns[0]
    for column in columns[1:]:
        lines = np.char.add(np.char.add(lines, ","), column)
    header = "cluster,job_id,cards,start,end,state,accelerator_model,team,gpu_utilization"
    return (header + "\n" + "\n".join(lines.tolist()) + "\n").encode()


def build(clusters: int, jobs: int) -> int:
    """The scaled fleet (idempotent: reuses clusters already there); returns cluster count."""
    from django.core.management import call_command

    from accounting import services as imports
    from accounting.models import UsageRecord
    from inventory.models import Cluster, NodeGroup, Pool
    from inventory.services import load_demo_fleet

    call_command("migrate", verbosity=0)
    load_demo_fleet()
    templates = list(
        Cluster.objects.filter(name__in=["train-hetero", "train-ascend", "inference-eu"])
    )
    for index in range(clusters):
        name = f"scale-{index:02d}"
        if Cluster.objects.filter(name=name).exists():
            continue
        template = templates[index % len(templates)]
        pools = list(Pool.objects.filter(cluster=template))
        groups = list(NodeGroup.objects.filter(pool__in=pools).select_related("accelerator"))
        cluster = Cluster.objects.get(pk=template.pk)
        cluster.pk, cluster.id, cluster.name = None, None, name
        cluster.save()
        for pool in pools:
            pool_groups = [g for g in groups if g.pool_id == pool.pk]
            pool.pk, pool.id, pool.cluster = None, None, cluster
            pool.save()
            for group in pool_groups:
                group.pk, group.id, group.pool = None, None, pool
                group.save()
        models = sorted({g.accelerator.name for g in groups})
        cards = sum(g.node_count * g.cards_per_node for g in groups)
        job = imports.create_import_job(
            kind="csv", cluster=cluster, source_name=f"{name}.csv", queue=False
        )
        imports.import_file(job, io.BytesIO(usage_csv(name, models, cards, jobs, index)))
    print(
        f"fleet: {Cluster.objects.count()} clusters ({clusters} scaled copies), "
        f"{Pool.objects.count()} pools, {UsageRecord.objects.count():,} usage records"
    )
    return Cluster.objects.count()


def purge_queue() -> None:
    from config.celery_app import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(QUEUE)


def start_workers(count: int, log_dir: Path) -> list[subprocess.Popen]:
    procs = []
    for number in range(count):
        log = (log_dir / f"scaling-worker-{number}.log").open("w")
        procs.append(
            subprocess.Popen(
                [
                    str(VENV_BIN / "celery"),
                    "-A",
                    "config",
                    "worker",
                    "--concurrency",
                    "1",
                    "--queues",
                    QUEUE,
                    "--hostname",
                    f"scaling{number}-{os.getpid()}@%h",
                    "--loglevel",
                    "WARNING",
                    "--without-gossip",
                    "--without-mingle",
                ],
                cwd=REPO_ROOT,
                env=os.environ.copy(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    return procs


def wait_ready(count: int) -> None:
    from config.celery_app import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=1.0) or []
        if sum(1 for reply in replies for host in reply if host.startswith("scaling")) >= count:
            return
    raise SystemExit("workers did not answer a ping")


def run_once(analysis_id: int | None) -> tuple[int, float, float]:
    """One fleet analysis (new, or a recompute); returns (id, wall s, duration_s)."""
    from planner import services
    from planner.models import Analysis

    began = time.perf_counter()
    if analysis_id is None:
        analysis = services.start_analysis(
            scope="fleet", period_start=PERIOD_START, period_end=PERIOD_END
        )
    else:
        analysis = services.recompute(Analysis.objects.get(pk=analysis_id))
    while True:
        row = Analysis.objects.filter(pk=analysis.pk).values("status", "duration_s").get()
        if row["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.02)
    wall = time.perf_counter() - began
    if row["status"] != "succeeded":
        raise SystemExit(
            f"analysis {analysis.pk} failed: {Analysis.objects.get(pk=analysis.pk).error}"
        )
    return analysis.pk, wall, row["duration_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/fleetwise_scaling"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--clusters", type=int, default=24)
    parser.add_argument("--jobs", type=int, default=40_000, help="usage records per cluster")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.database_url.startswith("postgres"):
        ensure_postgres_database(args.database_url)
    setup_django(args.database_url, args.redis_url)
    total_clusters = build(args.clusters, args.jobs)
    purge_queue()  # the rollup refreshes the imports queued; not part of this measurement
    log_dir = REPO_ROOT / "var"
    log_dir.mkdir(exist_ok=True)

    results: dict[int, float] = {}
    print(f"load average at start: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| worker processes | runs (wall s) | median wall s | median duration_s | speed-up |")
    print("|---|---|---|---|---|")
    for count in args.workers:
        procs = start_workers(count, log_dir)
        try:
            wait_ready(count)
            analysis_id, _, _ = run_once(None)  # warm-up: imports, connections, caches
            walls, durations = [], []
            for _ in range(args.repeats):
                _, wall, duration = run_once(analysis_id)
                walls.append(wall)
                durations.append(duration)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(timeout=60)
        results[count] = statistics.median(walls)
        speedup = results[args.workers[0]] / results[count]
        print(
            f"| {count} | {', '.join(f'{w:.2f}' for w in walls)} | {results[count]:.2f} "
            f"| {statistics.median(durations):.2f} | {speedup:.2f}× |"
        )
    print(
        f"fleet analysis of {total_clusters} clusters = {total_clusters} parts + finalize; "
        f"load average at end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()

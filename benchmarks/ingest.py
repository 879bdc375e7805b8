"""Time the usage import (parser → PostgreSQL) on a 1,000,000-line sacct file.

Generates the file with ``benchmarks/gen_sacct.py`` (a year of a 2,000-card cluster), then, each
in a fresh process so its peak RSS is its own:

1. the first import through ``accounting.services.import_file`` (the same service as the
   upload API and ``manage.py import_usage``): one transaction, COPY + INSERT ... ON CONFLICT;
2. the same file again (every record is compared and left unchanged);
3. the ceiling: a bare ``pandas.read_csv`` + ``groupby`` of the same file (no validation, no
   database).

It uses its own database (``fleetwise_ingest_bench`` by default, created when missing) so the
development data is never touched. Command (from the repository root)::

    .venv/bin/python benchmarks/ingest.py                  # --lines N --database-url URL
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from benchmarks.common import ensure_postgres_database, peak_rss_mib, setup_django  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/fleetwise_ingest_bench"
CLUSTER = "fleet"  # the cluster name gen_sacct writes
TARGET_ROWS_PER_S = 50_000
TARGET_PEAK_RSS_MIB = 500


def fleet_cluster():
    """The inventory gen_sacct's jobs ran on: 150 H100 + 90 A100 + 10 MIG nodes of 8 cards."""
    from django.core.management import call_command

    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    call_command("migrate", verbosity=0)
    load_catalog(AcceleratorModel)
    site, _ = Site.objects.get_or_create(name="Benchmark DC", defaults={"pue": 1.2})
    cluster, _ = Cluster.objects.get_or_create(site=site, name=CLUSTER)
    for pool_name, model, nodes in (
        ("h100", "H100 SXM5 80GB", 150),
        ("a100", "A100 SXM4 80GB", 90),
        ("mig", "A100 SXM4 80GB", 10),
    ):
        pool, _ = Pool.objects.get_or_create(cluster=cluster, name=pool_name)
        NodeGroup.objects.update_or_create(
            pool=pool,
            name=f"{pool_name}-nodes",
            defaults={"accelerator": AcceleratorModel.objects.get(name=model), "node_count": nodes},
        )
    return cluster


def measure_import(path: Path, url: str, fresh: bool) -> None:
    setup_django(url)
    from django.db import connection

    from accounting import services
    from accounting.models import UsageRecord

    cluster = fleet_cluster()
    if fresh:
        # An empty table, not one full of dead rows from the previous run.
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {UsageRecord._meta.db_table}")
    job = services.create_import_job(
        kind="sacct", cluster=cluster, source_name=path.name, queue=False
    )
    baseline = peak_rss_mib()
    began = time.perf_counter()
    counts = services.import_file(job, str(path))
    seconds = time.perf_counter() - began
    label = "first import" if fresh else "re-import (unchanged)"
    lines_per_s = counts.lines_read / seconds
    print(
        f"{label}: {counts.lines_read:,} lines → {counts.records_read:,} records "
        f"({counts.records_created:,} new, {counts.records_updated:,} changed, "
        f"{counts.records_unchanged:,} unchanged) in {seconds:.2f} s = "
        f"{lines_per_s:,.0f} rows/s (input lines), {counts.records_read / seconds:,.0f} "
        f"records/s; peak RSS {peak_rss_mib():,.0f} MiB (Django + imports {baseline:,.0f} MiB)"
    )
    verdict = "meets" if lines_per_s >= TARGET_ROWS_PER_S else "MISSES"
    memory = "meets" if peak_rss_mib() < TARGET_PEAK_RSS_MIB else "MISSES"
    print(
        f"  {verdict} the {TARGET_ROWS_PER_S:,} rows/s target; {memory} the "
        f"{TARGET_PEAK_RSS_MIB} MB memory target"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    default_file = Path(tempfile.gettempdir()) / "fleetwise-ingest-sacct.txt"
    parser.add_argument("--file", type=Path, default=default_file)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--measure", choices=["first", "again"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        measure_import(args.file, args.database_url, fresh=args.measure == "first")
        return

    generator = REPO_ROOT / "benchmarks" / "gen_sacct.py"
    if not args.file.exists() or args.file.stat().st_mtime < generator.stat().st_mtime:
        subprocess.run(
            [
                sys.executable,
                str(generator),
                str(args.file),
                "--lines",
                str(args.lines),
                "--seed",
                str(args.seed),
            ],
            check=True,
        )
    ensure_postgres_database(args.database_url)
    for mode in ("first", "again"):
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--file",
                str(args.file),
                "--database-url",
                args.database_url,
                "--measure",
                mode,
            ],
            check=True,
        )
    for mode in ("parser", "ceiling"):
        subprocess.run(
            [sys.executable, str(generator), str(args.file), "--measure", mode], check=True
        )


if __name__ == "__main__":
    main()

"""Time the streamed CSV export of 1,000,000 usage records, beside pandas' own to_csv.

Each step runs in a fresh process so its peak RSS is its own:

1. setup: its own database (``fleetwise_export_bench``, created when missing), migrated, a
   cluster and pool, and N usage records generated in SQL (``generate_series``) when the
   table does not hold them yet;
2. export: ``GET /api/v1/usage-records/?format=csv`` through the whole Django stack (session
   login, permissions, filters, the streaming list; on PostgreSQL the database writes the
   CSV with ``COPY``), every chunk read and counted;
3. export_python: the same request with ``COPY`` switched off (rows read in chunks and
   converted in Python: the path of SQLite and of lists with computed columns);
4. ceiling: the same columns read into a ``pandas.DataFrame`` and ``DataFrame.to_csv``
   (whole table in memory, no formula defusing, no permissions).

Command (from the repository root; PostgreSQL at 127.0.0.1:5432, user postgres)::

    .venv/bin/python benchmarks/export.py            # --rows N --database-url URL
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from benchmarks.common import ensure_postgres_database, peak_rss_mib, setup_django  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/fleetwise_export_bench"
TARGET_SECONDS = 15.0
TARGET_PEAK_RSS_MIB = 300.0


# Rows made by the database itself: 1M inserts take seconds, not minutes.
GENERATE_SQL = """
INSERT INTO accounting_usagerecord (
    cluster_id, pool_id, accelerator_id, record_key, job_id, job_label, parent_job_id,
    account, "user", partition, gres_type, mig_profile, cards, nodes, submit, start, "end",
    duration_h, card_hours, state, scheduler_state, gpu_utilization, tokens_per_s,
    model_params, mfu, import_job_id
)
SELECT %(cluster)s, %(pool)s, %(accelerator)s, 'bench-' || g, (1000000 + g)::text,
       'train-' || (g %% 97), '', 'team-' || (g %% 23), 'user' || (g %% 211), 'h100',
       'h100', '', (1 + g %% 8)::float, 1 + g %% 4,
       ts - interval '5 minutes', ts, ts + (1 + g %% 36) * interval '10 minutes',
       (1 + g %% 36) / 6.0, (1 + g %% 8) * (1 + g %% 36) / 6.0,
       (ARRAY['completed','failed','cancelled','timeout','node_fail'])[1 + g %% 5],
       '', CASE WHEN g %% 3 = 0 THEN NULL ELSE (g %% 100) / 100.0 END, NULL, NULL,
       CASE WHEN g %% 7 = 0 THEN 0.41 ELSE NULL END, NULL
FROM generate_series(1, %(rows)s) AS g,
     LATERAL (SELECT timestamptz '2024-01-01' + g * interval '31 seconds' AS ts) AS t
"""


def step_setup(url: str, rows: int) -> dict:
    ensure_postgres_database(url)
    setup_django(url)
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0, interactive=False)
    from accounting.models import UsageRecord
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    h100 = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    site, _ = Site.objects.get_or_create(name="Bench DC", defaults={"pue": 1.2})
    cluster, _ = Cluster.objects.get_or_create(site=site, name="bench")
    pool, _ = Pool.objects.get_or_create(cluster=cluster, name="h100")
    NodeGroup.objects.get_or_create(
        pool=pool, name="h100", defaults={"accelerator": h100, "node_count": 250}
    )
    if not User.objects.filter(username="bench").exists():
        User.objects.create_superuser("bench", password=None)
    have = UsageRecord.objects.filter(cluster=cluster).count()
    if have != rows:
        UsageRecord.objects.filter(cluster=cluster).delete()
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                GENERATE_SQL,
                {"cluster": cluster.pk, "pool": pool.pk, "accelerator": h100.pk, "rows": rows},
            )
        print(f"generated {rows:,} usage records in {time.perf_counter() - started:.1f} s")
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE accounting_usagerecord")
    return {"rows": rows}


def step_export(url: str, rows: int, copy: bool = True) -> dict:
    setup_django(url)
    from django.contrib.auth.models import User
    from django.test import Client

    if not copy:  # the path SQLite (or a computed column) takes: rows converted in Python
        from core.tabular import exporting

        exporting.copy_csv_supported = lambda plain: False

    client = Client(SERVER_NAME="localhost")
    client.force_login(User.objects.get(username="bench"))
    started = time.perf_counter()
    response = client.get("/api/v1/usage-records/", {"format": "csv"})
    assert response.status_code == 200 and response.streaming, response.status_code
    size = lines = 0
    for chunk in response.streaming_content:
        size += len(chunk)
        lines += chunk.count(b"\n")
    seconds = time.perf_counter() - started
    assert lines == rows + 1, (lines, rows)
    return {"seconds": seconds, "bytes": size, "peak_rss_mib": peak_rss_mib()}


def step_ceiling(url: str, rows: int) -> dict:
    setup_django(url)
    import pandas as pd

    from accounting.api.serializers import UsageRecordSerializer
    from accounting.models import UsageRecord
    from core.tabular.exporting import values_plan

    plan = values_plan(UsageRecordSerializer())
    started = time.perf_counter()
    records = UsageRecord.objects.order_by("-start", "pk").values_list(*(p for _, p in plan))
    frame = pd.DataFrame.from_records(list(records), columns=[name for name, _ in plan])
    loaded = time.perf_counter()
    with open(os.devnull, "w") as sink:
        frame.to_csv(sink, index=False)
    done = time.perf_counter()
    assert len(frame) == rows
    return {
        "seconds": done - started,
        "load_seconds": loaded - started,
        "to_csv_seconds": done - loaded,
        "peak_rss_mib": peak_rss_mib(),
    }


def step_export_python(url: str, rows: int) -> dict:
    return step_export(url, rows, copy=False)


STEPS = {
    "setup": step_setup,
    "export": step_export,
    "export_python": step_export_python,
    "ceiling": step_ceiling,
}


def run_step(step: str, url: str, rows: int) -> dict:
    """One step in a fresh interpreter; it prints its result as the last line (JSON)."""
    done = subprocess.run(
        [sys.executable, __file__, "--step", step, "--rows", str(rows), "--database-url", url],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    if done.returncode != 0:
        sys.exit(f"{step} failed:\n{done.stdout}\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(line)
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--step", choices=sorted(STEPS))
    args = parser.parse_args()
    if args.step:
        print(json.dumps(STEPS[args.step](args.database_url, args.rows)))
        return
    run_step("setup", args.database_url, args.rows)
    export = run_step("export", args.database_url, args.rows)
    export_python = run_step("export_python", args.database_url, args.rows)
    ceiling = run_step("ceiling", args.database_url, args.rows)
    print(f"\n{args.rows:,} usage records → CSV ({export['bytes'] / 2**20:,.0f} MiB)")
    print(f"{'run':<44} {'seconds':>8} {'rows/s':>10} {'peak RSS':>10}")
    for name, result in (
        ("streamed export (GET ?format=csv)", export),
        ("  the same without COPY (rows via Python)", export_python),
        ("ceiling: DataFrame + to_csv (whole table)", ceiling),
    ):
        rate = args.rows / result["seconds"]
        print(
            f"{name:<44} {result['seconds']:>8.2f} {rate:>10,.0f} "
            f"{result['peak_rss_mib']:>7.0f} MiB"
        )
    print(
        f"  ceiling split: load {ceiling['load_seconds']:.2f} s, "
        f"to_csv {ceiling['to_csv_seconds']:.2f} s"
    )
    ok = export["seconds"] < TARGET_SECONDS and export["peak_rss_mib"] < TARGET_PEAK_RSS_MIB
    print(
        f"targets < {TARGET_SECONDS:.0f} s and < {TARGET_PEAK_RSS_MIB:.0f} MiB: "
        f"{'met' if ok else 'MISSED'}"
    )


if __name__ == "__main__":
    main()

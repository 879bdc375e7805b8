"""manage.py refresh_usage_rollups [--cluster NAME ...]

Rebuilds the daily usage rollups the Usage and Costs dashboards read (one transaction per
cluster), with a tqdm bar over the records read, and precomputes the dashboards' default
views. Imports queue this on a worker by themselves; run it after restoring a database,
changing TIME_ZONE or when a worker missed a refresh.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from accounting import services
from accounting.imports.rows import find_cluster
from accounting.rollups import refresh_usage_rollups, run_refresh_hooks
from accounting.selectors import usage_records_queryset


class Command(BaseCommand):
    help = "Rebuild the daily usage rollups (all clusters, or the named ones)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--cluster", action="append", default=[], help="Cluster id, name or site/name."
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args, **options) -> None:
        try:
            ids = [find_cluster(name).pk for name in options["cluster"]] or None
        except services.ImportInputError as exc:
            raise CommandError(str(exc)) from exc
        records = usage_records_queryset()
        total = (records if ids is None else records.filter(cluster_id__in=ids)).count()
        with tqdm(
            total=total, unit="records", desc="usage rollups", disable=options["no_progress"]
        ) as bar:
            counts = refresh_usage_rollups(ids, progress=bar.update)
        run_refresh_hooks(ids)  # the dashboards' default views, precomputed
        self.stdout.write(
            self.style.SUCCESS(
                f"Rolled up {counts.records:,} usage records of {counts.clusters} cluster(s) "
                f"into {counts.rows:,} daily rows."
            )
        )

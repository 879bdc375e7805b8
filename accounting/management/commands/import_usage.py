"""manage.py import_usage FILE --kind sacct|sreport|csv|xlsx --cluster NAME [layout options]

Layout options (``--columns``, ``--columns-preset``, ``--delimiter``, ``--time-unit``) are the
ones of :mod:`accounting.parsing.layouts`; docs/usage-import.md has the command per Slurm version.

Imports a usage file synchronously through the same service as the upload API (one
transaction: a bad line anywhere stores nothing), with a tqdm bar over the bytes read.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime
from tqdm import tqdm

from accounting import services
from accounting.imports.rows import find_cluster
from accounting.models import ImportKind
from accounting.parsing import UsageValidationError
from core.jobs.status import JobStatus


class _NoDefaultHostWarning(logging.Filter):
    """kombu warns that a filesystem:// broker URL names no host; that is by design here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "No hostname was supplied" not in record.getMessage()


NO_HOST_WARNING = _NoDefaultHostWarning()


def _aware(text: str | None, option: str) -> dt.datetime | None:
    if text is None:
        return None
    moment = parse_datetime(text) or (
        dt.datetime.combine(dt.date.fromisoformat(text), dt.time()) if len(text) == 10 else None
    )
    if moment is None:
        raise CommandError(f"--{option}: '{text}' is not an ISO 8601 date-time")
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


class Command(BaseCommand):
    help = "Import a usage file (sacct, sreport, CSV or XLSX) into one cluster."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--kind", required=True, choices=ImportKind.values)
        parser.add_argument("--cluster", required=True, help="Cluster id, name or site/name.")
        parser.add_argument("--timezone", default="UTC", help="Zone the times are printed in.")
        parser.add_argument(
            "--as-of",
            "--exported-at",
            dest="exported_at",
            help="The export's as-of time (ISO 8601), used when the file holds no time of its "
            "own; running jobs count up to the as-of time.",
        )
        parser.add_argument("--period-start", help="sreport without banner: period start.")
        parser.add_argument("--period-end", help="sreport without banner: period end.")
        parser.add_argument(
            "--columns", help="Header-less output: the --format list it was exported with."
        )
        parser.add_argument(
            "--columns-preset", help="Header-less output: a named column list (default, xdmod)."
        )
        parser.add_argument("--delimiter", help="sacct --delimiter (default: from the header).")
        parser.add_argument(
            "--time-unit", help="sreport without banner: hours, minutes or seconds (sreport -t)."
        )
        parser.add_argument(
            "--gpuutil",
            choices=["summed", "one-gpu"],
            help="sacct gres/gpuutil: summed over GPUs (Slurm >= 24.05.1, default) or one GPU's.",
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args, **options) -> None:
        logging.getLogger("kombu.connection").addFilter(NO_HOST_WARNING)
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            cluster = find_cluster(options["cluster"])
            job = services.create_import_job(
                kind=options["kind"],
                cluster=cluster,
                source_name=path.name,
                size_bytes=path.stat().st_size,
                timezone_name=options["timezone"],
                exported_at=_aware(options["exported_at"], "as-of"),
                report_period_start=_aware(options["period_start"], "period-start"),
                report_period_end=_aware(options["period_end"], "period-end"),
                parse_options={
                    "columns": options["columns"],
                    "columns_preset": options["columns_preset"],
                    "delimiter": options["delimiter"],
                    "time_unit": options["time_unit"],
                    "gpuutil": options["gpuutil"],
                },
                queue=False,
            )
        except services.ImportInputError as exc:
            raise CommandError(str(exc)) from exc
        run_id = str(job.run_id)
        services.mark_running(job.pk, run_id)
        bar = tqdm(
            total=path.stat().st_size,
            unit="B",
            unit_scale=True,
            desc=f"{path.name} → {cluster.name}",
            disable=options["no_progress"],
        )

        def advance(progress: services.ImportProgress) -> None:
            bar.update(progress.bytes_read - bar.n)

        try:
            counts = services.import_file(
                job,
                str(path),
                progress=advance,
                before_commit=lambda counts: services.record_success(job.pk, run_id, counts),
            )
        except UsageValidationError as exc:
            bar.close()
            services.fail(job.pk, run_id, str(exc), [str(issue) for issue in exc.issues])
            raise CommandError(f"nothing imported: {exc}") from exc
        bar.update(bar.total - bar.n)
        bar.close()
        job.refresh_from_db()
        assert job.status == JobStatus.SUCCEEDED
        self.stdout.write(
            self.style.SUCCESS(
                f"import #{job.pk}: {counts.lines_read:,} lines, {counts.records_read:,} records "
                f"({counts.records_created:,} new, {counts.records_updated:,} changed, "
                f"{counts.records_unchanged:,} unchanged, {counts.records_skipped:,} lines "
                f"skipped) in {job.duration_s:.1f} s"
            )
        )
        for row in counts.skipped:
            examples = ", ".join(row["examples"])
            self.stdout.write(f"  skipped {row['count']:,}: {row['reason']} (e.g. {examples})")
        for warning in counts.warnings:
            self.stdout.write(self.style.WARNING(warning))

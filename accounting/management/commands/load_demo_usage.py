"""manage.py load_demo_usage: a year of demo usage for the demo fleet, through the importer."""

from __future__ import annotations

import datetime as dt
import logging

from django.core.management.base import BaseCommand

from accounting.demo_usage import load_demo_serving_load, load_demo_usage
from accounting.management.commands.import_usage import NO_HOST_WARNING
from accounting.rollups import refresh_usage_rollups


class Command(BaseCommand):
    help = "Import a year of demo usage (sacct) for the demo fleet; running it again adds nothing."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--end", help="Day after the last demo day (ISO date; default: today, UTC)."
        )

    def handle(self, *args, **options) -> None:
        logging.getLogger("kombu.connection").addFilter(NO_HOST_WARNING)
        end = (
            dt.date.fromisoformat(options["end"])
            if options["end"]
            else dt.datetime.now(dt.UTC).date()
        )
        created = load_demo_usage(end)
        serving = load_demo_serving_load(end)
        if any(created.values()):
            refresh_usage_rollups()  # the dashboards read daily sums; fill them now
        summary = ", ".join(f"{name}: {n:,} new records" for name, n in created.items())
        self.stdout.write(self.style.SUCCESS(f"Demo usage ready ({summary or 'no demo fleet'})."))
        if serving:
            self.stdout.write(self.style.SUCCESS("Demo serving load added to serving-l40s."))

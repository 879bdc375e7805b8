"""manage.py load_demo_results: the demo's fleet analysis and plan, computed here."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from planner.demo import load_demo_results


class Command(BaseCommand):
    help = (
        "Compute a fleet analysis of the last 30 days and the demo plan (GPT-3 175B on 1,024 "
        "A100) in this process, unless fresh ones exist; no worker needed."
    )

    def handle(self, *args, **options) -> None:
        began = time.monotonic()
        done = load_demo_results()
        took_s = time.monotonic() - began
        analysis = "computed" if done.analysis_computed else "fresh already, kept"
        plan = "computed" if done.plan_computed else "exists already, kept"
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo results ready in {took_s:.1f} s: fleet analysis {analysis}, "
                f"demo plan {plan}."
            )
        )

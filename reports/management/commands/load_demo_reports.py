"""Example report schedules for the demo fleet (idempotent: running it twice changes nothing)."""

from __future__ import annotations

import datetime as dt

from django.core.management.base import BaseCommand

from access.services import mailing_list_account
from inventory.models import Cluster
from reports import services
from reports.models import ReportSchedule

DEMO_SCHEDULES = [
    {
        "name": "Weekly utilization per cluster owner",
        "template": "utilization",
        "scope": "cluster",
        "frequency": "weekly",
        "send_time": dt.time(8, 0),
        "recipient_addresses": ["cluster-owner@example.com"],
        "formats": ["html_email", "xlsx"],
    },
    {
        "name": "Monthly cost and chargeback (finance)",
        "template": "cost_chargeback",
        "scope": "fleet",
        "frequency": "monthly",
        "send_time": dt.time(7, 0),
        "recipient_addresses": ["finance@example.com"],
        "formats": ["html_email", "xlsx", "csv"],
    },
    {
        "name": "Quarterly efficiency review (leadership)",
        "template": "efficiency_review",
        "scope": "fleet",
        "frequency": "quarterly",
        "send_time": dt.time(9, 0),
        "recipient_addresses": ["leadership@example.com"],
        "formats": ["html_email", "xlsx", "print_html"],
    },
]


class Command(BaseCommand):
    help = "Create the example report schedules (weekly, monthly, quarterly) for the demo fleet."

    def handle(self, *args, **options):
        cluster = Cluster.objects.order_by("pk").first()
        created = 0
        for values in DEMO_SCHEDULES:
            values = dict(values)
            if values["scope"] == "cluster":
                if cluster is None:
                    self.stdout.write("No cluster yet (run load_demo_fleet): skipped a schedule.")
                    continue
                values["cluster"] = cluster
            if ReportSchedule.objects.filter(name=values["name"]).exists():
                continue
            for address in values["recipient_addresses"]:
                # A report goes only to accounts that may see it: the lists get one each.
                mailing_list_account(address, note="demo mailing list")
            services.save_schedule(ReportSchedule(**values))
            created += 1
        self.stdout.write(f"{created} report schedule(s) created.")

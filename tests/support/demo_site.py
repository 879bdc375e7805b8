"""The whole demo, as a visitor sees it: the demo fleet with its usage, a fleet analysis, a
plan and a weekly report, all computed in this process, and the pages that show them."""

from __future__ import annotations

import datetime as dt

from tests.support.builders import plan_payload
from tests.support.inline import run_analysis_inline, run_plan_inline


def demo_pages(owner, capture, *, usage: bool) -> dict[str, str]:
    """The demo fleet (with a year of its usage, or none at all), an analysis, a plan (owned by
    ``owner``) and a weekly report, computed here (``capture``:
    ``django_capture_on_commit_callbacks``, holding back the worker); the pages by name."""
    from accounting.demo_usage import load_demo_usage
    from accounting.rollups import refresh_usage_rollups
    from inventory.models import Pool
    from inventory.services import load_demo_fleet
    from planner import plans, services
    from reports import periods
    from reports import services as reports
    from reports.models import ReportSchedule

    load_demo_fleet()
    today = dt.datetime.now(dt.UTC).date()
    if usage:
        load_demo_usage(today)
    refresh_usage_rollups()
    with capture(execute=False):
        analysis = services.start_analysis(scope="fleet")
        plan = plans.create_plan(owner=owner, **plan_payload())
    analysis = run_analysis_inline(analysis)
    run_plan_inline(plan.pk)
    schedule = reports.save_schedule(
        ReportSchedule(
            name="Demo weekly",
            frequency="weekly",
            timezone="UTC",
            template="efficiency_review",
            recipient_addresses=["finance@example.com"],
            formats=["html_email", "xlsx", "print_html"],
        )
    )
    end = dt.datetime.combine(today - dt.timedelta(days=today.weekday()), dt.time(), dt.UTC)
    report, _ = reports.get_or_create_report(
        schedule, periods.Period(end - dt.timedelta(days=7), end)
    )
    assert reports.generate(report.pk).done
    pool = Pool.objects.get(name="mixed-a100-h100")
    return {
        "Fleet": "/",
        "Analyses": "/analyses/",
        "Mixed pool": f"/analyses/{analysis.pk}/pools/{pool.pk}/",
        "Usage": "/usage/",
        "Costs": "/costs/",
        "Planner": "/planner/",
        "Plan": f"/planner/{plan.pk}/",
        "Reports": "/reports/",
        "Report": f"/reports/{report.pk}/",
        "Print page": f"/reports/{report.pk}/view/",
    }

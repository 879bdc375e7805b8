"""The fleet overview ("/"): effective utilization of the whole fleet and where it is lost.

Numbers come from the latest successful fleet analysis (precomputed by the worker); the page
never recomputes them. Without one it says so and offers planners to run it.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_POST, require_safe

from access.pages import role_required
from access.roles import PLANNER, has_role
from core.scopes import Scope
from frontend.dashboards import analyses
from frontend.dashboards import analysis_selectors as sel
from frontend.dashboards.money import money_context
from inventory.selectors import clusters_with_pools, fleet_totals, pool_totals
from planner import services


def pool_rows() -> list[dict]:
    """Every pool with its card mix (prefetched: a fixed number of queries)."""
    return [
        {"cluster": cluster, "pool": pool, "totals": pool_totals(pool)}
        for cluster in clusters_with_pools()
        for pool in cluster.pools.all()
    ]


@role_required()
@require_safe
def fleet_overview(request: HttpRequest):
    analysis = sel.latest_fleet_analysis()
    in_flight = sel.fleet_analysis_in_flight()
    context = {
        "analysis": analysis,
        "in_flight": in_flight,
        "poll_url": reverse("analysis-detail", args=[in_flight.pk]) if in_flight else "",
        "stale_count": sel.stale_count(),
        "rows": pool_rows(),
        "fleet": fleet_totals(),
        "can_edit": has_role(request.user, PLANNER),
    }
    if analysis is not None and sel.has_results(analysis.results):
        results = analysis.results
        row = results["summary"]
        factors = sel.factor_frame(row)
        context |= {
            "summary": row,
            "currency": row.get("currency"),
            "factors": factors.to_dict("records"),
            "money": sel.money_lost(row),
            **money_context(request, results, analysis.period_end.date()),
            "site_tiles": sel.scope_tiles(results, "site"),
            "cluster_tiles": sel.scope_tiles(results, "cluster"),
            "analysis_pools": results.get("pools", []),  # their telemetry notes
            "hetero_pool_ids": {
                p["pool_id"] for p in results.get("pools", []) if sel.is_heterogeneous(p)
            },
            **analyses.result_charts(request, analysis, sel.SUMMARY, row),
        }
    return render(request, "frontend/dashboards/fleet.html", context)


@role_required()
@require_POST
def run_fleet_analysis(request: HttpRequest):
    """Queue a fleet analysis of the service's default period (the last 30 days)."""
    analysis = services.start_analysis(scope=Scope.FLEET, user=request.user)
    messages.success(
        request,
        f"Fleet analysis of {analysis.period_start:%Y-%m-%d %H:%M} to "
        f"{analysis.period_end:%Y-%m-%d %H:%M} UTC queued.",
    )
    return redirect("frontend:home")


urlpatterns = [
    path("", fleet_overview, name="home"),
    path("fleet/run-analysis/", run_fleet_analysis, name="fleet-run-analysis"),
]

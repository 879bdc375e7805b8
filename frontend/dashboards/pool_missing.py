"""A link to a pool's part of an analysis that has none (the pool was added after the run):
a page that says why and offers to run an analysis of the pool, never a dead end."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from access.roles import PLANNER, has_role
from frontend.dashboards import analysis_selectors as sel
from frontend.forms_analysis import AnalysisStartForm
from inventory.models import Pool
from planner.models import Analysis


def _why_not_in(pool: Pool, analysis: Analysis) -> str:
    """Why an analysis holds no figures for a pool that exists."""
    ran = analysis.started_at or analysis.created
    if pool.created and ran and pool.created > ran:
        return (
            f"Pool {pool.name} was added on {pool.created:%Y-%m-%d %H:%M} UTC, after this "
            f"analysis ran ({ran:%Y-%m-%d %H:%M} UTC), so it has no figures for it yet."
        )
    return (
        f"This analysis has no figures for pool {pool.name}: the pool was not part of its "
        "scope or had no cards when it ran."
    )


def pool_not_in_analysis(request: HttpRequest, pool: Pool, analysis: Analysis) -> HttpResponse:
    """A link to a pool's part of an analysis that does not have one: why, and a way to run
    an analysis of the pool (200, not a dead end)."""
    form = AnalysisStartForm()
    context = {
        "pool": pool,
        "analysis": analysis,
        "why": _why_not_in(pool, analysis),
        "can_start": has_role(request.user, PLANNER),
        "run": {
            "scope": "pool",
            "object_id": f"pool:{pool.pk}",
            "period_start": form.fields["period_start"].initial,
            "period_end": form.fields["period_end"].initial,
        },
        "running": sel.analyses_light()
        .filter(scope="pool", object_id=pool.pk, status__in=sel.IN_FLIGHT)
        .order_by("-created")
        .first(),
    }
    return render(request, "frontend/dashboards/analysis_pool_missing.html", context)

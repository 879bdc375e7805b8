"""The live Slurm sources page: per cluster, when its slurmrestd was last pulled with
success, the last failure and why, the back-off and the next attempt.

Planners read it (they import usage); the URLs only administrators see, as the sources'
API is theirs (it holds the tokens). A team-scoped user sees no record counts: a pull's
counts are every team's.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_safe

from access.pages import role_required
from access.roles import ADMIN, PLANNER, has_role
from access.scoping import visible_teams
from accounting.models import SlurmrestdSource
from core.outbound import without_credentials


def _row(source: SlurmrestdSource, show_url: bool) -> dict:
    return {
        "source": source,
        "url": without_credentials(source.url) if show_url else "",
        "never_pulled": source.last_success_at is None and source.last_failure_at is None,
        "records_written": source.records_created + source.records_updated,
    }


@role_required(read_role=PLANNER)
@require_safe
def slurmrestd_sources(request: HttpRequest) -> HttpResponse:
    show_url = has_role(request.user, ADMIN)
    sources = SlurmrestdSource.objects.select_related("cluster__site").order_by(
        "cluster__site__name", "cluster__name"
    )
    context = {
        "rows": [_row(source, show_url) for source in sources],
        "show_url": show_url,
        "show_counts": visible_teams(request.user) is None,
    }
    return render(request, "frontend/dashboards/slurmrestd_sources.html", context)


urlpatterns = [
    path("usage/live-sources/", slurmrestd_sources, name="slurmrestd-sources"),
]

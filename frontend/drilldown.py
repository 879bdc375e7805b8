"""Drill-down: from a chart mark, tile or table row to the page of that scope.

A chart carries each mark's target in its Plotly ``customdata`` (the last item, a URL
starting with "/"); ``page-tools.js`` opens it on click and adds the page's period (and, on
the same page, its other filters). Table rows get the same targets as plain links, built here
with the request's filters. A dashboard's cluster opens that dashboard for the cluster, by
pool; a pool, site or card model opens its inventory page.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.http import HttpRequest
from django.urls import reverse

from inventory.models import AcceleratorModel, Cluster, Pool, Site

# Dashboard filters a drill target sets itself (the rest of the page's query is kept).
SCOPE_PARAMS = ("cluster", "group_by", "page")


def _ids_by_label(group: str) -> dict[str, int]:
    """Label as the dashboards print it → id (one query); ambiguous labels are left out."""
    if group == "pool":
        rows = (
            (f"{c}/{n}", pk) for pk, c, n in Pool.objects.values_list("pk", "cluster__name", "name")
        )
    else:
        model = {"cluster": Cluster, "site": Site, "accelerator": AcceleratorModel}.get(group)
        if model is None:
            return {}
        rows = ((name, pk) for name, pk in model.objects.values_list("name", "pk"))
    ids: dict[str, int] = {}
    seen: set[str] = set()
    for label, pk in rows:
        if label in seen:
            ids.pop(label, None)  # two clusters of one name (different sites): no guess
        else:
            ids[label] = pk
            seen.add(label)
    return ids


def scope_target(group: str, pk: int, dashboard: str) -> str:
    """The page one level down for a scope: a dashboard by cluster, or the inventory page."""
    if group == "cluster":
        return reverse(f"frontend:{dashboard}") + f"?cluster={pk}&group_by=pool"
    names = {"pool": "pool", "site": "site", "accelerator": "accelerator"}
    return reverse(f"frontend:{names[group]}-detail", args=[pk])


def week_chargeback_url(week_start: dt.date) -> str:
    """A team's week (heatmap cell) has no page of its own: the Costs chargeback of that week
    lists what each team was charged."""
    end = week_start + dt.timedelta(days=7)
    return (
        reverse("frontend:costs")
        + f"?start={week_start.isoformat()}&end={end.isoformat()}&granularity=week#chargeback"
    )


def mark_urls(group: str, labels: Iterable, dashboard: str) -> list[str]:
    """One target per label, "" where the scope has no page (a team, an unknown label)."""
    ids = _ids_by_label(group)
    return [
        scope_target(group, ids[str(label)], dashboard) if str(label) in ids else ""
        for label in labels
    ]


def with_page_filters(request: HttpRequest, target: str, period: tuple | None = None) -> str:
    """A drill target with the page's period (``period``: the days in effect) and other
    filters, for a plain link."""
    if not target:
        return ""
    path, _, query = target.partition("?")
    params = request.GET.copy()
    if period is not None:
        params["start"], params["end"] = (day.isoformat() for day in period)
    for name in SCOPE_PARAMS:
        params.pop(name, None)
    if path != request.path:
        for name in list(params):
            if name not in ("start", "end"):
                params.pop(name)
    merged = "&".join(part for part in (query, params.urlencode()) if part)
    return f"{path}?{merged}" if merged else path

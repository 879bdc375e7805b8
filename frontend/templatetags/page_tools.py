"""Template tags of the pages' tool rows: the export toolbar and the time range presets."""

from __future__ import annotations

from django import template
from django.http import QueryDict
from django.utils import timezone

from accounting.rollups import rollup_status
from core import timerange
from frontend import drilldown, sharing

register = template.Library()

# A list page's model → its API list (inventory lists use the API's filtersets).
API_LISTS = {
    "inventory.site": "/api/v1/sites/",
    "inventory.cluster": "/api/v1/clusters/",
    "inventory.pool": "/api/v1/pools/",
    "inventory.nodegroup": "/api/v1/node-groups/",
    "inventory.acceleratormodel": "/api/v1/accelerator-models/",
}
# Where a list page's filter is named differently from the API's.
API_RENAMES = {"inventory.acceleratormodel": {"name": "name__icontains"}}


@register.inclusion_tag("frontend/includes/export_toolbar.html", takes_context=True)
def export_toolbar(
    context,
    api_path: str = "",
    title: str = "",
    use_query: bool = False,
    keys: str = "",
    extra: str = "",
):
    """CSV, XLSX and spreadsheet-link buttons for an API list with the page's filters.

    Without ``api_path`` the page's model names its list; ``use_query`` takes the dashboard's
    query in effect (defaults filled in) rather than the address bar; ``keys`` (comma
    separated, "-" for none) keeps only the filters that API list takes; ``extra`` is a query
    string of the API's own names for a page filter named differently (``stale=true``).
    """
    request = context["request"]
    rename = {}
    if not api_path:
        label = context["view"].model._meta.label_lower
        api_path, rename = API_LISTS[label], API_RENAMES.get(label, {})
    params = context.get("query") if use_query and context.get("query") else request.GET
    if keys:
        wanted = keys.split(",")
        params = {key: params.get(key) for key in wanted if key in params}
    pairs = sharing.api_params(params, rename) + sharing.api_params(QueryDict(extra))
    title = title or context.get("section_title") or api_path.strip("/").rsplit("/", 1)[-1]
    return {"export": sharing.export_urls(api_path, pairs, title)}


@register.inclusion_tag("frontend/includes/time_range.html", takes_context=True)
def time_presets(context):
    """Range presets (fit to data, last 7/30/90 days, this month, last quarter, year to date)."""
    request = context["request"]
    query = context.get("query") or {}
    status = context.get("rollups") or rollup_status()
    ranges = timerange.presets(timezone.localdate(), status["first_day"], status["last_day"])
    current = (query["start"], query["end"]) if "start" in query else None
    return {"presets": timerange.preset_links(request.GET, ranges, current), "query": query}


@register.simple_tag(takes_context=True)
def scope_up_url(context) -> str:
    """The dashboard one level up: the same period and filters without the scope (breadcrumbs)."""
    request = context["request"]
    params = request.GET.copy()
    for name in drilldown.SCOPE_PARAMS:
        params.pop(name, None)
    return f"{request.path}?{params.urlencode()}" if params else request.path

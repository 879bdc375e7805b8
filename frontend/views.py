"""Browser pages outside the inventory: the fleet overview and placeholders. All need login."""

from django.shortcuts import render

from access.roles import PLANNER, has_role
from frontend.permissions import role_required
from inventory.selectors import clusters_with_pools, fleet_totals, pool_totals

# Sections of the app that later issues fill in; the navigation already links to them.
COMING_SOON = {
    "analyses": "Analyses",
    "usage": "Usage",
    "costs": "Costs",
    "planner": "Planner",
    "reports": "Reports",
}


@role_required()
def home(request):
    clusters = list(clusters_with_pools())
    rows = [
        {"cluster": cluster, "pool": pool, "totals": pool_totals(pool)}
        for cluster in clusters
        for pool in cluster.pools.all()
    ]
    context = {"rows": rows, "fleet": fleet_totals(), "can_edit": has_role(request.user, PLANNER)}
    return render(request, "frontend/home.html", context)


@role_required()
def coming_soon(request, section: str):
    return render(request, "frontend/coming_soon.html", {"section": COMING_SOON[section]})

"""Browser pages. Every page requires login."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from inventory.selectors import clusters_with_pools, fleet_totals, pool_totals


@login_required
def home(request):
    clusters = list(clusters_with_pools())
    rows = [
        {"cluster": cluster, "pool": pool, "totals": pool_totals(pool)}
        for cluster in clusters
        for pool in cluster.pools.all()
    ]
    return render(request, "frontend/home.html", {"rows": rows, "fleet": fleet_totals()})

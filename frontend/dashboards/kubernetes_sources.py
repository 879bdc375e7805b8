"""The Kubernetes sources page (administrators): per cluster, when kube-state-metrics was last
read with success, the last failure and why, the back-off, the last window's card-hours per
pool, team and card model, and the nodes and namespaces no rule mapped (docs/kubernetes-usage.md).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_safe

from access.pages import role_required
from access.roles import ADMIN
from core.outbound import without_credentials
from telemetry.kubernetes.models import KubernetesSource


def _row(source: KubernetesSource) -> dict[str, Any]:
    telemetry = getattr(source.cluster, "prometheus_source", None)
    url = source.url or (telemetry.url if telemetry is not None else "")
    return {
        "source": source,
        "url": without_credentials(url) if url else "",
        "url_is_telemetry": not source.url,
        "never_fetched": source.last_success_at is None and source.last_failure_at is None,
    }


@role_required(read_role=ADMIN, write_role=ADMIN)
@require_safe
def kubernetes_sources(request: HttpRequest) -> HttpResponse:
    sources = KubernetesSource.objects.select_related(
        "cluster__site", "cluster__prometheus_source"
    ).order_by("cluster__site__name", "cluster__name")
    context = {"rows": [_row(source) for source in sources]}
    return render(request, "frontend/dashboards/kubernetes_sources.html", context)


urlpatterns = [
    path("usage/kubernetes-sources/", kubernetes_sources, name="kubernetes-sources"),
]

from django.urls import path
from rest_framework.routers import DefaultRouter

from telemetry.api import kubernetes, views

router = DefaultRouter()
router.register("telemetry/sources", views.PrometheusSourceViewSet, basename="telemetry-source")
router.register("telemetry/host-patterns", views.HostPatternViewSet, basename="host-pattern")
router.register("telemetry/fetches", views.TelemetryFetchViewSet, basename="telemetry-fetch")
router.register(
    "kubernetes-sources", kubernetes.KubernetesSourceViewSet, basename="kubernetes-source"
)
router.register(
    "kubernetes-node-rules", kubernetes.KubernetesNodeRuleViewSet, basename="kubernetes-node-rule"
)
router.register(
    "kubernetes-team-rules", kubernetes.KubernetesTeamRuleViewSet, basename="kubernetes-team-rule"
)

urlpatterns = [
    *router.urls,
    path("telemetry/gpus/", views.GpuRollupRowsView.as_view(), name="telemetry-gpus"),
    path("telemetry/teams/", views.TeamActivityRowsView.as_view(), name="telemetry-teams"),
    path(
        "telemetry/wasted-allocation/",
        views.WastedAllocationRowsView.as_view(),
        name="telemetry-wasted-allocation",
    ),
    path(
        "telemetry/chargeback/rows/",
        views.ActivityChargebackRowsView.as_view(),
        name="telemetry-chargeback-rows",
    ),
]

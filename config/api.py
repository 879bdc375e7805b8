"""The /api/v1/ URL space: every app's router plus shared endpoints (worker check, schema)."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from access.permissions import RolePermission
from inventory.api.views import TotalsCheckStatusView

SCHEMA_ROLE = [RolePermission]

urlpatterns = [
    path("", include("inventory.api.urls")),
    path("", include("planner.api.urls")),
    path("", include("accounting.api.urls")),
    path("", include("exports.api.urls")),
    path("", include("reports.api.urls")),
    path("", include("telemetry.api.urls")),
    path("", include("alerts.api.urls")),
    path("tasks/<str:task_id>/", TotalsCheckStatusView.as_view(), name="task-status"),
    # The schema maps every endpoint and field: a role (viewer or above) to read it, like the API.
    path("schema/", SpectacularAPIView.as_view(permission_classes=SCHEMA_ROLE), name="api-schema"),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(url_name="api-schema", permission_classes=SCHEMA_ROLE),
        name="api-docs",
    ),
    path(
        "redoc/",
        SpectacularRedocView.as_view(url_name="api-schema", permission_classes=SCHEMA_ROLE),
        name="api-redoc",
    ),
]

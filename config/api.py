"""The /api/v1/ URL space: every app's router plus shared endpoints (task status, schema)."""

import json

from django.urls import include, path
from django_celery_results.models import TaskResult
from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from access.permissions import RolePermission


class TaskStatusView(APIView):
    """State and result of a Celery task, read from the result table the worker writes."""

    @extend_schema(
        responses=inline_serializer(
            "TaskStatus",
            {
                "task_id": serializers.CharField(),
                "status": serializers.CharField(),
                "result": serializers.JSONField(allow_null=True),
                "date_done": serializers.DateTimeField(allow_null=True),
            },
        )
    )
    def get(self, request, task_id: str):
        row = TaskResult.objects.filter(task_id=task_id).first()
        if row is None:
            # Unknown to the result table: queued and not started yet (or never existed).
            return Response(
                {"task_id": task_id, "status": "PENDING", "result": None, "date_done": None}
            )
        try:
            result = json.loads(row.result) if row.result else None
        except ValueError:
            result = row.result
        return Response(
            {"task_id": task_id, "status": row.status, "result": result, "date_done": row.date_done}
        )


SCHEMA_ROLE = [RolePermission]

urlpatterns = [
    path("", include("inventory.api.urls")),
    path("", include("planner.api.urls")),
    path("", include("accounting.api.urls")),
    path("", include("exports.api.urls")),
    path("", include("reports.api.urls")),
    path("tasks/<str:task_id>/", TaskStatusView.as_view(), name="task-status"),
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
